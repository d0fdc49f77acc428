"""One asyncio runtime for the coordinators' state machines (groups and transactions).

Theory of operation. A coordinator (``gregor.coordinator``) does no I/O: it takes requests
with an opaque token and leaves writes to its internal topic and replies in an outbox. This
runtime owns the rest, once for both coordinators (Kafka's ``CoordinatorRuntime``), all on
the broker's event loop so the coordinator's state has one owner:

* ``call(method, *args)`` creates a future for a token, runs the coordinator method and
  *pumps*: each write in the outbox is appended through the ``PartitionWriter`` (the replica
  manager) and completed when its partition's high watermark covers it (``committed``: at
  once on one node, after the followers have it in a cluster); each reply completes its
  future. JoinGroup and SyncGroup futures may stay pending until other members arrive.
* One ``TimerHandle`` tracks the coordinator's earliest deadline; when it fires the runtime
  calls ``tick()`` and pumps again.
* The internal topic is created on first use (``ensure_topic``). The metadata publisher
  tells the runtime which of its partitions this broker leads (``load``) or no longer leads
  (``unload``). Loading replays a partition from its log start: its keys answer
  COORDINATOR_LOAD_IN_PROGRESS until then. Empty partitions (a new topic) are loaded at
  once; the others in a background task that yields after each partition.
* A partition is loaded once per leader epoch, as Kafka's runtime does: the publisher calls
  ``load`` for every change of a partition this broker leads (an ISR change too), and a load
  at the epoch already loaded (or loading) is ignored. A load at a newer epoch drops the
  partition's state first and replays from nothing: replaying the log on top of live state
  would apply records twice (a transactional offset still waiting for its marker would be
  committed by the marker of an earlier transaction of the same producer). A replay that an
  ``unload`` or a newer load overtook does not finish: the partition stays as the newer call
  left it.

The seam is typed and the same for every coordinator (``gregor.coordinator.common``): a
coordinator's request method takes a ``Token[T]`` first and answers it with a ``T``, so
``call(method, *args)`` returns that ``T`` with no cast; ``take()`` hands over one ``Output``
of writes, replies and effects (the transaction coordinator's marker requests, given to the
``on_effect`` callback; none for the others); ``write_complete`` and ``complete_load`` have one
signature. The services (``GroupService``, ``TxnService``, ``ShareService``) add typed request
methods and nothing to the pump.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, Protocol, TypeVar

from gregor.broker.common.errors import code_of
from gregor.broker.common.events import log_event
from gregor.cluster.image import MetadataImage
from gregor.coordinator.common.outbox import Output, Reply, Token, Write
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.storage.log import Log
from gregor.storage.log_info import LogAppendInfo
from gregor.storage.producer_state import AppendOrigin

log = logging.getLogger("gregor.broker.coordinators")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class PartitionWriter(Protocol):
    """Where a coordinator's writes go: the replica manager."""

    def append_internal(
        self, topic: str, index: int, records: bytes | bytearray | memoryview, origin: AppendOrigin
    ) -> LogAppendInfo: ...

    def committed(self, topic: str, index: int, offset: int) -> asyncio.Future[None]: ...

    def local_log(self, topic: str, index: int) -> Log | None: ...


T = TypeVar("T")
P = ParamSpec("P")
E = TypeVar("E")


class ShardState(Protocol):
    """What the runtime needs of a coordinator state machine, its outbox aside."""

    @property
    def has_output(self) -> bool: ...

    def write_complete(self, write_id: int, error_code: int, base_offset: int = -1) -> None: ...

    def complete_load(self, partition: int, leader_epoch: int) -> None:
        """The partition is replayed to its end at this leader epoch: serve its keys."""
        ...

    def next_deadline(self) -> int | None: ...

    def tick(self) -> None: ...

    def begin_load(self, partition: int) -> None: ...

    def load_batches(self, partition: int, data: bytes | memoryview) -> None: ...

    def unload(self, partition: int) -> None: ...

    def partition_for(self, key: str) -> int:
        """The partition of the internal topic that holds ``key`` (group or transactional id)."""
        ...


