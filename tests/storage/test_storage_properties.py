"""Random sequences of log operations checked against a plain in-memory model of the log.

The model is a list of batches (base offset, last offset, records) plus the log start offset,
log end offset and high watermark. After every step the log must serve exactly the model's
records from its start offset, agree on its offsets and timestamp lookups, and pass
``check_log`` (indexes agree with the data).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from hypothesis_budget import examples
from storage_helpers import T0, Clock, batch, check_log, config, read_records

from gregor.storage import Log, LogCleaner

KEYS = [b"a", b"b", b"c", b"d", b"e"]
RETENTION_MS = 20_000
DELETE_RETENTION_MS = 5_000


@dataclass
class MBatch:
    base: int
    last: int
    records: list[tuple[int, int, bytes, bytes | None]]  # offset, ts, key, value
    horizon: int | None = None
    max_ts: int = -1

    def __post_init__(self) -> None:
        if self.records:
            self.max_ts = max(self.max_ts, max(r[1] for r in self.records))


@dataclass
class Model:
    batches: list[MBatch] = field(default_factory=list)
    log_start: int = 0
    leo: int = 0
    hw: int = 0

    def visible(self) -> list[tuple[int, int, bytes, bytes | None]]:
        return [r for b in self.batches for r in b.records if r[0] >= self.log_start]


record_strategy = st.tuples(
    st.integers(0, 4000),  # timestamp offset from the step's base time
    st.sampled_from(KEYS),
    st.one_of(st.none(), st.binary(min_size=1, max_size=60)),
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="gregor-prop-")
        self.clock = Clock(T0)
        self.cfg = config(
            segment_bytes=400,
            index_interval_bytes=120,
            cleanup_policy="compact,delete",
            retention_ms=RETENTION_MS,
            delete_retention_ms=DELETE_RETENTION_MS,
            file_delete_delay_ms=0,
            min_cleanable_dirty_ratio=0.0,
        )
        self.log = Log(self.tmp + "/p-0", self.cfg, clock=self.clock)
        self.model = Model()
        self.cleaner = LogCleaner()

    def teardown(self) -> None:
        self.log.close_handles()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- operations ---

    @rule(
        batches=st.lists(st.lists(record_strategy, min_size=1, max_size=4), min_size=1, max_size=5),
        advance_hw=st.booleans(),
    )
    def append(self, batches, advance_hw):
        m = self.model
        for records in batches:
            now = self.clock.now
            recs = [(now + dt, k, v) for dt, k, v in records]
            info = self.log.append(batch(recs))
            assert info.first_offset == m.leo
            offsets = range(m.leo, m.leo + len(recs))
            m.batches.append(
                MBatch(
                    m.leo,
                    m.leo + len(recs) - 1,
                    [(o, *r) for o, r in zip(offsets, recs, strict=True)],
                )
            )
            m.leo += len(recs)
        if advance_hw:
            self.advance_high_watermark()

    @rule(ms=st.sampled_from([1, 1_000, 10_000, 30_000]))
    def advance_time(self, ms):
        self.clock.advance(ms)

    @rule()
    def advance_high_watermark(self):
        self.log.update_high_watermark(self.log.log_end_offset)
        self.model.hw = self.model.leo

    @rule()
    def roll(self):
        self.log.roll()

    @precondition(lambda self: self.model.leo > self.model.log_start)
    @rule(data=st.data())
    def truncate(self, data):
        m = self.model
        k = data.draw(st.integers(m.log_start, m.leo))
        bases = [s.base_offset for s in self.log.segments]
        changed = self.log.truncate_to(k)
        assert changed == (k < m.leo)
        if not changed:
            return
        m.batches = [b for b in m.batches if b.last < k]
        remaining_next = m.batches[-1].last + 1 if m.batches else m.log_start
        kept_base = max((b for b in bases if b <= k), default=0)
        m.leo = max(remaining_next, kept_base)
        if m.leo < m.log_start:  # nothing readable left: the log restarts at its start
            m.leo = m.log_start
            m.batches = []
        m.hw = max(min(m.hw, m.leo), m.log_start)

    @precondition(lambda self: self.model.hw > self.model.log_start)
    @rule(data=st.data())
    def delete_records(self, data):
        m = self.model
        k = data.draw(st.integers(m.log_start, m.hw))
        assert self.log.delete_records(k) == k
        m.log_start = k

    @rule()
    def retention(self):
        m = self.model
        before = {r[0]: r for r in m.visible()}
        self.log.delete_old_segments()
        new_start = self.log.log_start_offset
        assert new_start >= m.log_start
        if new_start > m.log_start:
            threshold = self.clock.now - RETENTION_MS
            for b in m.batches:
                if m.log_start <= b.last < new_start:
                    # only whole segments below the high watermark, past retention.ms (a
                    # segment wholly below the log start offset goes whatever its timestamps,
                    # as Kafka's log-start-offset breach does: its batches are not checked)
                    assert b.max_ts < threshold and b.last < m.hw
            m.log_start = new_start
            m.batches = [b for b in m.batches if b.last >= new_start]
        del before

    @rule()
    def compact(self):
        m = self.model
        result = self.cleaner.clean(self.log, 0, force=True)
        if result is None:
            return
        end = result.end_offset
        now = self.clock.now
        latest: dict[bytes, int] = {}
        for b in m.batches:
            for off, _, key, _ in b.records:
                if m.log_start <= off < end:
                    latest[key] = off
        kept_batches = []
        for b in m.batches:
            if b.last >= end:
                kept_batches.append(b)
                continue
            kept = []
            for rec in b.records:
                off, _, key, value = rec
                if off < m.log_start:
                    if latest.get(key, -1) <= off:
                        kept.append(rec)
                    continue
                if latest[key] != off:
                    continue
                if value is None and b.horizon is not None and now >= b.horizon:
                    continue
                kept.append(rec)
            if kept:
                nb = MBatch(b.base, b.last, kept, b.horizon)
                if nb.horizon is None and any(r[3] is None for r in kept):
                    nb.horizon = now + DELETE_RETENTION_MS
                kept_batches.append(nb)
        m.batches = kept_batches

    @rule(clean=st.booleans())
    def restart(self, clean):
        hw = self.log.high_watermark
        if clean:
            self.log.close()
        else:
            self.log.close_handles()
        self.log = Log(
            self.tmp + "/p-0",
            self.cfg,
            clock=self.clock,
            had_clean_shutdown=clean,
            recovery_point=self.log.recovery_point,
            log_start_offset=self.log.log_start_offset,
            high_watermark=hw,
        )

    # --- checks ---

    @invariant()
    def agrees_with_the_model(self):
        m = self.model
        log = self.log
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (
            m.log_start,
            m.leo,
            m.hw,
        )
        got = [(r.offset, r.timestamp, r.key, r.value) for r in read_records(log)]
        assert got == m.visible()
        check_log(log)

    @invariant()
    def timestamp_lookups(self):
        visible = self.model.visible()
        if not visible:
            assert self.log.offset_for_timestamp(0) is None
            return
        for target in {visible[0][1], visible[len(visible) // 2][1] + 1, visible[-1][1]}:
            want = next((r for r in visible if r[1] >= target), None)
            got = self.log.offset_for_timestamp(target)
            assert (got and (got.offset, got.timestamp)) == (want and (want[0], want[1]))


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(
    max_examples=examples(50),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
