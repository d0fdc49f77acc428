"""The broker's configuration: the properties file (``broker_config``), dynamic and per-topic
configs, client-metrics subscriptions, listener security and the metrics endpoint's web config.
"""