class Shard(ShardState, Protocol[E]):
    """A coordinator state machine whose outbox holds effects of type ``E``."""

    def take(self) -> Output[E]: ...


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """An internal topic a coordinator keeps its state in."""

    name: str
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    origin: AppendOrigin


class TopicCreator(Protocol):
    async def create_internal_topic(self, topic: InternalTopic) -> None: ...

    def exists(self, topic: str) -> bool: ...


class CoordinatorRuntime:
    def __init__(
        self,
        name: str,
        shard: Shard[E],
        topic: InternalTopic,
        writer: PartitionWriter,
        creator: TopicCreator,
        clock: Callable[[], int] = wall_clock_ms,
        on_effect: Callable[[E], None] | None = None,
    ) -> None:
        self.name = name
        self.shard: ShardState = shard

        def take() -> tuple[list[Write], list[Reply]]:
            """One ``take()`` of the outbox: effects go to ``on_effect`` at once (they come
            before the writes, as the coordinator made them), writes and replies back."""
            out = shard.take()
            if on_effect is not None:
                for effect in out.effects:
                    on_effect(effect)
            return out.writes, out.replies

        self._take = take
        self.topic = topic
        self.writer = writer
        self.creator = creator
        self.clock = clock
        self._tokens = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._load_tasks: set[asyncio.Task[None]] = set()
        #: partition -> (leader epoch, load number) of the load that owns it now.
        self._loads: dict[int, tuple[int, int]] = {}
        self._load_numbers = itertools.count(1)
        self._pumping = False
        self._pump_again = False
        self._creating: asyncio.Future[None] | None = None

    def coordinator_node(self, key: str, image: MetadataImage) -> int:
        """The broker that coordinates ``key``: the leader of its partition of the internal
        topic (-1: none now, or the topic does not exist yet)."""
        p = image.partition(self.topic.name, self.shard.partition_for(key))
        return p.leader if p is not None else -1

    # --- lifecycle ---

    async def stop(self) -> None:
        for task in list(self._load_tasks):
            task.cancel()
        for task in list(self._load_tasks):
            try:
                await task
            except asyncio.CancelledError:
                pass
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def load(self, partitions: Mapping[int, int]) -> None:
        """This broker now leads these partitions (index -> leader epoch): replay those not
        loaded at that epoch already."""
        fresh: dict[int, tuple[int, int]] = {}
        for p, epoch in partitions.items():
            current = self._loads.get(p)
            if current is not None and current[0] >= epoch:
                continue  # this epoch is loaded (or loading): an ISR change, not a new leader
            if current is not None:
                self.shard.unload(p)  # a newer epoch replays from nothing
            fresh[p] = self._loads[p] = (epoch, next(self._load_numbers))
        if not fresh:
            return
        for p in fresh:
            self.shard.begin_load(p)
        later: dict[int, tuple[int, int]] = {}
        for p, (epoch, number) in fresh.items():
            plog = self.writer.local_log(self.topic.name, p)
            if plog is None or plog.log_end_offset == plog.log_start_offset:
                self.shard.complete_load(p, epoch)
            else:
                later[p] = (epoch, number)
        self.pump()
        if later:
            task = asyncio.get_running_loop().create_task(self._replay(later))
            self._load_tasks.add(task)
            task.add_done_callback(self._load_tasks.discard)

    def unload(self, partitions: list[int]) -> None:
        for p in partitions:
            self._loads.pop(p, None)
            self.shard.unload(p)
        self.pump()

    def loaded_epoch(self, partition: int) -> int | None:
        """The leader epoch ``partition`` is loaded (or loading) at; None when not led here."""
        current = self._loads.get(partition)
        return None if current is None else current[0]

    async def _replay(self, partitions: dict[int, tuple[int, int]]) -> None:
        started = time.monotonic()
        batches = 0
        for p, (epoch, number) in partitions.items():
            if self._loads.get(p) != (epoch, number):
                continue  # unloaded or loaded again since: not this task's any more
            plog = self.writer.local_log(self.topic.name, p)
            if plog is not None:
                for _, data in plog.iter_batches():
                    try:
                        self.shard.load_batches(p, data)
                    except Exception:  # noqa: BLE001 - one bad batch must not stop the load
                        log.exception("could not replay a batch of %s-%d", self.topic.name, p)
                    batches += 1
            self.shard.complete_load(p, epoch)
            self.pump()
            await asyncio.sleep(0)
        log_event(
            log,
            f"{self.name}.loaded",
            partitions=len(partitions),
            batches=batches,
            ms=int((time.monotonic() - started) * 1000),
        )

    # --- the internal topic ---

    async def ensure_topic(self) -> None:
        """Create the internal topic on first use; its new partitions are empty, so they are
        loaded at once by the publisher's call to ``load``."""
        if self.creator.exists(self.topic.name):
            return
        if self._creating is None:
            self._creating = asyncio.get_running_loop().create_future()
            try:
                await self.creator.create_internal_topic(self.topic)
            except KafkaError as e:
                log_event(
                    log,
                    f"{self.name}.topic_failed",
                    logging.ERROR,
                    topic=self.topic.name,
                    error=str(e),
                )
            finally:
                done, self._creating = self._creating, None
                done.set_result(None)
        else:
            await asyncio.shield(self._creating)

    # --- requests ---

    async def call(
        self,
        method: Callable[Concatenate[Token[T], P], None],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        """Run a coordinator request method (its first argument is the token, typed by the
        answer) and wait for its reply."""
        await self.ensure_topic()
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def deliver(response: T) -> None:
            if not fut.done():
                fut.set_result(response)

        token = Token(next(self._tokens), deliver)
        try:
            method(token, *args, **kwargs)
        finally:
            self.pump()
        return await fut

    # --- the pump ---

    def pump(self) -> None:
        if self._pumping:
            self._pump_again = True
            return
        self._pumping = True
        try:
            while True:
                self._pump_again = False
                while self.shard.has_output:
                    writes, replies = self._take()
                    for w in writes:
                        self._append(w)
                    for reply in replies:
                        reply.deliver()
                if not self._pump_again:
                    break
        finally:
            self._pumping = False
        self._reschedule()

    def _append(self, w: Write) -> None:
        topic = self.topic.name
        try:
            info = self.writer.append_internal(
                topic, w.partition, bytearray(w.batch), self.topic.origin
            )
            committed = self.writer.committed(topic, w.partition, info.last_offset + 1)
        except KafkaError as e:
            code = code_of(e)
            log_event(
                log,
                f"{self.name}.append_failed",
                logging.ERROR,
                partition=w.partition,
                error=str(e),
            )
            self.shard.write_complete(w.id, code, -1)
            return

        def done(fut: asyncio.Future[None]) -> None:
            exc = None if fut.cancelled() else fut.exception()
            if fut.cancelled() or exc is not None:
                code = ErrorCode.REQUEST_TIMED_OUT if exc is None else code_of(exc)
                self.shard.write_complete(w.id, code, -1)
            else:
                self.shard.write_complete(w.id, 0, info.first_offset)

        def done_later(fut: asyncio.Future[None]) -> None:
            done(fut)
            self.pump()

        if committed.done():
            done(committed)
        else:
            committed.add_done_callback(done_later)

    def _reschedule(self) -> None:
        deadline = self.shard.next_deadline()
        if deadline == self._timer_deadline and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is None:
            return
        delay = max(deadline - self.clock(), 0) / 1000.0
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        try:
            self.shard.tick()
        except Exception:  # noqa: BLE001 - a timer bug must not stop the loop's timers
            log.exception("%s coordinator timer failed", self.name)
        self.pump()
