"""The transactional producer's side of a transaction: state, partitions, coordinator calls.

Theory of operation. A :class:`TransactionManager` belongs to one producer with a
``transactional.id``. Its :class:`TxnState` moves UNINITIALIZED -> READY (``init``, after the
producer got its id and epoch) -> IN_TRANSACTION (``begin``) -> READY (``end``, commit or
abort); a failed send inside a transaction moves it to ABORTABLE_ERROR, from which only an
abort leads back to READY. Partitions a send touches for the first time are ``new``: the
producer's sender task registers them with the coordinator (AddPartitionsToTxn) before any
batch for them goes out; ``send`` runs on the caller's thread, so ``new`` is guarded by a lock.
Requests go to the transaction coordinator, found (and found again after NOT_COORDINATOR)
with FindCoordinator, and are retried as the client retries anything retriable.

Handing a transaction to another process. A transaction is named on the wire by its
transactional id, producer id and epoch, nothing else: :class:`TransactionHandle` is that
triple (``Producer.transaction_handle()``), and :func:`end_transaction` sends EndTxn for it from
any client, so a process that did not write the records (a Spark driver committing what its
tasks wrote) can commit or abort them. The writer flushes before it hands the handle over and
must not end the transaction itself.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

from gregor.client.core.client import KafkaClient
from gregor.client.core.errors import IllegalStateError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol import messages
from gregor.protocol.errors import ErrorCode


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in_transaction"
    ABORTABLE_ERROR = "abortable_error"


class GroupMetadata(Protocol):
    """A consumer's group metadata (``AIOConsumer.group_metadata()``): what the group
    coordinator needs to fence a zombie's offset commits in a transaction."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...


