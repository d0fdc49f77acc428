"""The old path of :mod:`gregor.client.core.timespec`, kept for importers outside the client (the
CLI and the console); new code imports the core module."""

from gregor.client.core.timespec import (
    parse_datetime,
    parse_duration_ms,
)

__all__ = [
    "parse_datetime",
    "parse_duration_ms",
]
