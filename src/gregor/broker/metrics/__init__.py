"""The broker's metrics: the Prometheus registry and its HTTP endpoint, and client telemetry
(KIP-714) pushed by clients."""
