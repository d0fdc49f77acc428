"""The share coordinator (KIP-932): durable share-partition state in ``__share_group_state``.

Theory of operation. Like the transaction coordinator this is a state machine without I/O:
requests come with a typed token, writes to the internal topic and replies go to the shared
outbox (``coordinator.common.outbox``) that the broker's ``CoordinatorRuntime`` drains. The
state of a share partition (``share.state``) is kept by the partition of
``__share_group_state`` that its key ``group:topic_id:partition`` hashes to, and only while
this broker leads that partition (loaded by replaying it; until then
COORDINATOR_LOAD_IN_PROGRESS, and NOT_COORDINATOR for partitions led elsewhere).

Fencing, as Kafka's share coordinator does it: a request with an older leader epoch than the
stored one is FENCED_LEADER_EPOCH (a share-partition leader that lost leadership), and an
initialize or write with an older state epoch is FENCED_STATE_EPOCH (state reset by an admin
since). A read with a newer leader epoch records it, so the old leader's writes are fenced
from then on. Each write is a whole snapshot: it replaces the stored state once appended.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Never, TypeVar

from gregor.coordinator.common.append_errors import SHARE_STATE_APPEND_ERRORS
from gregor.coordinator.common.outbox import Outbox, Output, Token
from gregor.coordinator.common.partitioning import partition_for
from gregor.coordinator.common.timers import PartitionStatus, session_always_confirmed
from gregor.coordinator.share.state import (
    ShareKey,
    ShareSnapshot,
    StateBatch,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from gregor.protocol.errors import ErrorCode
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import RecordBatchBuilder, decode_batch
from gregor.protocol.records.header import iter_batches

log = logging.getLogger("gregor.coordinator.share")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ReadResult:
    error: int
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    state_batches: tuple[StateBatch, ...] = ()


def share_key_text(key: ShareKey) -> str:
    return f"{key[0]}:{key[1]}:{key[2]}"


class ShareCoordinator:
    def __init__(
        self,
        num_partitions: int,
        clock: Callable[[], int],
        session_confirmed: Callable[[], bool] = session_always_confirmed,
    ) -> None:
        self.num_partitions = num_partitions
        self.clock = clock
        #: False while the broker cannot confirm its metadata session (``common.timers``).
        self.session_confirmed = session_confirmed
        self.states: dict[ShareKey, ShareSnapshot] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self.outbox: Outbox[Never] = Outbox()

    # --- the runtime's shard interface ---

    def take(self) -> Output[Never]:
        return self.outbox.take()

    @property
    def has_output(self) -> bool:
        return self.outbox.has_output

    def next_deadline(self) -> int | None:
        return None

    def tick(self) -> None:
        return None

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def partition_of(self, key: ShareKey) -> int:
        return self.partition_for(share_key_text(key))

    def begin_load(self, partition: int) -> None:
        self.partitions[partition] = PartitionStatus.LOADING

    def load_batches(self, partition: int, data: bytes | memoryview) -> None:
        for pos, h in iter_batches(data):
            if h.is_control:
                continue
            for rec in decode_batch(data, pos).records:
                try:
                    key = decode_key(rec.key)
                    value = decode_value(rec.value) if key is not None else None
                except (ProtocolError, ValueError) as e:
                    log.warning(
                        "skipping unreadable __share_group_state record at %d: %s", rec.offset, e
                    )
                    continue
                if key is None:
                    continue
                if value is None:
                    self.states.pop(key, None)
                else:
                    self.states[key] = value

    def complete_load(self, partition: int, leader_epoch: int = -1) -> None:
        """The partition is read to its end: serve its keys (requests carry the epochs that
        fence, so the partition's leader epoch is not needed)."""
        self.partitions[partition] = PartitionStatus.ACTIVE

    def unload(self, partition: int) -> None:
        self.partitions.pop(partition, None)
        for key in [k for k in self.states if self.partition_of(k) == partition]:
            del self.states[key]

    def write_complete(self, write_id: int, error_code: int, base_offset: int = -1) -> None:
        self.outbox.write_complete(write_id, error_code, base_offset)

    # --- helpers ---

    def _error(self, key: ShareKey) -> int:
        status = self.partitions.get(self.partition_of(key))
        if status is None or not self.session_confirmed():
            return ErrorCode.NOT_COORDINATOR
        return 0 if status is PartitionStatus.ACTIVE else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def _write(
        self, key: ShareKey, snapshot: ShareSnapshot | None, done: Callable[[int], None]
    ) -> None:
        b = RecordBatchBuilder()
        b.append(
            self.clock(), encode_key(key), None if snapshot is None else encode_value(snapshot)
        )
        partition = self.partition_of(key)

        def written(code: int, _base_offset: int) -> None:
            if code == 0 and self.partitions.get(partition) is PartitionStatus.ACTIVE:
                if snapshot is None:
                    self.states.pop(key, None)
                else:
                    self.states[key] = snapshot
            done(SHARE_STATE_APPEND_ERRORS(code))

        self.outbox.write(partition, b.build(), written)

    def _reply(self, token: Token[T], result: T) -> None:
        self.outbox.reply(token, result)

    # --- the state APIs ---

    def initialize(
        self, token: Token[int], key: ShareKey, state_epoch: int, start_offset: int
    ) -> None:
        err = self._error(key)
        if err:
            return self._reply(token, err)
        current = self.states.get(key)
        if current is not None and state_epoch < current.state_epoch:
            return self._reply(token, ErrorCode.FENCED_STATE_EPOCH)
        snapshot = ShareSnapshot(
            state_epoch,
            -1 if current is None else current.leader_epoch,
            start_offset,
            (),
            0 if current is None else current.snapshot_epoch + 1,
        )
        self._write(key, snapshot, lambda code: self._reply(token, code))

    def read(
        self, token: Token[ReadResult], key: ShareKey, leader_epoch: int, summary: bool = False
    ) -> None:
        err = self._error(key)
        if err:
            return self._reply(token, ReadResult(err))
        current = self.states.get(key)
        if current is None:
            return self._reply(token, ReadResult(0))  # not initialized: state epoch 0, start -1
        if leader_epoch < current.leader_epoch and not (summary and leader_epoch < 0):
            # (A summary with leader epoch -1 is an admin's look, not a leader's: not fenced.)
            return self._reply(token, ReadResult(ErrorCode.FENCED_LEADER_EPOCH))
        result = ReadResult(
            0,
            current.state_epoch,
            current.leader_epoch,
            current.start_offset,
            current.state_batches,
        )
        if summary or leader_epoch == current.leader_epoch:
            return self._reply(token, result)
        updated = replace(
            current, leader_epoch=leader_epoch, snapshot_epoch=current.snapshot_epoch + 1
        )
        self._write(
            key,
            updated,
            lambda code: self._reply(
                token, replace(result, leader_epoch=leader_epoch) if code == 0 else ReadResult(code)
            ),
        )

    def write(
        self,
        token: Token[int],
        key: ShareKey,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Sequence[StateBatch],
    ) -> None:
        err = self._error(key)
        if err:
            return self._reply(token, err)
        current = self.states.get(key)
        if current is not None:
            if leader_epoch < current.leader_epoch:
                return self._reply(token, ErrorCode.FENCED_LEADER_EPOCH)
            if state_epoch < current.state_epoch:
                return self._reply(token, ErrorCode.FENCED_STATE_EPOCH)
        snapshot = ShareSnapshot(
            state_epoch,
            leader_epoch,
            start_offset,
            tuple(b for b in batches if b.last_offset >= start_offset),
            0 if current is None else current.snapshot_epoch + 1,
        )
        self._write(key, snapshot, lambda code: self._reply(token, code))

    def delete(self, token: Token[int], key: ShareKey) -> None:
        err = self._error(key)
        if err:
            return self._reply(token, err)
        if key not in self.states:
            return self._reply(token, 0)
        self._write(key, None, lambda code: self._reply(token, code))


__all__ = [
    "ReadResult",
    "ShareCoordinator",
    "ShareKey",
    "ShareSnapshot",
    "StateBatch",
    "share_key_text",
]
