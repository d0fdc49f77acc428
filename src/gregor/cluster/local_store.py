"""The machinery the local metadata stores share: one writer at a time, publish, subscribe, watch.

Theory of operation: the store holds the current ``MetadataImage`` and replaces it whole. A
change runs as one step under an ``asyncio.Lock``: compute the new image from the current one
with a pure function of ``gregor.cluster.changes`` (which raises a Kafka error and leaves
everything as it was if the change is refused), make it durable (``Backend.commit``: nothing
for the memory store, a file write off the event loop for the file store), swap the reference, then
publish the ``MetadataDelta`` to every subscribed listener in subscription order and to every
``watch()`` stream, all before the mutating coroutine returns. Because only the lock holder
reads and replaces the image, concurrent callers never lose an update.

A change runs in its own task that the caller awaits through ``asyncio.shield``: a caller
cancelled while the file is being written does not leave the file ahead of the image, the
change completes (or fails) and is published as if the caller were still there. This is the
same "a cancelled request may still have taken effect" rule a remote store has.

A listener that raises is logged and does not stop the others: the change is already durable.
``watch()`` streams are unbounded queues registered when ``watch()`` is called (so no delta
between the call and the first ``__anext__`` is missed); they end when the store closes.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from gregor.cluster import access_changes, changes
from gregor.cluster.image import (
    EMPTY,
    AclBinding,
    BrokerRegistration,
    DelegationToken,
    MetadataDelta,
    MetadataImage,
    PartitionImage,
    ScramCredential,
    TopicImage,
)
from gregor.protocol.errors import KafkaError
from gregor.security.acls import AclBindingFilter

log = logging.getLogger(__name__)

T = TypeVar("T")
Listener = Callable[[MetadataDelta], None]


def new_cluster_id() -> str:
    """Kafka's form: 16 random bytes in URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class DeltaStream:
    """An async iterator over the deltas a store publishes after it was created."""

    def __init__(self, detach: Callable[[DeltaStream], None]) -> None:
        self._queue: asyncio.Queue[MetadataDelta | None] = asyncio.Queue()
        self._detach = detach
        self._ended = False

    def __aiter__(self) -> DeltaStream:
        return self

    async def __anext__(self) -> MetadataDelta:
        if self._ended and self._queue.empty():
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        return item

    def put(self, delta: MetadataDelta) -> None:
        if not self._ended:
            self._queue.put_nowait(delta)

    def end(self) -> None:
        """No more deltas: the iteration stops once the queued ones are taken."""
        if not self._ended:
            self._ended = True
            self._queue.put_nowait(None)

    async def aclose(self) -> None:
        """Stop watching now: deltas not taken yet are dropped, like an async generator's."""
        self._detach(self)
        self._ended = True
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(None)


