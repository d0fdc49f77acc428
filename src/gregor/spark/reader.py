"""Batch and streaming readers: offset ranges planned on the driver, read as Arrow on executors.

A Spark task reads one :class:`KafkaInputPartition` (a topic partition's offset range) with the
client's chunked bulk path (:class:`gregor.client.bulk.RangeReader`) and yields
``pyarrow.RecordBatch`` es in Spark's Kafka schema: no Python object per record. Connections are
shared by the tasks of one Python worker process (:func:`gregor.client.bulk.shared_client`).

Batch. Spark plans a DataFrame's partitions once and runs the plan each time the DataFrame is
executed, so ``earliest`` and ``latest`` travel to the executors unresolved (-2 / -1) and are
looked up when the task runs: a DataFrame with ``endingOffsets=latest`` run again after more
records arrived returns them too, as Spark's connector does. A resolved start after its end is
an error whatever ``failOnDataLoss`` says. Spark's connector also lists the subscription's
partitions each time; a Python source cannot add tasks to a planned DataFrame, so a
``subscribe`` / ``subscribePattern`` plan carries one more task, :class:`NewPartitionsInput`,
that lists the partitions when it runs and reads those the plan did not know (created since),
with the starting and ending options applied to them as a fresh plan would (a JSON that does
not cover them fails as it would at planning; topic-level ``"earliest"`` covers them).

Streaming. Offsets are Spark's Kafka form, ``{"topic": {"partition": next_offset}}``, and are
what Spark writes to the checkpoint's offset log. ``latestOffset(start, limit)`` lists the
subscription's partitions again (so partitions and, for a pattern, topics created while the
query runs are picked up; a new partition starts at its earliest offset), asks for their end
offsets and applies admission control. Spark passes back the read limit this source asked for
(``getDefaultReadLimit``) or ``ReadAllAvailable`` (Trigger.Once, or when the engine says so);
under the former the source applies its options as Spark's connector does:
``minOffsetsPerTrigger`` skips the trigger (returns ``start``) while fewer offsets are waiting,
unless ``maxTriggerDelay`` has passed since the last batch ran (the first always runs), and
``maxOffsetsPerTrigger`` shares out the admitted offsets by backlog (:func:`rate_limit`). The
Python API carries only one ``ReadLimit`` object, so the options are the source's state, not
the limit's. ``prepareForTriggerAvailableNow`` pins the end offsets of that moment; later
``latestOffset`` calls never pass them, ``minOffsetsPerTrigger`` is not applied (a skipped
trigger would end the query early), and a pinned partition that disappears, or whose end falls
below a planned end, fails the query whatever ``failOnDataLoss`` says (Spark's rule). A
partition that disappears otherwise, whose end moved below the committed offset, or that is
new and does not start at 0, is data loss (``failOnDataLoss``). The latest offsets seen by
``latestOffset`` are what ``reportLatestOffset`` returns, so progress shows them.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from gregor.client import AdminClient, TopicPartition
from gregor.client.bulk import RangeReader, end_offsets, shared_client
from gregor.columns.avro_columns import AvroColumn, decode_batch
from gregor.spark.options import (
    EARLIEST,
    LATEST,
    OptionError,
    SourceOptions,
    offsets_from_json,
    offsets_json,
)
from gregor.spark.planning import (
    OffsetPlanner,
    OffsetRange,
    check_resolved,
    rate_limit,
    report_data_loss,
    split_ranges,
)
from gregor.spark.schema import to_spark_arrow


@dataclass
class KafkaInputPartition(InputPartition):
    """One task's work: offsets ``[start, end)`` of one topic partition (batch queries may
    leave ``start`` as -2, earliest, and ``end`` as -1, latest, for the task to resolve)."""

    topic: str
    partition: int
    start: int
    end: int
    client: dict[str, str]
    include_headers: bool
    isolation_level: int
    fail_on_data_loss: bool
    check_crcs: bool
    chunk_records: int
    timeout: float
    new_partitions: NewPartitions | None = None
    columns: tuple[AvroColumn, ...] = ()

    def __post_init__(self) -> None:
        super().__init__(None)


def _input_partitions(
    options: SourceOptions, ranges: list[OffsetRange]
) -> list[KafkaInputPartition]:
    return [
        KafkaInputPartition(
            r.topic,
            r.partition,
            r.start,
            r.end,
            dict(options.client),
            options.include_headers,
            options.isolation_level,
            options.fail_on_data_loss,
            options.check_crcs,
            options.chunk_records,
            options.timeout,
            columns=options.columns,
        )
        for r in ranges
    ]


_ADMINS: dict[tuple[tuple[str, str], ...], AdminClient] = {}
_ADMINS_LOCK = threading.Lock()


def _shared_admin(settings: dict[str, str]) -> AdminClient:
    key = tuple(sorted(settings.items()))
    with _ADMINS_LOCK:
        admin = _ADMINS.get(key)
        if admin is None:
            admin = _ADMINS[key] = AdminClient(
                {k: v for k, v in settings.items() if k in _ADMIN_KEYS}
            )
        return admin


_ADMIN_KEYS = (
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "security.protocol",
    "metadata.max.age.ms",
)


def resolve_range(p: KafkaInputPartition) -> tuple[int, int]:
    """The task's concrete ``[start, end)``: earliest and latest looked up now."""
    tp = TopicPartition(p.topic, p.partition)
    start, end = p.start, p.end
    if start == EARLIEST:
        r = _shared_admin(p.client).list_offsets(
            {tp: "earliest"}, isolation_level=p.isolation_level
        )
        start = r[tp][0] or 0
    if LATEST in (start, end):  # a start at latest: a starting timestamp with no later record
        high = end_offsets(shared_client(p.client), [tp], p.isolation_level, p.timeout)[tp]
        start, end = (high if start == LATEST else start), (high if end == LATEST else end)
    if start < 0 or end < 0:
        raise OptionError(f"{p.topic}-{p.partition}: offsets {p.start}..{p.end} cannot be resolved")
    check_resolved(p.topic, p.partition, start, end)
    return start, end


