"""The synchronous API: thin wrappers that run the asyncio clients on a background loop.

One daemon thread per process runs an event loop (uvloop when installed) shared by every
synchronous client (:class:`~gregor.client.core.loop.LoopThread`). Calls hop to it with
``run_coroutine_threadsafe`` and wait for the result.
The producer's hot path does not hop: when the topic's metadata is known, ``send`` appends to
the thread-safe accumulator directly from the caller's thread and the sender on the loop is
woken only when a batch opens or fills.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from gregor.client.admin import AIOAdminClient
from gregor.client.consumer.consumer import AIOConsumer, ConsumerRecord
from gregor.client.core.client import KafkaClient
from gregor.client.core.config import Config
from gregor.client.core.loop import LoopThread
from gregor.client.core.metadata import TopicPartition
from gregor.client.producer.futures import ProduceFuture
from gregor.client.producer.producer import AIOProducer, NoTopicMetadataError
from gregor.client.producer.transaction_manager import TransactionHandle

T = TypeVar("T")


async def _construct(factory: Callable[[], T]) -> T:
    return factory()


class Producer:
    """Synchronous producer: ``Producer({"bootstrap.servers": ...}).send(topic, value, key)``."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._lt = LoopThread.get()
        self._aio: AIOProducer = self._lt.run(_construct(lambda: AIOProducer(config, **kwargs)))
        self._lt.run(self._aio.start())

    @property
    def aio(self) -> AIOProducer:
        return self._aio

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, Any]] | None = None,
        on_delivery: Callable[[ProduceFuture], Any] | None = None,
    ) -> ProduceFuture:
        try:  # metadata known: queue from this thread
            fut = self._aio.send_nowait(topic, value, key, partition, timestamp_ms, headers)
        except NoTopicMetadataError:
            fut = self._lt.run(self._aio.send(topic, value, key, partition, timestamp_ms, headers))
        if on_delivery is not None:
            fut.add_done_callback(on_delivery)
        return fut

    def flush(self, timeout: float | None = None) -> None:
        self._lt.run(self._aio.flush(timeout))

    def partitions_for(self, topic: str) -> list[int]:
        return self._lt.run(self._aio.partitions_for(topic))

    def init_transactions(self) -> None:
        self._lt.run(self._aio.init_transactions())

    def begin_transaction(self) -> None:
        self._aio.begin_transaction()

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group: Any) -> None:
        self._lt.run(self._aio.send_offsets_to_transaction(offsets, group))

    def transaction_handle(self) -> TransactionHandle:
        return self._aio.transaction_handle()

    def commit_transaction(self) -> None:
        self._lt.run(self._aio.commit_transaction())

    def abort_transaction(self) -> None:
        self._lt.run(self._aio.abort_transaction())

    def close(self, timeout: float | None = None) -> None:
        self._lt.run(self._aio.close(timeout))

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Consumer:
    """Synchronous consumer; every method mirrors :class:`AIOConsumer`."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._lt = LoopThread.get()
        self._aio: AIOConsumer = self._lt.run(_construct(lambda: AIOConsumer(config, **kwargs)))
        self._lt.run(self._aio.start())

    @property
    def aio(self) -> AIOConsumer:
        return self._aio

    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | None = None, listener: Any = None) -> None:
        self._lt.call(lambda: self._aio.subscribe(topics, pattern=pattern, listener=listener))

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        tps = list(partitions)
        self._lt.call(lambda: self._aio.assign(tps))

    def assignment(self) -> set[TopicPartition]:
        return self._lt.call(self._aio.assignment)

    def unsubscribe(self) -> None:
        self._lt.run(self._aio.unsubscribe())

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._lt.run(self._aio.poll(timeout_ms, max_records))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while True:
            yield from self.poll(1000)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._lt.call(lambda: self._aio.seek(tp, offset))

    def pause(self, *tps: TopicPartition) -> None:
        self._lt.call(lambda: self._aio.pause(*tps))

    def resume(self, *tps: TopicPartition) -> None:
        self._lt.call(lambda: self._aio.resume(*tps))

    def paused(self) -> set[TopicPartition]:
        return self._lt.call(self._aio.paused)

    def group_metadata(self) -> Any:
        return self._lt.call(self._aio.group_metadata)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._aio, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self._lt.run(attr(*a, **k))
        return attr

    def close(self, autocommit: bool = True) -> None:
        self._lt.run(self._aio.close(autocommit))

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Facade:
    """A synchronous face on an asyncio object with ``start`` and ``close``: each of its
    coroutine methods runs on the client loop thread; its other attributes are passed through."""

    _aio: Any

    def _open(self, factory: Callable[[], Any]) -> None:
        self._lt = LoopThread.get()
        self._aio = self._lt.run(_construct(factory))
        self._lt.run(self._aio.start())

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._aio, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self._lt.run(attr(*a, **k))
        return attr

    def close(self) -> None:
        self._lt.run(self._aio.close())

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AdminClient(_Facade):
    """Synchronous admin client; every coroutine method of :class:`AIOAdminClient` is here."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._open(lambda: AIOAdminClient(config, **kwargs))


class ShareConsumer(_Facade):
    """Synchronous share group consumer (KIP-932); every coroutine method of
    :class:`~gregor.client.consumer.share_consumer.AIOShareConsumer` is here, ``acknowledge`` too."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        from gregor.client.consumer.share_consumer import AIOShareConsumer

        self._open(lambda: AIOShareConsumer(config, **kwargs))


class BulkReader:
    """Reads partition offset ranges as ``pyarrow.RecordBatch`` in Spark's Kafka schema."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._lt = LoopThread.get()
        cfg = Config("client", config, **kwargs)
        self._client: KafkaClient = self._lt.run(_construct(lambda: KafkaClient(cfg)))
        self._lt.run(self._client.start())

    def read(self, topic: str, partition: int, start_offset: int, end_offset: int | None = None, **kw: Any) -> Any:
        """Offsets [start_offset, end_offset) as a ``pyarrow.RecordBatch`` (see ``fetch_arrow``)."""
        from gregor.client.consumer.arrow import fetch_arrow

        return self._lt.run(fetch_arrow(self._client, topic, partition, start_offset, end_offset, **kw))

    def close(self) -> None:
        self._lt.run(self._client.close())

    def __enter__(self) -> BulkReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["AdminClient", "BulkReader", "Consumer", "LoopThread", "Producer", "ShareConsumer"]
