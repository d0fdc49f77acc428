"""Old path of ``gregor.broker.common.events``, kept only for the coordinator adapters (remove with them)."""

from gregor.broker.common.events import *  # noqa: F403
