"""Old path of ``gregor.broker.config.topic_configs``, kept only for the coordinator adapters (remove with them)."""

from gregor.broker.config.topic_configs import *  # noqa: F403
