"""Old path of ``gregor.broker.common.topics``, kept only for the coordinator adapters (remove with them)."""

from gregor.broker.common.topics import *  # noqa: F403