class TransactionHandle(NamedTuple):
    """An open transaction as any client can end it; a plain tuple, so it pickles and is JSON."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


async def end_transaction(
    client: KafkaClient, handle: TransactionHandle, commit: bool, *, timeout: float | None = None
) -> None:
    """Commit (``commit=True``) or abort the transaction ``handle`` names, from any client.

    The coordinator answers as it would answer the producer itself: ending a transaction again
    the way it already ended succeeds (a retried commit is safe); ending it the other way is
    INVALID_TXN_STATE; a handle whose epoch a newer InitProducerId (or a timeout abort) bumped
    is PRODUCER_FENCED. Retriable errors are retried until ``timeout`` seconds (default
    ``default.api.timeout.ms``).
    """
    tid, pid, epoch = handle
    node = [-1]

    async def attempt() -> None:
        if node[0] < 0:
            node[0] = await client.find_coordinator(tid, 1)
        req = messages.EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
        resp: messages.EndTxnResponse = await client.send(node[0], req)
        if resp.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            node[0] = -1
        if resp.error_code:
            raise error_for_code(resp.error_code)(f"EndTxn({'commit' if commit else 'abort'}) of {tid}")

    await client.with_retries(attempt, timeout=timeout)


class TransactionManager:
    def __init__(
        self, transactional_id: str, client: KafkaClient, ids: Callable[[], tuple[int, int]], max_block: float
    ) -> None:
        self.transactional_id = transactional_id
        self._client = client
        self._ids = ids  # the producer's current (producer id, epoch)
        self._max_block = max_block
        self.state = TxnState.UNINITIALIZED
        self.partitions: set[TopicPartition] = set()  # registered with the coordinator
        self.new: set[TopicPartition] = set()  # touched by a send, not registered yet
        self._lock = threading.Lock()
        self._coordinator = -1
        self._offsets = False  # offsets were sent in this transaction

    # --- state ---

    def check_can_send(self) -> None:
        if self.state is not TxnState.IN_TRANSACTION:
            raise IllegalStateError("send outside a transaction: call begin_transaction() first")

    def touch(self, tp: TopicPartition) -> None:
        """A send to ``tp`` (any thread)."""
        if tp not in self.partitions:
            with self._lock:
                self.new.add(tp)

    def ready(self) -> None:
        self.state = TxnState.READY

    def begin(self) -> None:
        if self.state is not TxnState.READY:
            raise IllegalStateError(f"cannot begin a transaction in state {self.state.value}")
        self.state = TxnState.IN_TRANSACTION

    def fail(self) -> None:
        """A send of this transaction failed: only an abort can end it now."""
        self.state = TxnState.ABORTABLE_ERROR

    def check_commit(self) -> None:
        if self.state is TxnState.ABORTABLE_ERROR:
            raise IllegalStateError("a send in this transaction failed: abort it")
        if self.state is not TxnState.IN_TRANSACTION:
            raise IllegalStateError("no transaction in progress")

    def check_abort(self) -> None:
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            raise IllegalStateError("no transaction in progress")

    # --- coordinator requests ---

    async def coordinator_node(self) -> int:
        if self._coordinator < 0:
            self._coordinator = await self._client.find_coordinator(self.transactional_id, 1)
        return self._coordinator

    def forget_coordinator(self) -> None:
        self._coordinator = -1

    async def _request(self, make: Callable[[], messages.Message]) -> None:
        """Send a request to the transaction coordinator, retrying what may be retried."""

        async def attempt() -> None:
            node = await self.coordinator_node()
            conn = await self._client.connection(node)
            req = make()
            max_v = 3 if isinstance(req, messages.AddPartitionsToTxnRequest) else None
            resp: messages.Message = await conn.send(req, conn.version(req.API_KEY, max_v))
            code = first_error(resp)
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.forget_coordinator()
            if code:
                raise error_for_code(code)()

        await self._client.with_retries(attempt, timeout=self._max_block)

    def handle(self) -> TransactionHandle:
        """The open transaction's handle (see :func:`end_transaction`)."""
        if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
            raise IllegalStateError("no transaction in progress")
        pid, epoch = self._ids()
        return TransactionHandle(self.transactional_id, pid, epoch)

    async def add_partitions(self) -> None:
        """Register the partitions sends touched since the last call (the sender task)."""
        with self._lock:
            new, self.new = self.new - self.partitions, set()
        if not new:
            return
        by_topic: dict[str, list[int]] = {}
        for tp in new:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        try:
            await self._request(
                lambda: messages.AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=self._ids()[0],
                    v3_and_below_producer_epoch=self._ids()[1],
                    v3_and_below_topics=[
                        messages.AddPartitionsToTxnRequest.V3AndBelowTopics(name=t, partitions=sorted(ps))
                        for t, ps in by_topic.items()
                    ],
                )
            )
        except BaseException:
            with self._lock:
                self.new |= new
            raise
        self.partitions |= new

    async def send_offsets(self, offsets: Mapping[TopicPartition, int], group: str | GroupMetadata) -> None:
        if self.state is not TxnState.IN_TRANSACTION:
            raise IllegalStateError("no transaction in progress")
        group_id = group if isinstance(group, str) else group.group_id
        await self._request(
            lambda: messages.AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=self._ids()[0],
                producer_epoch=self._ids()[1],
                group_id=group_id,
            )
        )
        self._offsets = True
        by_topic: dict[str, list[messages.TxnOffsetCommitRequest.Topics.Partitions]] = {}
        for tp, off in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                messages.TxnOffsetCommitRequest.Topics.Partitions(partition_index=tp.partition, committed_offset=int(off))
            )
        generation = -1 if isinstance(group, str) else group.generation_id
        member_id = "" if isinstance(group, str) else group.member_id
        instance_id = None if isinstance(group, str) else group.group_instance_id
        coordinator = [-1]

        async def attempt() -> None:
            if coordinator[0] < 0:
                coordinator[0] = await self._client.find_coordinator(group_id, 0)
            conn = await self._client.connection(coordinator[0])
            req = messages.TxnOffsetCommitRequest(
                transactional_id=self.transactional_id,
                group_id=group_id,
                producer_id=self._ids()[0],
                producer_epoch=self._ids()[1],
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance_id,
                topics=[messages.TxnOffsetCommitRequest.Topics(name=t, partitions=ps) for t, ps in by_topic.items()],
            )
            resp: messages.TxnOffsetCommitResponse = await conn.send(req, conn.version(req.API_KEY))
            code = first_error(resp)
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                coordinator[0] = -1
            if code:
                raise error_for_code(code)()

        await self._client.with_retries(attempt, timeout=self._max_block)

    async def end(self, commit: bool) -> None:
        """EndTxn (when the transaction touched anything), then READY."""
        if self.partitions or self._offsets:
            await self._request(
                lambda: messages.EndTxnRequest(
                    transactional_id=self.transactional_id,
                    producer_id=self._ids()[0],
                    producer_epoch=self._ids()[1],
                    committed=commit,
                )
            )
        self.partitions = set()
        self._offsets = False
        with self._lock:
            self.new = set()
        self.state = TxnState.READY


def first_error(resp: object) -> int:
    """The first non-zero error code anywhere in a (small) response: the top level's, else its
    topics' partitions' (AddPartitionsToTxn, TxnOffsetCommit), read by name as they are spelt
    in each API."""
    code = getattr(resp, "error_code", 0)
    if code:
        return int(code)
    for attr in ("topics", "results_by_topic_v3_and_below"):
        for t in getattr(resp, attr, ()) or ():
            for p in getattr(t, "partitions", None) or getattr(t, "results_by_partition", None) or ():
                c = getattr(p, "error_code", 0) or getattr(p, "partition_error_code", 0)
                if c:
                    return int(c)
    return 0
