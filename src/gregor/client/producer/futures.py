"""Delivery results: one shared result per batch, one light future per record.

A :class:`BatchResult` is completed once by the producer's sender (on the event loop
thread) with the batch's base offset or an error. Each record's :class:`ProduceFuture` points
at its batch and its index within it, so completing a batch of N records costs one
``Event.set`` plus the callbacks that were registered. A future can be waited on from any
thread (``result(timeout)``) or awaited on the producer's loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator
from typing import NamedTuple

from gregor.client.core.errors import KafkaTimeoutError

#: Guards callback lists against a completion racing a registration from another thread.
_CALLBACK_LOCK = threading.Lock()


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class BatchResult:
    __slots__ = (
        "topic",
        "partition",
        "done",
        "base_offset",
        "log_append_time",
        "error",
        "_event",
        "_waiters",
        "_callbacks",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self._event = threading.Event()
        self._waiters: list[asyncio.Future[None]] = []
        self._callbacks: list[tuple[ProduceFuture, Callable[[ProduceFuture], object]]] = []

    def complete(
        self, base_offset: int, log_append_time: int = -1, error: BaseException | None = None
    ) -> None:
        if self.done:
            return
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        self.done = True
        self._event.set()
        for w in self._waiters:
            if not w.done():
                w.set_result(None)
        self._waiters.clear()
        with _CALLBACK_LOCK:
            callbacks, self._callbacks = self._callbacks, []
        for fut, fn in callbacks:
            try:
                fn(fut)
            except Exception:  # a user callback must not break the sender
                import logging

                logging.getLogger("gregor.client").exception("delivery callback failed")

    def wait(self, timeout: float | None) -> bool:
        return self._event.wait(timeout)

    def waiter(self) -> asyncio.Future[None]:
        fut = asyncio.get_running_loop().create_future()
        if self.done:
            fut.set_result(None)
        else:
            self._waiters.append(fut)
        return fut


class ProduceFuture(tuple[BatchResult, int, int, int, int]):
    """The outcome of one ``send``: resolves to :class:`RecordMetadata` or raises.

    A tuple (batch result, index in the batch, timestamp, key size, value size): one is made
    per record sent, and a tuple is the cheapest object Python makes (the accumulator builds it
    with ``tuple.__new__``)."""

    __slots__ = ()

    def __new__(
        cls, batch: BatchResult, index: int, timestamp: int, key_size: int, value_size: int
    ) -> ProduceFuture:
        return tuple.__new__(cls, (batch, index, timestamp, key_size, value_size))

    @property
    def _batch(self) -> BatchResult:
        return self[0]

    @property
    def _index(self) -> int:
        return self[1]

    @property
    def _timestamp(self) -> int:
        return self[2]

    @property
    def _key_size(self) -> int:
        return self[3]

    @property
    def _value_size(self) -> int:
        return self[4]

    def __eq__(self, other: object) -> bool:  # a future is equal only to itself
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return id(self)

    def done(self) -> bool:
        return self._batch.done

    def succeeded(self) -> bool:
        return self._batch.done and self._batch.error is None

    def exception(self) -> BaseException | None:
        return self._batch.error if self._batch.done else None

    @property
    def metadata(self) -> RecordMetadata:
        b = self._batch
        if b.error is not None:
            raise b.error
        offset = b.base_offset + self._index if b.base_offset >= 0 else -1
        ts = b.log_append_time if b.log_append_time >= 0 else self._timestamp
        return RecordMetadata(b.topic, b.partition, offset, ts, self._key_size, self._value_size)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Block (any thread but the producer's loop) until delivered; raise on failure."""
        if not self._batch.done and not self._batch.wait(timeout):
            raise KafkaTimeoutError(f"no delivery report within {timeout}s")
        return self.metadata

    get = result

    def add_done_callback(self, fn: Callable[[ProduceFuture], object]) -> None:
        """Call ``fn(future)`` on completion (on the producer's loop thread), or now if done."""
        b = self._batch
        with _CALLBACK_LOCK:
            if not b.done:
                b._callbacks.append((self, fn))
                return
        fn(self)

    def __await__(self) -> Generator[object, None, RecordMetadata]:
        if not self._batch.done:
            yield from self._batch.waiter().__await__()
        return self.metadata

    def __repr__(self) -> str:
        state = "pending" if not self._batch.done else ("error" if self._batch.error else "done")
        return f"<ProduceFuture {self._batch.topic}[{self._batch.partition}] {state}>"
