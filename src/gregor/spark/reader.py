"""Batch and streaming readers: offset ranges planned on the driver, read as Arrow on executors.

A Spark task reads one :class:`KafkaInputPartition` (a topic partition's offset range) with the
client's chunked bulk path (:class:`gregor.client.bulk.RangeReader`) and yields
``pyarrow.RecordBatch`` es in Spark's Kafka schema: no Python object per record. Connections are
shared by the tasks of one Python worker process (:func:`gregor.client.bulk.shared_client`).

Streaming. Offsets are Spark's Kafka form, ``{"topic": {"partition": next_offset}}``, and are
what Spark writes to the checkpoint's offset log. ``latestOffset(start, limit)`` lists the
subscription's partitions again (so partitions and, for a pattern, topics created while the
query runs are picked up; a new partition starts at its earliest offset), asks for their end
offsets and, under a :class:`ReadMaxRows` limit (``maxOffsetsPerTrigger``), admits at most that
many offsets, shared by backlog. ``prepareForTriggerAvailableNow`` pins the end offsets of that
moment; later ``latestOffset`` calls never pass them. A partition that disappears, or whose end
moved below the committed offset, is data loss (``failOnDataLoss``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from gregor.client import TopicPartition
from gregor.client.bulk import RangeReader, shared_client
from gregor.spark.options import SourceOptions, offsets_from_json, offsets_json
from gregor.spark.planning import OffsetPlanner, OffsetRange, rate_limit, split_ranges
from gregor.spark.schema import to_spark_arrow


@dataclass
class KafkaInputPartition(InputPartition):
    """One task's work: offsets ``[start, end)`` of one topic partition."""

    topic: str
    partition: int
    start: int
    end: int
    client: dict[str, str]
    include_headers: bool
    isolation_level: int
    fail_on_data_loss: bool
    chunk_records: int
    timeout: float

    def __post_init__(self) -> None:
        super().__init__(None)


def _input_partitions(options: SourceOptions, ranges: list[OffsetRange]) -> list[KafkaInputPartition]:
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
            options.chunk_records,
            options.timeout,
        )
        for r in split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    ]


def read_partition(p: KafkaInputPartition) -> Iterator[Any]:
    """The records of one input partition as Arrow record batches in Spark's schema."""
    if p.end <= p.start:
        return
    client = shared_client(p.client)
    reader = RangeReader(
        client,
        p.topic,
        p.partition,
        p.start,
        p.end,
        include_headers=p.include_headers,
        isolation_level=p.isolation_level,
        chunk_records=p.chunk_records,
        fail_on_data_loss=p.fail_on_data_loss,
        timeout=p.timeout,
    )
    for batch in reader:
        yield to_spark_arrow(batch, p.include_headers)


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        planner = OffsetPlanner(self.options)
        try:
            tps = planner.partitions()
            starts = planner.resolve(self.options.starting, tps)
            ends = planner.resolve(self.options.ending, tps, ending=True)
            starts = planner.clamp_to_log_start(starts)
            ranges = []
            for tp in tps:
                s, e = starts[tp], ends[tp]
                if e < s:
                    planner.lost(f"{tp.topic}-{tp.partition}: ending offset {e} is before starting offset {s}")
                    continue
                ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        finally:
            planner.close()
        parts: list[InputPartition] = list(_input_partitions(self.options, ranges))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        if partition.value is None and not isinstance(partition, KafkaInputPartition):
            return iter(())  # Spark's placeholder when there is nothing to read
        return read_partition(partition)  # type: ignore[arg-type]


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.planner = OffsetPlanner(options)
        self._target: dict[TopicPartition, int] | None = None

    # --- offsets ---

    def initialOffset(self) -> dict:
        tps = self.planner.partitions()
        starts = self.planner.resolve(self.options.starting, tps)
        return offsets_json(starts)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.planner.partitions()
        self._target = self.planner.latest(tps)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:  # type: ignore[override]
        begin = offsets_from_json(start)
        tps = self.planner.partitions()
        gone = sorted(set(begin) - set(tps))
        if gone:
            self.planner.lost(f"partitions {gone} no longer exist")
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
                self.planner.lost(f"{tp.topic}-{tp.partition}: end offset {latest[tp]} is before {effective[tp]}")
                latest[tp] = effective[tp]
        end = latest
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(effective, latest, limit.max_rows)
        return offsets_json(end)

    def reportLatestOffset(self) -> dict | None:
        tps = self.planner.partitions()
        return offsets_json(self.planner.latest(tps))

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:  # type: ignore[override]
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        new = [tp for tp in finish if tp not in begin]
        begin.update(self.planner.earliest(new))
        ranges = []
        for tp, e in sorted(finish.items()):
            s = begin[tp]
            if e < s:
                self.planner.lost(f"{tp.topic}-{tp.partition}: end offset {e} is before start offset {s}")
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        return list(_input_partitions(self.options, ranges))

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        return read_partition(partition)  # type: ignore[arg-type]

    def commit(self, end: dict) -> None:
        # Offsets live in Spark's checkpoint; nothing is committed to a consumer group.
        pass

    def stop(self) -> None:
        self.planner.close()


__all__ = ["KafkaBatchReader", "KafkaInputPartition", "KafkaStreamReader", "read_partition"]
