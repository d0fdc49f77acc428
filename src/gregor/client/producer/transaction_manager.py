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

Transaction version 2 (KIP-890 part 2). When the coordinator's broker speaks EndTxn v5 and
the cluster finalized ``transaction.version`` 2 (read from the coordinator's ApiVersions once
per coordinator), each transaction runs the version 2 protocol, decided at its first request
and kept to its end: no AddPartitionsToTxn and no AddOffsetsToTxn (Produce v12 and
TxnOffsetCommit v5 let the brokers add the partitions), and EndTxn v5, whose answer carries the
producer id and epoch the next transaction uses (the coordinator bumps the epoch at every end,
so a request of this transaction delivered late is fenced). The producer takes them over with
fresh sequences (``set_ids``). Otherwise (a cluster at level 0 or 1, an older broker) the
version 1 protocol runs, with EndTxn, Produce and TxnOffsetCommit capped at v4, v11 and v4.

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
from gregor.client.core.conn import CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION
from gregor.client.core.errors import IllegalStateError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol import messages
from gregor.protocol.errors import ErrorCode

TRANSACTION_VERSION = "transaction.version"
#: The last versions of the transaction protocol version 1 (a higher Produce or TxnOffsetCommit
#: has the broker add partitions, a higher EndTxn bumps the epoch).
V1_MAX_END_TXN, V1_MAX_PRODUCE, V1_MAX_TXN_OFFSET_COMMIT = 4, 11, 4


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
        req = messages.EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
        )
        resp: messages.EndTxnResponse = await client.send(node[0], req)
        if resp.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            node[0] = -1
        if resp.error_code:
            raise error_for_code(resp.error_code)(
                f"EndTxn({'commit' if commit else 'abort'}) of {tid}"
            )

    await client.with_retries(attempt, timeout=timeout)