class Subscribers:
    """The listeners and ``watch()`` streams of one store, and the publishing of a delta to them."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._streams: list[DeltaStream] = []
        self._ended = False

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def watch(self) -> DeltaStream:
        stream = DeltaStream(self._detach)
        if self._ended:
            stream.end()
        else:
            self._streams.append(stream)
        return stream

    def _detach(self, stream: DeltaStream) -> None:
        if stream in self._streams:
            self._streams.remove(stream)

    def publish(self, delta: MetadataDelta) -> None:
        for listener in list(self._listeners):
            try:
                listener(delta)
            except Exception:  # noqa: BLE001 - the change is durable; the other listeners still run
                log.exception(
                    "metadata listener %r failed on version %d", listener, delta.image.version
                )
        for stream in list(self._streams):
            stream.put(delta)

    def end(self) -> None:
        """The store closed: every stream ends, no listener is called again."""
        self._ended = True
        for stream in self._streams:
            stream.end()
        self._streams.clear()
        self._listeners.clear()


class Backend(Protocol):
    """Where a local store keeps its image: nowhere (memory) or a file."""

    async def load(self, cluster_id: str | None) -> MetadataImage:
        """The image to start from, its cluster id set (``cluster_id`` if given)."""
        ...

    async def commit(self, image: MetadataImage) -> None:
        """Make ``image`` durable before it is published; raise to refuse it."""
        ...

    async def close(self) -> None: ...


class ChangeMethods:
    """The ``MetadataStore`` change methods, each one pure function of ``changes`` handed to
    ``_change``, which the store implements (apply, make durable, publish)."""

    async def _change(self, change: Callable[[MetadataImage], tuple[MetadataImage, T]]) -> T:
        raise NotImplementedError

    async def create_topic(
        self,
        name: str,
        assignments: Sequence[Sequence[int]],
        configs: Mapping[str, str],
        internal: bool = False,
        topic_id: uuid.UUID | None = None,
    ) -> TopicImage:
        reps = [list(r) for r in assignments]
        conf = dict(configs)
        return await self._change(
            lambda image: changes.create_topic(image, name, reps, conf, internal, topic_id)
        )

    async def delete_topic(self, name: str) -> TopicImage:
        return await self._change(lambda image: changes.delete_topic(image, name))

    async def add_partitions(self, name: str, assignments: Sequence[Sequence[int]]) -> TopicImage:
        reps = [list(r) for r in assignments]
        return await self._change(lambda image: changes.add_partitions(image, name, reps))

    async def alter_topic_configs(self, name: str, configs: Mapping[str, str]) -> TopicImage:
        conf = dict(configs)
        return await self._change(lambda image: changes.alter_topic_configs(image, name, conf))

    async def alter_config_resource(
        self, resource_type: int, name: str, configs: Mapping[str, str]
    ) -> None:
        conf = dict(configs)
        await self._change(
            lambda image: (changes.alter_config_resource(image, resource_type, name, conf), None)
        )

    async def alter_partition(
        self,
        topic: str,
        partition: int,
        *,
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
        expected_partition_epoch: int,
    ) -> PartitionImage:
        new_isr = list(isr)
        return await self._change(
            lambda image: changes.alter_partition(
                image,
                topic,
                partition,
                leader=leader,
                leader_epoch=leader_epoch,
                isr=new_isr,
                expected_partition_epoch=expected_partition_epoch,
            )
        )

    async def reassign_partitions(
        self, reassignments: Sequence[tuple[str, int, Sequence[int] | None]]
    ) -> list[KafkaError | None]:
        asked = [(t, i, None if r is None else list(r)) for t, i, r in reassignments]
        return await self._change(lambda image: changes.reassign_partitions(image, asked))

    async def register_broker(self, registration: BrokerRegistration) -> None:
        await self._change(lambda image: (changes.register_broker(image, registration), None))

    async def unregister_broker(self, node_id: int) -> None:
        await self._change(lambda image: (changes.unregister_broker(image, node_id), None))

    async def allocate_producer_ids(self, count: int) -> int:
        return await self._change(lambda image: changes.allocate_producer_ids(image, count))

    async def alter_client_quotas(
        self,
        entries: Sequence[
            tuple[Sequence[tuple[str, str | None]], Sequence[tuple[str, float, bool]]]
        ],
        validate_only: bool = False,
    ) -> list[KafkaError | None]:
        asked = [(list(e), list(ops)) for e, ops in entries]
        return await self._change(
            lambda image: access_changes.alter_client_quotas(image, asked, validate_only)
        )

    async def alter_scram_credentials(
        self,
        deletions: Sequence[tuple[str, str]],
        upsertions: Sequence[tuple[str, ScramCredential]],
    ) -> dict[str, KafkaError | None]:
        dels, ups = list(deletions), list(upsertions)
        return await self._change(
            lambda image: access_changes.alter_scram_credentials(image, dels, ups)
        )

    async def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        new = list(bindings)
        return await self._change(lambda image: access_changes.create_acls(image, new))

    async def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> list[KafkaError | list[AclBinding]]:
        fs = list(filters)
        return await self._change(lambda image: access_changes.delete_acls(image, fs))

    async def create_delegation_token(self, token: DelegationToken) -> DelegationToken:
        return await self._change(
            lambda image: access_changes.create_delegation_token(image, token)
        )

    async def change_delegation_token(
        self, token_id: str, change: Callable[[DelegationToken], DelegationToken | None]
    ) -> int:
        return await self._change(
            lambda image: access_changes.change_delegation_token(image, token_id, change)
        )

    async def remove_expired_delegation_tokens(self, now_ms: int) -> list[str]:
        return await self._change(
            lambda image: access_changes.remove_expired_delegation_tokens(image, now_ms)
        )

    async def update_features(
        self, change: Callable[[Mapping[str, int]], Mapping[str, int]]
    ) -> int:
        return await self._change(
            lambda image: changes.update_features(image, change(image.features))
        )


class LocalMetadataStore(ChangeMethods):
    """The metadata store of one process; ``backend`` decides what is durable."""

    def __init__(self, backend: Backend, cluster_id: str | None = None) -> None:
        self._backend = backend
        self._requested_cluster_id = cluster_id or None
        self._image = EMPTY
        self._lock = asyncio.Lock()
        self._subscribers = Subscribers()
        self._started = False
        self._closed = False

    # --- lifecycle, reading, listening ---

    @property
    def image(self) -> MetadataImage:
        return self._image

    async def start(self) -> MetadataImage:
        async with self._lock:
            if self._closed:
                raise RuntimeError("metadata store is closed")
            if not self._started:
                self._image = await self._backend.load(self._requested_cluster_id)
                self._started = True
            return self._image

    async def close(self) -> None:
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            self._subscribers.end()
            await self._backend.close()

    def subscribe(self, listener: Listener) -> None:
        self._subscribers.subscribe(listener)

    def watch(self) -> DeltaStream:
        return self._subscribers.watch()

    # --- changes ---

    async def refresh(self) -> None:
        return None

    def session_confirmed(self) -> bool:
        """Always: this process is the durable state, there is no session to lose."""
        return True

    async def _change(self, change: Callable[[MetadataImage], tuple[MetadataImage, T]]) -> T:
        return await shielded(self._apply(change))

    async def _apply(self, change: Callable[[MetadataImage], tuple[MetadataImage, T]]) -> T:
        async with self._lock:
            if self._closed:
                raise RuntimeError("metadata store is closed")
            if not self._started:
                raise RuntimeError("metadata store is not started")
            image, result = change(self._image)
            await self._backend.commit(image)
            delta = MetadataDelta(self._image, image)
            self._image = image
            self._subscribers.publish(delta)
            return result


async def shielded(change: Coroutine[Any, Any, T]) -> T:
    """Run ``change`` in its own task and await it; a cancelled caller does not cancel it."""
    task = asyncio.ensure_future(change)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(_retrieve)
        raise


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Take the outcome of a change whose caller was cancelled, so it is not reported as lost."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("metadata change finished after its caller was cancelled: %r", task.exception())
