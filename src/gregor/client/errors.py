"""The old path of :mod:`gregor.client.core.errors`, kept for importers outside the client (the
broker, the console, tests); new code imports the core module."""

from gregor.client.core.errors import (
    BufferFullError,
    ConfigError,
    ErrorCode,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    RetriableError,
    UnsupportedForBrokerError,
    error_for_code,
    raise_for_error,
)

__all__ = [
    "BufferFullError",
    "ConfigError",
    "ErrorCode",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoBrokersAvailableError",
    "RetriableError",
    "UnsupportedForBrokerError",
    "error_for_code",
    "raise_for_error",
]