class TransactionManager:
    def __init__(
        self,
        transactional_id: str,
        client: KafkaClient,
        ids: Callable[[], tuple[int, int]],
        max_block: float,
        set_ids: Callable[[int, int], None] | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self._client = client
        self._ids = ids  # the producer's current (producer id, epoch)
        self._set_ids = set_ids  # takes over the id and epoch a version 2 EndTxn answered
        self._max_block = max_block
        #: This transaction runs the version 2 protocol (None: not decided yet).
        self.tv2: bool | None = None
        self._coordinator_tv2: dict[int, bool] = {}  # coordinator node -> speaks version 2
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
        self._coordinator_tv2.clear()

    async def transaction_version_2(self) -> bool:
        """Whether this transaction runs the version 2 protocol (decided once per
        transaction, at its first request)."""
        if self.tv2 is None:
            self.tv2 = await self._coordinator_speaks_tv2()
        return self.tv2

    def produce_max_version(self) -> int | None:
        """The highest Produce version this transaction may use."""
        return None if self.tv2 else V1_MAX_PRODUCE

    async def _coordinator_speaks_tv2(self) -> bool:
        async def attempt() -> bool:
            node = await self.coordinator_node()
            known = self._coordinator_tv2.get(node)
            if known is not None:
                return known
            conn = await self._client.connection(node)
            speaks = False
            if conn.supports(messages.EndTxnRequest.API_KEY, 5):
                req = messages.ApiVersionsRequest(
                    client_software_name=CLIENT_SOFTWARE_NAME,
                    client_software_version=CLIENT_SOFTWARE_VERSION,
                )
                resp: messages.ApiVersionsResponse = await conn.send(
                    req, conn.version(req.API_KEY, 3)
                )
                levels = {f.name: f.max_version_level for f in resp.finalized_features or ()}
                speaks = not resp.error_code and levels.get(TRANSACTION_VERSION, 0) >= 2
            self._coordinator_tv2[node] = speaks
            return speaks

        return bool(await self._client.with_retries(attempt, timeout=self._max_block))

    async def _request(self, make: Callable[[], messages.Message]) -> messages.Message:
        """Send a request to the transaction coordinator, retrying what may be retried; the
        answer."""

        async def attempt() -> messages.Message:
            node = await self.coordinator_node()
            conn = await self._client.connection(node)
            req = make()
            max_v = None
            if isinstance(req, messages.AddPartitionsToTxnRequest):
                max_v = 3  # v4+ is broker-to-broker
            elif isinstance(req, messages.EndTxnRequest) and not self.tv2:
                max_v = V1_MAX_END_TXN
            version = conn.version(req.API_KEY, max_v)
            if isinstance(req, messages.EndTxnRequest) and self.tv2 and version < 5:
                raise IllegalStateError(f"the coordinator no longer speaks EndTxn v5 (v{version})")
            resp: messages.Message = await conn.send(req, version)
            code = first_error(resp)
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self.forget_coordinator()
            if code:
                raise error_for_code(code)()
            return resp

        return await self._client.with_retries(attempt, timeout=self._max_block)

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
        try:
            tv2 = await self.transaction_version_2()
        except BaseException:
            with self._lock:
                self.new |= new
            raise
        if tv2:
            # Produce v12 has each partition's leader add it to the transaction.
            self.partitions |= new
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
                        messages.AddPartitionsToTxnRequest.V3AndBelowTopics(
                            name=t, partitions=sorted(ps)
                        )
                        for t, ps in by_topic.items()
                    ],
                )
            )
        except BaseException:
            with self._lock:
                self.new |= new
            raise
        self.partitions |= new

    async def send_offsets(
        self, offsets: Mapping[TopicPartition, int], group: str | GroupMetadata
    ) -> None:
        if self.state is not TxnState.IN_TRANSACTION:
            raise IllegalStateError("no transaction in progress")
        group_id = group if isinstance(group, str) else group.group_id
        tv2 = await self.transaction_version_2()
        if not tv2:
            await self._request(
                lambda: messages.AddOffsetsToTxnRequest(
                    transactional_id=self.transactional_id,
                    producer_id=self._ids()[0],
                    producer_epoch=self._ids()[1],
                    group_id=group_id,
                )
            )
        # From here the transaction is started (version 2: TxnOffsetCommit adds the group's
        # partition), so it must be ended even if the commit below fails.
        self._offsets = True
        by_topic: dict[str, list[messages.TxnOffsetCommitRequest.Topics.Partitions]] = {}
        for tp, off in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                messages.TxnOffsetCommitRequest.Topics.Partitions(
                    partition_index=tp.partition, committed_offset=int(off)
                )
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
                topics=[
                    messages.TxnOffsetCommitRequest.Topics(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
            )
            version = conn.version(
                req.API_KEY, None if tv2 else V1_MAX_TXN_OFFSET_COMMIT, 5 if tv2 else 0
            )
            resp: messages.TxnOffsetCommitResponse = await conn.send(req, version)
            code = first_error(resp)
            if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                coordinator[0] = -1
            if code:
                raise error_for_code(code)()

        await self._client.with_retries(attempt, timeout=self._max_block)

    async def end(self, commit: bool) -> None:
        """EndTxn (when the transaction touched anything), then READY. A version 2 EndTxn
        answers the producer id and epoch to go on with; the producer takes them over."""
        if self.partitions or self._offsets:
            resp = await self._request(
                lambda: messages.EndTxnRequest(
                    transactional_id=self.transactional_id,
                    producer_id=self._ids()[0],
                    producer_epoch=self._ids()[1],
                    committed=commit,
                )
            )
            if self.tv2:
                assert isinstance(resp, messages.EndTxnResponse)
                if resp.producer_id < 0 or resp.producer_epoch < 0:
                    raise IllegalStateError("EndTxn v5 answered no producer id and epoch")
                if self._set_ids is not None:
                    self._set_ids(resp.producer_id, resp.producer_epoch)
        self.partitions = set()
        self._offsets = False
        self.tv2 = None
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
            for p in (
                getattr(t, "partitions", None) or getattr(t, "results_by_partition", None) or ()
            ):
                c = getattr(p, "error_code", 0) or getattr(p, "partition_error_code", 0)
                if c:
                    return int(c)
    return 0
