"""The broker's configuration: the properties file (``broker_config``), dynamic and per-topic
configs, client-metrics subscriptions, listener security and the metrics endpoint's web config.
"""

# Old path ``gregor.broker.config`` (one module until issue 36), kept only for the coordinator
# adapters (remove with them).
from gregor.broker.config.broker_config import *  # noqa: F403
