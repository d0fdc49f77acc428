"""Old path of ``gregor.broker.replication.partition``, kept only for the coordinator adapters (remove with them)."""

from gregor.broker.replication.partition import *  # noqa: F403
