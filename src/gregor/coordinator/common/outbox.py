"""The seam between a coordinator state machine and the runtime that does its I/O.

Theory of operation. A coordinator (group, transaction or share) takes each request with a
:class:`Token` and answers it later through its :class:`Outbox`; the runtime (or a test)
drains the outbox with ``take()`` and does what it holds:

* ``Write(id, partition, batch)`` - a RecordBatch v2 to append to the coordinator's internal
  topic; the caller reports ``write_complete(id, error_code, base_offset)``, which runs the
  callback the coordinator gave with the write (state that must be durable first is applied
  there, and the replies that acknowledge it are sent from there).
* ``Reply`` - the answer to one token. A ``Token[T]`` is typed by its answer: the coordinator
  can only reply a ``T`` to it, and the runtime's ``call`` returns that ``T`` (Kafka's
  ``CoordinatorResult<Response, Record>``: the response type travels with the request). The
  token carries the caller's ``deliver``: the runtime completes a future with it, a test
  keeps the answer.
* effects of type ``E`` - other work for the runtime (the transaction coordinator's marker
  writes); ``Never`` for coordinators that have none.

Writes are taken before replies and effects before writes, in the order they were made.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")
E = TypeVar("E")

#: What a write's callback is told: (error code, base offset; -1 unless appended).
WriteCallback = Callable[[int, int], None]


class Token(Generic[T]):
    """The handle of one request, answered with a ``T`` (``id`` names it in logs and tests)."""

    __slots__ = ("_deliver", "id")

    def __init__(self, id: int, deliver: Callable[[T], None]) -> None:
        self.id = id
        self._deliver = deliver

    def deliver(self, response: T) -> None:
        self._deliver(response)

    def __repr__(self) -> str:
        return f"Token({self.id})"


class Reply:
    """The answer to one token, waiting in the outbox; ``deliver()`` hands it over."""

    __slots__ = ("_send", "response", "token_id")

    def __init__(self, token: Token[T], response: T) -> None:
        self.token_id = token.id
        #: The answer, for logs and tests (``deliver`` hands it over with its type).
        self.response: object = response
        self._send: Callable[[], None] = functools.partial(token.deliver, response)

    def deliver(self) -> None:
        self._send()


class Write(NamedTuple):
    """A batch to append to ``partition`` of the coordinator's internal topic."""

    id: int
    partition: int
    batch: bytes


@dataclass(slots=True)
class Output(Generic[E]):
    """What one ``take()`` hands the runtime."""

    writes: list[Write] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    effects: list[E] = field(default_factory=list)


class Outbox(Generic[E]):
    """Writes with their callbacks, replies and effects, until the runtime takes them."""

    def __init__(self) -> None:
        self._out: Output[E] = Output()
        self._callbacks: dict[int, WriteCallback] = {}
        self._ids = itertools.count(1)

    @property
    def has_output(self) -> bool:
        out = self._out
        return bool(out.writes or out.replies or out.effects)

    def take(self) -> Output[E]:
        out, self._out = self._out, Output()
        return out

    def reply(self, token: Token[T], response: T) -> None:
        self._out.replies.append(Reply(token, response))

    def effect(self, effect: E) -> None:
        self._out.effects.append(effect)

    def write(self, partition: int, batch: bytes, on_done: WriteCallback | None = None) -> int:
        """Queue ``batch`` for ``partition``; ``on_done`` runs at its completion."""
        wid = next(self._ids)
        if on_done is not None:
            self._callbacks[wid] = on_done
        self._out.writes.append(Write(wid, partition, batch))
        return wid

    def next_id(self) -> int:
        """A fresh id from the writes' sequence (for effects that are completed by id)."""
        return next(self._ids)

    def write_complete(self, write_id: int, error_code: int, base_offset: int = -1) -> None:
        """The caller appended write ``write_id`` (error_code 0) or failed to."""
        cb = self._callbacks.pop(write_id, None)
        if cb is not None:
            cb(error_code, base_offset)
