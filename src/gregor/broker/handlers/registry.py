"""The table of implemented APIs: api key -> handler and the version range it serves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Handler = Callable[[Any, Any], Awaitable[Any]]


@dataclass(frozen=True)
class HandlerEntry:
    handler: Handler
    min_version: int
    max_version: int


HANDLERS: dict[int, HandlerEntry] = {}


def handles(message_cls: Any, min_version: int | None = None, max_version: int | None = None) -> Callable[[Handler], Handler]:
    """Register a handler for ``message_cls``'s API; versions default to all the codec knows."""

    def register(fn: Handler) -> Handler:
        lo = message_cls.MIN_VERSION if min_version is None else min_version
        hi = message_cls.MAX_VERSION if max_version is None else max_version
        HANDLERS[message_cls.API_KEY] = HandlerEntry(fn, lo, hi)
        return fn

    return register
