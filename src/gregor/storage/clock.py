"""The storage package's clock: wall-clock milliseconds, as Kafka's ``Time.milliseconds()``.

Every time-dependent decision in storage (segment.ms rolls, retention.ms, flush.ms, file
deletion delays, producer-id expiry) reads an injected ``Clock`` so tests can move time by
hand; :func:`now_ms` is the default.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""A function returning the current time in milliseconds since the epoch."""

_time_ns = time.time_ns


def now_ms() -> int:
    """Wall-clock time in milliseconds since the epoch."""
    return _time_ns() // 1_000_000
