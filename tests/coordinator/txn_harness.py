"""The transaction coordinator driven directly (no sockets, no sleeps): a fake clock, an
in-memory ``__transaction_state`` log and in-memory partitions that record the markers they
receive. ``TxnHarness.call`` runs one request and returns its reply (``PENDING`` while a held
write keeps it back); ``restart`` loads a new coordinator from the records written so far."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from harness import FakeClock

from gregor.coordinator import Token
from gregor.coordinator.txn.coordinator import (
    InitProducerIdResult,
    TransactionCoordinator,
    TxnCoordinatorConfig,
)
from gregor.coordinator.txn.records import TxnLogValue, decode_key, decode_value
from gregor.coordinator.txn.state import TxnState
from gregor.protocol.records.batch import decode_batch

PENDING = object()
TIMEOUT = 60000


@dataclass
class TxnHarness:
    config: TxnCoordinatorConfig = field(
        default_factory=lambda: TxnCoordinatorConfig(num_partitions=3)
    )
    clock: FakeClock = field(default_factory=FakeClock)
    coordinator_epoch: int = 4
    fail_writes: int = 0  # error code for every state write, 0 for success
    hold_writes: bool = False
    marker_errors: dict[tuple[str, int], list[int]] = field(
        default_factory=dict
    )  # per call, in order
    transaction_version: int = 0  # the cluster's finalized transaction.version

    def __post_init__(self) -> None:
        self.pids = itertools.count(1000)
        self.log: dict[int, list[bytes]] = {p: [] for p in range(self.config.num_partitions)}
        self.markers: list[
            tuple[str, int, int, int, bool, int]
        ] = []  # topic, part, pid, epoch, commit, coord epoch
        self.held: list[Any] = []
        self.replies: dict[int, Any] = {}
        self.tokens = itertools.count(1)
        self.coord = self._new()
        for p in range(self.config.num_partitions):
            self.coord.begin_load(p)
            self.coord.complete_load(p, self.coordinator_epoch)
        self.pump()

    def _new(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            self.config, lambda: next(self.pids), self.clock, lambda: self.transaction_version
        )

    def pump(self) -> None:
        c = self.coord
        while c.has_output:
            out = c.take()
            for w in out.writes:
                if self.hold_writes:
                    self.held.append(w)
                else:
                    self._complete(w)
            for m in out.effects:
                results = {}
                for tp in m.partitions:
                    queued = self.marker_errors.get(tp)
                    code = queued.pop(0) if queued else 0
                    if code == 0:
                        self.markers.append(
                            (
                                tp[0],
                                tp[1],
                                m.producer_id,
                                m.producer_epoch,
                                m.commit,
                                m.coordinator_epoch,
                            )
                        )
                    results[tp] = code
                c.markers_complete(m.id, results)
            for r in out.replies:
                r.deliver()

    def _complete(self, w: Any) -> None:
        if self.fail_writes:
            self.coord.write_complete(w.id, self.fail_writes)
            return
        self.log[w.partition].append(w.batch)
        self.coord.write_complete(w.id, 0)

    def release(self) -> None:
        held, self.held = self.held, []
        for w in held:
            self._complete(w)
        self.pump()

    def call(self, method: str, *args: Any) -> Any:
        n = next(self.tokens)

        def deliver(response: Any) -> None:
            assert n not in self.replies
            self.replies[n] = response

        getattr(self.coord, method)(Token(n, deliver), *args)
        self.pump()
        return self.replies.pop(n, PENDING)

    def init(
        self, tid: str, timeout: int = TIMEOUT, pid: int = -1, epoch: int = -1
    ) -> InitProducerIdResult:
        return self.call("init_producer_id", tid, timeout, pid, epoch)

    def add(self, tid: str, pid: int, epoch: int, *parts: tuple[str, int]) -> Any:
        return self.call("add_partitions", tid, pid, epoch, list(parts))

    def add2(self, tid: str, pid: int, epoch: int, *parts: tuple[str, int]) -> Any:
        """A partition leader adding partitions for a version 2 client (AddPartitionsToTxn v4+)."""
        return self.call("add_partitions", tid, pid, epoch, list(parts), 2)

    def end(self, tid: str, pid: int, epoch: int, commit: bool) -> Any:
        """A version 1 client's EndTxn (v4 and below): the error code."""
        result = self.call("end_txn", tid, pid, epoch, commit)
        return result if result is PENDING else result.error_code

    def end2(self, tid: str, pid: int, epoch: int, commit: bool) -> Any:
        """A version 2 client's EndTxn (v5): the whole EndTxnResult."""
        return self.call("end_txn", tid, pid, epoch, commit, 2)

    def advance(self, ms: int) -> None:
        self.clock.now += ms
        self.coord.tick()
        self.pump()

    def state(self, tid: str) -> TxnState:
        return self.coord.txns[tid].state

    def records(self) -> list[tuple[str, TxnLogValue | None]]:
        """Every record written to __transaction_state, decoded, partition by partition."""
        out = []
        for p in sorted(self.log):
            for b in self.log[p]:
                for rec in decode_batch(b).records:
                    out.append((decode_key(rec.key), decode_value(rec.value)))
        return out

    def records_of(self, tid: str) -> list[TxnLogValue | None]:
        return [v for k, v in self.records() if k == tid]

    def restart(self) -> None:
        self.coord = self._new()
        for p, batches in self.log.items():
            self.coord.begin_load(p)
            for b in batches:
                self.coord.load_batches(p, b)
            self.coord.complete_load(p, self.coordinator_epoch + 1)
        self.pump()
