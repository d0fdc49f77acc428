"""Client-side errors, beside the broker error codes of :mod:`gregor.protocol.errors`.

Every error the client raises is a :class:`~gregor.protocol.errors.KafkaError`; the ones a
caller may simply retry are :class:`~gregor.protocol.errors.RetriableError` (``.retriable``).
Broker error codes become their generated exception class (``error_for_code``).
"""

from __future__ import annotations

from gregor.protocol.errors import (
    ErrorCode,
    KafkaError,
    RetriableError,
    error_for_code,
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


class KafkaConnectionError(RetriableError):
    """The connection to a broker failed or was closed with requests outstanding."""

    name = "NETWORK_EXCEPTION"


class KafkaTimeoutError(RetriableError):
    """An operation did not complete within its timeout."""

    name = "REQUEST_TIMED_OUT"


class NoBrokersAvailableError(RetriableError):
    """None of the bootstrap servers (or known brokers) could be reached."""

    name = "BROKER_NOT_AVAILABLE"


class UnsupportedForBrokerError(KafkaError):
    """The broker does not implement an API (or version) the operation needs."""

    name = "UNSUPPORTED_VERSION"


class BufferFullError(RetriableError):
    """``buffer.memory`` is used up and the call may not wait (``send_nowait`` on the loop)."""

    name = "BUFFER_FULL"


class IllegalStateError(KafkaError):
    """The client is not in a state where the call is allowed (closed, no transaction, ...)."""


class ConfigError(KafkaError, ValueError):
    """An unknown configuration key or a bad value."""


def raise_for_error(code: int, message: str | None = None) -> None:
    """Raise the exception for a non-zero error code."""
    if code:
        raise error_for_code(code)(message)
