"""Old path of ``gregor.broker.common.errors``, kept only for the coordinator adapters (remove with them)."""

from gregor.broker.common.errors import *  # noqa: F403
