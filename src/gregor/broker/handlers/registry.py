"""The table of implemented APIs: api key -> handler and the version range it serves.

ApiVersions advertises exactly this table. A handler is registered for a request class and
keeps its precise request type (``handles`` is generic); the table stores it with the
request type erased, since the dispatcher decodes the right class for the key.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar, cast

from gregor.broker.state import RequestContext
from gregor.protocol.messages._base import Message

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound="Message | bytes | None")

Handler = Callable[[RequestContext, Message], Awaitable["Message | bytes | None"]]


@dataclass(frozen=True)
class HandlerEntry:
    handler: Handler
    min_version: int
    max_version: int
    #: Served (and advertised) only on a clustered broker's inter-broker listener: the
    #: broker-to-controller APIs.
    inter_broker_only: bool = False


HANDLERS: dict[int, HandlerEntry] = {}


def handles(
    message_cls: type[Req],
    min_version: int | None = None,
    max_version: int | None = None,
    *,
    inter_broker_only: bool = False,
) -> Callable[
    [Callable[[RequestContext, Req], Awaitable[Resp]]],
    Callable[[RequestContext, Req], Awaitable[Resp]],
]:
    """Register a handler for ``message_cls``'s API; versions default to all the codec knows."""

    def register(
        fn: Callable[[RequestContext, Req], Awaitable[Resp]],
    ) -> Callable[[RequestContext, Req], Awaitable[Resp]]:
        lo = message_cls.MIN_VERSION if min_version is None else min_version
        hi = message_cls.MAX_VERSION if max_version is None else max_version
        HANDLERS[message_cls.API_KEY] = HandlerEntry(cast(Handler, fn), lo, hi, inter_broker_only)
        return fn

    return register
