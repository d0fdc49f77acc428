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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gregor.client import AdminClient, TopicPartition
from gregor.client.bulk import DataLossError, end_offsets, shared_client
from gregor.spark.options import EARLIEST, LATEST, OffsetSpec, OptionError, SourceOptions

log = logging.getLogger("gregor.spark")


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
    """End offsets that admit at most ``limit`` offsets in total, shared by backlog."""
    lags = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    tps = sorted(lags)
    shares = _largest_remainder([lags[tp] for tp in tps], limit, total)
    out = dict(latest)
    for tp, n in zip(tps, shares, strict=True):
        if tp in start:
            out[tp] = start[tp] + n
    return out


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

    # --- partitions ---

    def partitions(self) -> list[TopicPartition]:
        """The partitions the subscription covers now (sorted)."""
        o = self.options
        if o.assign is not None:
            described = self.admin.describe_topics(sorted({tp.topic for tp in o.assign}))
            for tp in o.assign:
                d = described.get(tp.topic)
                if not hasattr(d, "partitions") or tp.partition not in {p.partition for p in d.partitions}:
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

    def list_offsets(self, specs: Mapping[TopicPartition, int | str]) -> dict[TopicPartition, int | None]:
        if not specs:
            return {}
        r = self.admin.list_offsets(dict(specs), isolation_level=self.options.isolation_level)
        return {tp: r[tp][0] for tp in specs}

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: v or 0 for tp, v in self.list_offsets(dict.fromkeys(tps, "earliest")).items()}

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """High watermarks (last stable offsets under read_committed), from Fetch responses."""
        tps = list(tps)
        if not tps:
            return {}
        client = shared_client(self.options.client)
        return end_offsets(client, tps, self.options.isolation_level, self.options.timeout)

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], *, ending: bool = False) -> dict[TopicPartition, int]:
        """Concrete offsets for ``tps``; a starting timestamp with no later record follows
        ``startingOffsetsByTimestampStrategy`` (error, or latest), an ending one means latest."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            given: Mapping[TopicPartition, int] = spec.value
            self._check_covers(given, tps, "endingOffsets" if ending else "startingOffsets")
            out = {tp: given[tp] for tp in tps}
            need_e = [tp for tp, v in out.items() if v == EARLIEST]
            need_l = [tp for tp, v in out.items() if v == LATEST]
            out.update(self.earliest(need_e))
            out.update(self.latest(need_l))
            return out
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
                f"no record at or after the starting timestamp in {', '.join(f'{t}-{p}' for t, p in missing)}; "
                "set startingOffsetsByTimestampStrategy to latest to start at the end instead"
            )
        out = {tp: v for tp, v in found.items() if v is not None}
        out.update(self.latest(missing))
        return out

    def _check_covers(self, given: Mapping[TopicPartition, int], tps: list[TopicPartition], name: str) -> None:
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
        if self.options.fail_on_data_loss:
            raise DataLossError(
                f"{what}. Some data may have been lost; set failOnDataLoss to false to go on anyway."
            )
        log.warning("%s; going on because failOnDataLoss is false", what)

    def clamp_to_log_start(self, starts: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Starting offsets below the log start offset (deleted records) are data loss."""
        if not starts:
            return starts
        low = self.earliest(starts)
        out = dict(starts)
        for tp, s in starts.items():
            if s < low[tp]:
                self.lost(f"{tp.topic}-{tp.partition}: offsets {s} to {low[tp]} were deleted before they were read")
                out[tp] = low[tp]
        return out


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


__all__ = ["OffsetPlanner", "OffsetRange", "rate_limit", "split_ranges"]
