"""Old path of ``gregor.broker.replication.replica_manager``, kept only for the coordinator adapters (remove with them)."""

from gregor.broker.replication.replica_manager import *  # noqa: F403
