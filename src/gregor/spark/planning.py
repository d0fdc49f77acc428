"""Planning reads: which partitions, which offsets, and how to cut them into Spark tasks.

This runs on the driver (in Spark's planner Python process). :class:`OffsetPlanner` talks to
the brokers through the admin client: it lists the partitions a subscription covers, turns an
:class:`~gregor.spark.options.OffsetSpec` into concrete offsets (ListOffsets for earliest,
latest and timestamps), and notices data loss. The pure functions below it do the arithmetic:
:func:`split_ranges` cuts offset ranges into at least ``minPartitions`` tasks (and at most
``maxRecordsPerPartition`` offsets each), :func:`rate_limit` shares ``maxOffsetsPerTrigger``
among partitions in proportion to their backlog, exactly, by largest remainder.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from gregor.client import AdminClient, KafkaError, TopicPartition
from gregor.client.bulk import DataLossError, end_offsets, shared_client
from gregor.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, SourceOptions

log = logging.getLogger("gregor.spark")
T = TypeVar("T")


@dataclass(frozen=True, order=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def split_ranges(
    ranges: Iterable[OffsetRange], min_partitions: int | None = None, max_records: int | None = None
) -> list[OffsetRange]:
    """Cut ranges so there are at least ``min_partitions`` of them and none exceeds ``max_records``.

    Empty ranges are dropped. With ``min_partitions`` the extra cuts go to the ranges in
    proportion to their size (largest remainder), each cut into nearly equal pieces.
    """
    rs = [r for r in ranges if r.size > 0]
    if max_records:
        rs = [piece for r in rs for piece in _even(r, -(-r.size // max_records))]
    if min_partitions and len(rs) < min_partitions:
        total = sum(r.size for r in rs)
        if total:
            shares = _largest_remainder([r.size for r in rs], min_partitions, total)
            rs = [piece for r, n in zip(rs, shares, strict=True) for piece in _even(r, max(n, 1))]
    return sorted(rs)


def _even(r: OffsetRange, n: int) -> list[OffsetRange]:
    n = min(n, r.size)
    if n <= 1:
        return [r]
    cuts = [r.start + (r.size * i) // n for i in range(n + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(cuts, cuts[1:], strict=False)]


def _largest_remainder(weights: list[int], amount: int, total: int) -> list[int]:
    """Split ``amount`` in proportion to ``weights`` (summing to ``total``) into whole numbers."""
    shares = [amount * w // total for w in weights]
    rest = amount - sum(shares)
    order = sorted(range(len(weights)), key=lambda i: (-((amount * weights[i]) % total), i))
    for i in order[:rest]:
        shares[i] += 1
    return shares


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> dict[TopicPartition, int]:
    """End offsets that admit about ``limit`` offsets, shared in proportion to backlog.

    Spark's arithmetic exactly (``KafkaMicroBatchStream.rateLimit``): a partition with backlog
    ``size`` of ``total`` gets ``limit * (size / total)`` offsets, rounded down, except that a
    share below one is rounded up so that no partition with a backlog is starved (so the sum
    may pass ``limit`` by up to one per partition). Backlogs 101/11/1 with limit 10 give
    8/1/1. A partition missing from ``start`` is new and starts where ``latest`` is unless
    ``start`` names it (callers pass new partitions' earliest offsets in ``start``).
    """
    sizes = {}
    for tp, end in latest.items():
        begin = start.get(tp)
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        prorate = limit * (size / total)
        n = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, start[tp] + n)
    return out


def offsets_behind_latest(
    consumed: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int]
) -> dict[str, str]:
    """Spark's source metrics (``KafkaMicroBatchStream.metrics``): how far each partition's
    consumed offset is behind the latest available one, as min, max and average."""
    behind = [latest[tp] - consumed[tp] for tp in latest if tp in consumed]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": repr(float(sum(behind)) / len(behind)),
    }


class OffsetPlanner:
    """Partition discovery and offset lookups for one source, through an admin client."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin: AdminClient | None = None

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            settings: dict[str, Any] = {
                k: v for k, v in self.options.client.items() if k in _ADMIN_KEYS
            }
            self._admin = AdminClient(settings)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_admin": None}

    def _retry(self, fn: Callable[[], T], what: str) -> T:
        """``fn`` with up to ``fetchOffset.numRetries`` attempts ``fetchOffset.retryIntervalMs``
        apart (a fresh admin client each time), as Spark's offset reader retries."""
        attempts = max(self.options.fetch_offset_retries, 1)
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except (OptionError, DataLossError):
                raise
            except (KafkaError, OSError, TimeoutError) as e:
                if attempt == attempts:
                    raise
                log.warning("attempt %d of %d to get %s failed: %s", attempt, attempts, what, e)
                self.close()
                time.sleep(self.options.fetch_offset_retry_interval_s)
        raise AssertionError("unreachable")

    # --- partitions ---

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription covers now (sorted)."""
        return self._retry(self._partitions, "the subscription's partitions")

    def _partitions(self) -> list[TopicPartition]:
        o = self.options
        if o.assign is not None:
            described = self.admin.describe_topics(sorted({tp.topic for tp in o.assign}))
            for tp in o.assign:
                d = described.get(tp.topic)
                if not hasattr(d, "partitions") or tp.partition not in {
                    p.partition for p in d.partitions
                }:
                    raise OptionError(f"assign: {tp.topic}-{tp.partition} does not exist")
            return sorted(o.assign)
        topics = self.admin.list_topics()
        out = [
            TopicPartition(name, p.partition)
            for name, desc in topics.items()
            if o.matches(name)
            for p in desc.partitions
        ]
        return sorted(out)

    # --- offsets ---

    def list_offsets(
        self, specs: Mapping[TopicPartition, int | str]
    ) -> dict[TopicPartition, int | None]:
        if not specs:
            return {}
        r = self._retry(
            lambda: self.admin.list_offsets(
                dict(specs), isolation_level=self.options.isolation_level
            ),
            "offsets",
        )
        return {tp: r[tp][0] for tp in specs}

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: v or 0 for tp, v in self.list_offsets(dict.fromkeys(tps, "earliest")).items()}

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks (last stable offsets under read_committed), from Fetch responses."""
        tps = list(tps)
        if not tps:
            return {}
        return self._retry(
            lambda: end_offsets(
                shared_client(self.options.client),
                tps,
                self.options.isolation_level,
                self.options.timeout,
            ),
            "latest offsets",
        )

    def unresolved(
        self, spec: OffsetSpec, tps: list[TopicPartition], *, ending: bool = False
    ) -> dict[TopicPartition, int]:
        """Offsets for a batch query with earliest (-2) and latest (-1) left for the executors
        to resolve when the query runs (Spark's late binding: a DataFrame run again after more
        records arrived reads them); timestamps are looked up now."""
        if spec.kind == "earliest":
            return dict.fromkeys(tps, EARLIEST)
        if spec.kind == "latest":
            return dict.fromkeys(tps, LATEST)
        if spec.kind == "offsets":
            name = "endingOffsets" if ending else "startingOffsets"
            given = spec.expand(tps, name)
            self._check_covers(given, tps, name)
            return {tp: given[tp] for tp in tps}
        found = self._by_timestamp(spec, tps, ending)
        return {tp: LATEST if v is None else v for tp, v in found.items()}

    def plan_batch(self) -> list[OffsetRange]:
        """A batch query's ranges, one per partition (or cut by minPartitions /
        maxRecordsPerPartition, with the first piece keeping a late-bound start and the last a
        late-bound end, as Spark does)."""
        o = self.options
        tps = self.partitions()
        starts = self.unresolved(o.starting, tps)
        ends = self.unresolved(o.ending, tps, ending=True)
        ranges = [OffsetRange(tp.topic, tp.partition, starts[tp], ends[tp]) for tp in tps]
        for r in ranges:
            if r.start >= 0 and r.end >= 0:
                check_resolved(r.topic, r.partition, r.start, r.end)
        if not (o.min_partitions or o.max_records_per_partition):
            return ranges
        low = self.earliest([tp for tp in tps if starts[tp] == EARLIEST])
        high = self.latest([tp for tp in tps if ends[tp] == LATEST])
        now = [
            OffsetRange(
                r.topic,
                r.partition,
                low.get(TopicPartition(r.topic, r.partition), r.start),
                high.get(TopicPartition(r.topic, r.partition), r.end),
            )
            for r in ranges
        ]
        pieces: dict[tuple[str, int], list[OffsetRange]] = {}
        for piece in split_ranges(now, o.min_partitions, o.max_records_per_partition):
            pieces.setdefault((piece.topic, piece.partition), []).append(piece)
        out = []
        for r in ranges:
            ps = sorted(pieces.get((r.topic, r.partition), []))
            if len(ps) <= 1:
                out.append(r)
                continue
            ps[0] = OffsetRange(r.topic, r.partition, r.start, ps[0].end)
            ps[-1] = OffsetRange(r.topic, r.partition, ps[-1].start, r.end)
            out.extend(ps)
        return out

    def resolve(
        self, spec: OffsetSpec, tps: list[TopicPartition], *, ending: bool = False
    ) -> dict[TopicPartition, int]:
        """Concrete offsets for ``tps``; a starting timestamp with no later record follows
        ``startingOffsetsByTimestampStrategy`` (error, or latest), an ending one means latest."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            name = "endingOffsets" if ending else "startingOffsets"
            given = spec.expand(tps, name)
            self._check_covers(given, tps, name)
            out = {tp: given[tp] for tp in tps}
            need_e = [tp for tp, v in out.items() if v == EARLIEST]
            need_l = [tp for tp, v in out.items() if v == LATEST]
            out.update(self.earliest(need_e))
            out.update(self.latest(need_l))
            return out
        found = self._by_timestamp(spec, tps, ending)
        out = {tp: v for tp, v in found.items() if v is not None}
        out.update(self.latest([tp for tp, v in found.items() if v is None]))
        return out

    def _by_timestamp(
        self, spec: OffsetSpec, tps: list[TopicPartition], ending: bool
    ) -> dict[TopicPartition, int | None]:
        """The first offset at or after each timestamp (None: no such record, which means
        latest; for a start, ``startingOffsetsByTimestampStrategy`` error refuses it)."""
        if spec.kind == "timestamp":
            stamps = dict.fromkeys(tps, spec.value)
        else:
            stamps = dict(spec.value)
            name = "endingOffsetsByTimestamp" if ending else "startingOffsetsByTimestamp"
            self._check_covers(stamps, tps, name)
            stamps = {tp: stamps[tp] for tp in tps}
        found = self.list_offsets(stamps)
        missing = [tp for tp, v in found.items() if v is None]
        if missing and not ending and self.options.by_timestamp_strategy == "error":
            raise OptionError(
                f"No offset matched from request of topic-partition {', '.join(f'{t}-{p}' for t, p in missing)} "
                "and timestamp: no record at or after the starting timestamp; set "
                "startingOffsetsByTimestampStrategy to latest to start at the end instead"
            )
        return found

    def _check_covers(
        self, given: Mapping[TopicPartition, int], tps: list[TopicPartition], name: str
    ) -> None:
        if self.options.assign is None and set(given) != set(tps):
            extra = sorted(set(given) - set(tps))
            lacking = sorted(set(tps) - set(given))
            raise OptionError(
                f"{name} must name every partition of the subscription: "
                f"missing {lacking}, unknown {extra}"
            )
        unknown = sorted(set(tps) - set(given))
        if unknown:
            raise OptionError(f"{name} has no offset for {unknown}")

    # --- data loss ---

    def lost(self, what: str) -> None:
        """Report data loss: raise when failOnDataLoss, else log and go on."""
        report_data_loss(what, self.options.fail_on_data_loss)


def report_data_loss(what: str, fail: bool) -> None:
    """Spark's [KAFKA_DATA_LOSS]: an error when failOnDataLoss is true, else a warning."""
    if fail:
        raise DataLossError(
            f"[KAFKA_DATA_LOSS] Some data may have been lost because they are not available in Kafka any "
            f"more. Reason: {what}. If you don't want your streaming query to fail on such cases, set "
            "the source option failOnDataLoss to false."
        )
    log.warning("%s. Some data may have been lost; going on because failOnDataLoss is false", what)


def check_resolved(topic: str, partition: int, start: int, end: int) -> None:
    """A batch range whose resolved start is after its end is an error, whatever failOnDataLoss."""
    if start > end:
        raise OptionError(
            f"[RESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET] The resolved start offset {start} is greater "
            f"than the resolved end offset {end} for topic {topic} partition {partition}."
        )


_ADMIN_KEYS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "request.timeout.ms",
        "socket.connection.setup.timeout.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "metadata.max.age.ms",
        "connections.max.idle.ms",
        "security.protocol",
        "default.api.timeout.ms",
        "client.rack",
    }
)


__all__ = [
    "OffsetPlanner",
    "OffsetRange",
    "check_resolved",
    "offsets_behind_latest",
    "rate_limit",
    "report_data_loss",
    "split_ranges",
]
