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
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from gregor.client.admin import AIOAdminClient
from gregor.client.consumer.consumer import AIOConsumer, ConsumerRecord
from gregor.client.consumer.group import ConsumerGroupMetadata
from gregor.client.consumer.share_consumer import AIOShareConsumer
from gregor.client.core.client import KafkaClient
from gregor.client.core.config import Config, Settings, SettingValue
from gregor.client.core.loop import LoopThread
from gregor.client.core.metadata import TopicPartition
from gregor.client.producer._send_py import Headers, Payload
from gregor.client.producer.futures import ProduceFuture
from gregor.client.producer.producer import AIOProducer, NoTopicMetadataError
from gregor.client.producer.transaction_manager import GroupMetadata, TransactionHandle

if TYPE_CHECKING:
    import pyarrow as pa

T = TypeVar("T")


class _Lifecycle(Protocol):
    """An asyncio client the facade can open and close."""

    async def start(self) -> object: ...
    async def close(self) -> None: ...


A = TypeVar("A", bound=_Lifecycle)


async def _construct(factory: Callable[[], T]) -> T:
    return factory()


class Producer:
    """Synchronous producer: ``Producer({"bootstrap.servers": ...}).send(topic, value, key)``."""

    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
        self._lt = LoopThread.get()
        self._aio: AIOProducer = self._lt.run(_construct(lambda: AIOProducer(config, **kwargs)))
        self._lt.run(self._aio.start())

    @property
    def aio(self) -> AIOProducer:
        return self._aio

    def send(
        self,
        topic: str,
        value: Payload = None,
        key: Payload = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Headers | None = None,
        on_delivery: Callable[[ProduceFuture], object] | None = None,
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

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group: str | GroupMetadata
    ) -> None:
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

    def __exit__(self, *exc: object) -> None:
        self.close()


class Consumer:
    """Synchronous consumer; every method mirrors :class:`AIOConsumer`."""

    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
        self._lt = LoopThread.get()
        self._aio: AIOConsumer = self._lt.run(_construct(lambda: AIOConsumer(config, **kwargs)))
        self._lt.run(self._aio.start())

    @property
    def aio(self) -> AIOConsumer:
        return self._aio

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | None = None,
        listener: object = None,
    ) -> None:
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

    def group_metadata(self) -> ConsumerGroupMetadata:
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

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Facade(Generic[A]):
    """A synchronous face on an asyncio object with ``start`` and ``close``: each of its
    coroutine methods runs on the client loop thread; its other attributes are passed through
    (so they are typed only as the asyncio object's)."""

    _aio: A

    def _open(self, factory: Callable[[], A]) -> None:
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AdminClient(_Facade[AIOAdminClient]):
    """Synchronous admin client; every coroutine method of :class:`AIOAdminClient` is here."""

    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
        self._open(lambda: AIOAdminClient(config, **kwargs))


class ShareConsumer(_Facade[AIOShareConsumer]):
    """Synchronous share group consumer (KIP-932); every coroutine method of
    :class:`~gregor.client.consumer.share_consumer.AIOShareConsumer` is here, ``acknowledge`` too."""

    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
        self._open(lambda: AIOShareConsumer(config, **kwargs))


class BulkReader:
    """Reads partition offset ranges as ``pyarrow.RecordBatch`` in Spark's Kafka schema."""

    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
        self._lt = LoopThread.get()
        cfg = Config("client", config, **kwargs)
        self._client: KafkaClient = self._lt.run(_construct(lambda: KafkaClient(cfg)))
        self._lt.run(self._client.start())

    def read(
        self,
        topic: str,
        partition: int,
        start_offset: int,
        end_offset: int | None = None,
        *,
        include_headers: bool = True,
        timestamp_unit: str = "us",
        isolation_level: int = 0,
        max_bytes: int = 4 * 1024 * 1024,
        timeout: float = 60.0,
        verify_crc: bool = True,
    ) -> pa.RecordBatch:
        """Offsets [start_offset, end_offset) as a ``pyarrow.RecordBatch`` (see ``fetch_arrow``,
        whose keyword arguments these are)."""
        from gregor.client.consumer.arrow import fetch_arrow

        return self._lt.run(
            fetch_arrow(
                self._client,
                topic,
                partition,
                start_offset,
                end_offset,
                include_headers=include_headers,
                timestamp_unit=timestamp_unit,
                isolation_level=isolation_level,
                max_bytes=max_bytes,
                timeout=timeout,
                verify_crc=verify_crc,
            )
        )

    def close(self) -> None:
        self._lt.run(self._client.close())

    def __enter__(self) -> BulkReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["AdminClient", "BulkReader", "Consumer", "LoopThread", "Producer", "ShareConsumer"]