def read_partition(p: KafkaInputPartition) -> Iterator[Any]:
    """The records of one input partition as Arrow record batches in Spark's schema."""
    start, end = resolve_range(p) if p.start < 0 or p.end < 0 else (p.start, p.end)
    if end <= start:
        return
    reader = RangeReader(
        shared_client(p.client),
        p.topic,
        p.partition,
        start,
        end,
        include_headers=p.include_headers,
        isolation_level=p.isolation_level,
        chunk_records=p.chunk_records,
        fail_on_data_loss=p.fail_on_data_loss,
        timeout=p.timeout,
        verify_crc=p.check_crcs,
    )
    if p.columns:
        for batch in reader:
            yield decode_batch(to_spark_arrow(batch, p.include_headers), p.columns)
    else:
        for batch in reader:
            yield to_spark_arrow(batch, p.include_headers)


@dataclass(frozen=True)
class NewPartitions:
    """What a batch plan knew: its task that carries this also reads the partitions created since."""

    options: SourceOptions
    known: frozenset[TopicPartition]

    def read(self) -> Iterator[Any]:
        planner = OffsetPlanner(self.options)
        try:
            tps = planner.partitions()
            new = [tp for tp in tps if tp not in self.known]
            if not new:
                return
            starts = planner.unresolved(self.options.starting, tps)
            ends = planner.unresolved(self.options.ending, tps, ending=True)
        finally:
            planner.close()
        ranges = [OffsetRange(tp.topic, tp.partition, starts[tp], ends[tp]) for tp in new]
        for p in _input_partitions(self.options, ranges):
            yield from read_partition(p)


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        planner = OffsetPlanner(self.options)
        try:
            ranges = planner.plan_batch()
        finally:
            planner.close()
        parts = _input_partitions(self.options, ranges)
        if self.options.assign is None:  # the last task also reads partitions created later
            new = NewPartitions(
                self.options, frozenset(TopicPartition(r.topic, r.partition) for r in ranges)
            )
            last = (
                parts[-1]
                if parts
                else _input_partitions(self.options, [OffsetRange("", -1, 0, 0)])[0]
            )
            parts[-1:] = [replace(last, new_partitions=new)]
        return list(parts)

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        if partition.value is None and not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark's placeholder when there is nothing to read
        p: KafkaInputPartition = partition  # type: ignore[assignment]
        if p.new_partitions is None:
            return read_partition(p)
        return itertools.chain(read_partition(p), p.new_partitions.read())


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.planner = OffsetPlanner(options)
        self._target: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._last_trigger_ms = 0.0

    # --- offsets ---

    def initialOffset(self) -> dict:
        tps = self.planner.partitions()
        starts = self.planner.resolve(self.options.starting, tps)
        return offsets_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        o = self.options
        if o.min_offsets_per_trigger:
            return ReadMinRows(o.min_offsets_per_trigger)
        if o.max_offsets_per_trigger:
            return ReadMaxRows(o.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.planner.partitions()
        self._target = self.planner.latest(tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # type: ignore[override]
        begin = offsets_from_json(start)
        tps = self.planner.partitions()
        if self._target is not None:
            lost = sorted(set(self._target) - set(tps))
            if lost:
                raise OptionError(
                    "[LOST_TOPIC_PARTITIONS_IN_END_OFFSET_WITH_TRIGGER_AVAILABLENOW] Some of partitions in "
                    "Kafka topic(s) have been lost during running query with Trigger.AvailableNow. "
                    f"topic-partitions for latest offset: {_names(tps)}, topic-partitions for end offset: "
                    f"{_names(self._target)}"
                )
        gone = sorted(set(begin) - set(tps))
        if gone:
            self.planner.lost(f"Partitions {_names(gone)} have been deleted")
        if self._target is not None:
            tps = [tp for tp in tps if tp in self._target]
        latest = self.planner.latest(tps)
        if self._target is not None:
            latest = {tp: min(v, self._target[tp]) for tp, v in latest.items()}
        new = [tp for tp in tps if tp not in begin]
        effective = {tp: begin[tp] for tp in tps if tp in begin}
        effective.update(self.planner.earliest(new))
        for tp in tps:
            if latest[tp] < effective[tp]:
                # the log now ends before what was read: truncation or a re-created topic
                self.planner.lost(
                    f"Partition {tp.topic}-{tp.partition} offset was changed from {effective[tp]} to {latest[tp]}"
                )
                latest[tp] = effective[tp]
        self._latest = dict(latest)
        if not latest:  # no partition left: no new offset (SPARK-41375: never record "{}")
            return start
        if isinstance(limit, ReadAllAvailable):
            return offsets_json(latest)
        return offsets_json(self._admit(begin, effective, latest))

    def _admit(
        self,
        begin: dict[TopicPartition, int],
        effective: dict[TopicPartition, int],
        latest: dict[TopicPartition, int],
    ) -> dict[TopicPartition, int]:
        """The end offsets this trigger may read under the source's admission options."""
        o = self.options
        if o.min_offsets_per_trigger and self._target is None:
            now = time.monotonic() * 1000
            if now - self._last_trigger_ms < o.max_trigger_delay_ms:
                waiting = sum(latest[tp] - effective[tp] for tp in latest)
                if waiting < o.min_offsets_per_trigger:
                    return dict(begin)  # skip this trigger: Spark's answer is the start offset
            self._last_trigger_ms = now
        if o.max_offsets_per_trigger:
            return rate_limit(effective, latest, o.max_offsets_per_trigger)
        return latest

    def reportLatestOffset(self) -> dict | None:
        return offsets_json(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:  # type: ignore[override]
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        if self._target is not None:
            self._check_available_now(finish)
        new = [tp for tp in finish if tp not in begin]
        found = self.planner.earliest(new)
        for tp in new:
            if found.get(tp, 0) != 0:
                self.planner.lost(
                    f"Added partition {tp.topic}-{tp.partition} starts from {found[tp]} instead of 0"
                )
        begin.update(found)
        ranges = []
        for tp, e in sorted(finish.items()):
            s = begin[tp]
            if e < s:
                self.planner.lost(
                    f"Partition {tp.topic}-{tp.partition} offset was changed from {s} to {e}"
                )
                continue
            if e > s:
                ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        o = self.options
        ranges = split_ranges(ranges, o.min_partitions, o.max_records_per_partition)
        return list(_input_partitions(self.options, ranges))

    def _check_available_now(self, finish: dict[TopicPartition, int]) -> None:
        assert self._target is not None
        latest = self.planner.latest([tp for tp in finish if tp in set(self.planner.partitions())])
        lost = sorted(set(finish) - set(latest))
        if lost:
            raise OptionError(
                "[LOST_TOPIC_PARTITIONS_IN_END_OFFSET_WITH_TRIGGER_AVAILABLENOW] Some of partitions in Kafka "
                "topic(s) have been lost during running query with Trigger.AvailableNow. "
                f"topic-partitions for latest offset: {_names(latest)}, topic-partitions for end offset: {_names(finish)}"
            )
        if any(finish[tp] > latest[tp] for tp in finish):
            raise OptionError(
                "[END_OFFSET_HAS_GREATER_OFFSET_FOR_TOPIC_PARTITION_THAN_LATEST_WITH_TRIGGER_AVAILABLENOW] Some "
                "of partitions in Kafka topic(s) report available offset which is less than end offset during "
                f"running query with Trigger.AvailableNow. latest offset: {offsets_json(latest)}, end offset: "
                f"{offsets_json(finish)}"
            )

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        return read_partition(partition)  # type: ignore[arg-type]

    def commit(self, end: dict) -> None:
        # Offsets live in Spark's checkpoint; nothing is committed to a consumer group.
        pass

    def stop(self) -> None:
        self.planner.close()


def _names(tps: Any) -> str:
    return "{" + ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps)) + "}"


__all__ = [
    "KafkaBatchReader",
    "KafkaInputPartition",
    "KafkaStreamReader",
    "read_partition",
    "report_data_loss",
]
