"""The asyncio consumer: subscribe with a group or assign partitions, poll, seek, commit.

Theory of operation. ``poll`` drives everything the user would otherwise have to: it keeps
group membership current (join/rebalance through :mod:`gregor.client.consumer.group`), looks up
positions for partitions that lack one (the committed offset, else ``auto.offset.reset`` via
ListOffsets), auto-commits every ``auto.commit.interval.ms``, and returns records the
:class:`Fetcher` prefetched in the background. Positions advance only as records are returned,
so what is committed by default is exactly what the application has seen.

Without ``group.id`` the consumer can only ``assign``; with one it can also commit and read
committed offsets. ``group.protocol=consumer`` selects KIP-848's broker-side assignment.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Iterable, Mapping

from gregor.client.consumer.assignors import make_assignors
from gregor.client.consumer.fetcher import (
    ConsumerRecord,
    Fetcher,
    PartitionState,
    SubscriptionState,
)
from gregor.client.consumer.group import (
    ClassicMember,
    ConsumerGroupMetadata,
    GroupBase,
    OffsetAndMetadata,
    RebalanceListener,
)
from gregor.client.consumer.group_consumer import ConsumerProtocolMember
from gregor.client.core.client import KafkaClient
from gregor.client.core.config import Config, Settings, SettingValue
from gregor.client.core.errors import (
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    error_for_code,
)
from gregor.client.core.metadata import ClusterMetadata, TopicPartition
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.messages import ListOffsetsRequest, ListOffsetsResponse

log = logging.getLogger("gregor.client.consumer")

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3

__all__ = [
    "AIOConsumer",
    "ConsumerRecord",
    "OffsetAndMetadata",
    "RebalanceListener",
    "TopicPartition",
]


class AIOConsumer:
    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
        self.config = cfg = Config("consumer", config, **kwargs)
        reset = str(cfg["auto.offset.reset"]).lower()
        reset = {
            "smallest": "earliest",
            "largest": "latest",
            "beginning": "earliest",
            "end": "latest",
        }.get(reset, reset)
        if reset not in ("earliest", "latest", "none"):
            raise ConfigError(f"auto.offset.reset must be earliest, latest or none, got {reset!r}")
        if cfg["isolation.level"] not in ("read_committed", "read_uncommitted"):
            raise ConfigError("isolation.level must be read_committed or read_uncommitted")
        self._client = KafkaClient(cfg)
        self._subs = SubscriptionState(default_reset=reset)
        self._fetcher = Fetcher(self._client, self._subs, cfg)
        self._group: GroupBase | None = None
        protocol = str(cfg["group.protocol"]).lower()
        if protocol not in ("classic", "consumer"):
            raise ConfigError("group.protocol must be classic or consumer")
        if cfg["group.id"]:
            if protocol == "consumer":
                self._group = ConsumerProtocolMember(self._client, cfg, self._subs)
            else:
                self._group = ClassicMember(
                    self._client,
                    cfg,
                    self._subs,
                    make_assignors(cfg["partition.assignment.strategy"]),
                )
            self._group.before_revoke = self._commit_before_revoke
        self._auto_commit = bool(cfg["enable.auto.commit"] and cfg["group.id"])
        self._auto_commit_interval = cfg["auto.commit.interval.ms"] / 1000
        self._next_auto_commit = 0.0
        self._max_poll_records = cfg["max.poll.records"]
        self._api_timeout = cfg["default.api.timeout.ms"] / 1000
        self._subscribed = False
        self._started = False
        self._closed = False

    # --- lifecycle ---

    async def start(self) -> AIOConsumer:
        await self._client.start()
        self._fetcher.start()
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._started = True
        return self

    async def __aenter__(self) -> AIOConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, autocommit: bool = True) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._group is not None:
                if autocommit and self._auto_commit and self._started:
                    try:
                        await self.commit()
                    except KafkaError as e:
                        log.warning("final commit failed: %s", e)
                if self._subscribed:
                    await self._group.leave()
                await self._group.close()
        finally:
            await self._fetcher.close()
            await self._client.close()

    @property
    def client(self) -> KafkaClient:
        return self._client

    # --- subscription / assignment ---

    def subscribe(
        self,
        topics: Iterable[str] | None = None,
        *,
        pattern: str | None = None,
        listener: object = None,
    ) -> None:
        """Join the group for ``topics`` (or every topic matching the regex ``pattern``).

        ``listener``: any object with some of :class:`RebalanceListener`'s methods (plain or
        ``async def``); those it has are called at each rebalance."""
        if self._group is None:
            raise IllegalStateError("subscribe needs a group.id")
        if self._subs.user_assigned:
            raise IllegalStateError("subscribe after assign: call unsubscribe() first")
        if pattern is not None:
            self._subs.pattern = re.compile(pattern)
            self._subs.topics = set()
            self._client.track_all_topics()
        else:
            self._subs.pattern = None
            self._subs.topics = set(topics or ())
            self._client.set_topics(self._subs.topics)
        self._group.listener = listener
        self._subscribed = True
        self._group.rejoin_needed = True

    def subscription(self) -> set[str]:
        return set(self._subs.topics)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        if self._subscribed:
            raise IllegalStateError("assign after subscribe: call unsubscribe() first")
        tps = [TopicPartition(*tp) for tp in partitions]
        self._subs.user_assigned = True
        old = set(self._subs.assignment)
        self._subs.assign(tps)
        self._fetcher.drop(old - set(tps))
        self._client.set_topics({tp.topic for tp in tps})
        self._fetcher.wakeup()

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    async def unsubscribe(self) -> None:
        if self._subscribed and self._group is not None:
            if self._auto_commit:
                try:
                    await self.commit()
                except KafkaError as e:
                    log.warning("commit on unsubscribe failed: %s", e)
            await self._group.leave()
        self._fetcher.drop(self._subs.assignment)
        self._subs.assign([])
        self._subs.topics = set()
        self._subs.user_assigned = False
        self._subscribed = False

    # --- positions ---

    def _state(self, tp: TopicPartition) -> PartitionState:
        st = self._subs.assignment.get(tp)
        if st is None:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        return st

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self._state(TopicPartition(*tp))
        st.position = offset
        st.reset = None
        st.needs_committed = False
        self._fetcher.drop([tp])
        self._fetcher.wakeup()

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        await self._reset_to(tps or self.assignment(), "earliest")

    async def seek_to_end(self, *tps: TopicPartition) -> None:
        await self._reset_to(tps or self.assignment(), "latest")

    async def _reset_to(self, tps: Iterable[TopicPartition], how: str) -> None:
        tps = [TopicPartition(*tp) for tp in tps]
        for tp in tps:
            st = self._state(tp)
            st.reset = how
            st.needs_committed = False
        self._fetcher.drop(tps)
        await self._update_positions()

    async def position(self, tp: TopicPartition) -> int | None:
        """The offset of the next record to return (None while the reset found no offset)."""
        tp = TopicPartition(*tp)
        st = self._state(tp)
        if st.position is None or st.reset is not None:
            await self._update_positions()
        return st.position

    def pause(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._state(TopicPartition(*tp)).paused = True
        self._fetcher.drop(tps)

    def resume(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._state(TopicPartition(*tp)).paused = False
        self._fetcher.wakeup()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._subs.assignment.items() if st.paused}

    def highwater(self, tp: TopicPartition) -> int:
        return self._state(TopicPartition(*tp)).high_watermark

    async def _update_positions(self, timeout: float | None = None) -> None:
        """Look up the positions still missing (committed offsets, then the reset policy);
        ``timeout`` (seconds) bounds the offset look-up, and one that runs out leaves the
        positions missing for the next call, as the Java consumer's poll timer does."""
        missing = self._subs.missing_positions()
        if not missing:
            return
        need_committed = [
            tp
            for tp in missing
            if self._subs.assignment[tp].needs_committed and self._subs.assignment[tp].reset is None
        ]
        if need_committed and self._group is not None:
            committed = await self._group.fetch_committed(
                need_committed, require_stable=self.config["isolation.level"] == "read_committed"
            )
            for tp, om in committed.items():
                st = self._subs.assignment.get(tp)
                if st is None:
                    continue
                st.needs_committed = False
                if om is not None and st.position is None:
                    st.position = om.offset
                    st.leader_epoch = om.leader_epoch
        to_reset: dict[TopicPartition, int] = {}
        for tp in self._subs.missing_positions():
            st = self._subs.assignment[tp]
            how = st.reset or self._subs.default_reset
            if how == "none":
                raise error_for_code(ErrorCode.OFFSET_OUT_OF_RANGE)(
                    f"{tp} has no committed offset and auto.offset.reset=none"
                )
            to_reset[tp] = EARLIEST if how == "earliest" else LATEST
        if to_reset:
            try:
                found = await self._list_offsets(to_reset, timeout)
            except KafkaTimeoutError:
                if timeout is None:
                    raise
                return
            for tp, (offset, _ts, _epoch) in found.items():
                st = self._subs.assignment.get(tp)
                if st is not None and offset is not None:
                    st.position = offset
                    st.reset = None
                    st.needs_committed = False
        self._fetcher.wakeup()

    async def _list_offsets(
        self, query: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, tuple[int | None, int, int]]:
        """ListOffsets per leader: {tp: (offset or None, timestamp, leader_epoch)}."""
        query = dict(query)
        isolation = 1 if self.config["isolation.level"] == "read_committed" else 0
        return await list_offsets(
            self._client, query, isolation, self._api_timeout if timeout is None else timeout
        )

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        r = await self._list_offsets({TopicPartition(*tp): EARLIEST for tp in tps})
        return {
            tp: -1 if off is None else off for tp, (off, _, _) in r.items()
        }  # -1: the broker has none

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        r = await self._list_offsets({TopicPartition(*tp): LATEST for tp in tps})
        return {
            tp: -1 if off is None else off for tp, (off, _, _) in r.items()
        }  # -1: the broker has none

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """For each partition, the first (offset, timestamp) at or after the timestamp, or None."""
        r = await self._list_offsets({TopicPartition(*tp): ts for tp, ts in timestamps.items()})
        return {tp: (v[0], v[1]) if v[0] is not None and v[0] >= 0 else None for tp, v in r.items()}

    async def partitions_for_topic(self, topic: str) -> set[int]:
        return set(await self._client.wait_for_metadata(topic, self._api_timeout))

    async def topics(self) -> set[str]:
        resp = await self._client.fetch_metadata(None, update=False)
        return {t.name for t in resp.topics if t.name and not t.error_code}

    # --- offsets ---

    def group_metadata(self) -> ConsumerGroupMetadata:
        if self._group is None:
            raise IllegalStateError("no group.id")
        return self._group.group_metadata()

    def _consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {
            tp: OffsetAndMetadata(st.position, None, st.leader_epoch)
            for tp, st in self._subs.assignment.items()
            if st.position is not None
        }

    async def commit(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None
    ) -> None:
        """Commit ``offsets`` (next offsets to read), or every consumed position."""
        if self._group is None:
            raise IllegalStateError("commit needs a group.id")
        if offsets is None:
            oms = self._consumed()
        else:
            oms = {
                TopicPartition(*tp): v
                if isinstance(v, OffsetAndMetadata)
                else OffsetAndMetadata(int(v))
                for tp, v in offsets.items()
            }
        await self._group.commit(oms, timeout=self._api_timeout)

    async def _commit_before_revoke(self, tps: set[TopicPartition]) -> None:
        if self._auto_commit and self._group is not None:
            oms = {tp: om for tp, om in self._consumed().items() if tp in tps}
            await self._group.commit(oms, timeout=self._api_timeout)
        self._fetcher.drop(tps)

    async def committed(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        if self._group is None:
            raise IllegalStateError("committed needs a group.id")
        return await self._group.fetch_committed(
            [TopicPartition(*tp) for tp in tps], timeout=self._api_timeout
        )

    async def _maybe_auto_commit(self) -> None:
        if not self._auto_commit:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self._auto_commit_interval
        if self._group is None:
            return
        try:
            await self._group.commit(self._consumed(), timeout=self._api_timeout)
        except KafkaError as e:
            log.warning("auto-commit failed: %s", e)

    # --- polling ---

    def _wanted_topics(self) -> set[str]:
        if self._subs.pattern is not None:
            pat = self._subs.pattern
            topics = {
                t
                for t, tm in self._client.cluster.topics.items()
                if pat.fullmatch(t)
                and not (tm.is_internal and self.config["exclude.internal.topics"])
            }
            self._subs.topics = topics
            return topics
        return self._subs.topics

    async def poll(
        self, timeout_ms: int = 1000, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records from the assigned partitions; waits up to ``timeout_ms`` for some."""
        if not self._started:
            raise IllegalStateError("consumer not started")
        max_records = max_records or self._max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if self._subscribed and self._group is not None:
                topics = self._wanted_topics()
                if self._subs.pattern is not None and not topics:
                    await self._client.refresh_metadata()
                    topics = self._wanted_topics()
                await self._group.ensure_active(topics)
            await self._update_positions(max(deadline - time.monotonic(), 0.001))
            await self._maybe_auto_commit()
            records = self._fetcher.take(max_records)
            if records:
                return records
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            self._fetcher.wakeup()
            await self._fetcher.wait_for_data(min(left, 0.25 if self._subscribed else left))

    async def getone(self, timeout_ms: int | None = None) -> ConsumerRecord:
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        while True:
            wait = 1000 if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
            recs = await self.poll(wait, max_records=1)
            if recs:
                return recs[0]
            if deadline is not None and time.monotonic() >= deadline:
                raise KafkaTimeoutError("no record within the timeout")

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[ConsumerRecord]:
        while not self._closed:
            for r in await self.poll(1000):
                yield r


async def list_offsets(
    client: KafkaClient,
    query: dict[TopicPartition, int],
    isolation_level: int,
    timeout: float,
) -> dict[TopicPartition, tuple[int | None, int, int]]:
    """ListOffsets for many partitions, one request per leader, retrying stale leaders."""
    out: dict[TopicPartition, tuple[int | None, int, int]] = {}
    pending = dict(query)
    deadline = time.monotonic() + timeout
    for t in {tp.topic for tp in pending}:
        client.add_topics([t])
    refreshed = False  # a refresh that did not find the leaders is followed by a backoff
    while pending:
        cluster = client.cluster
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, ts in pending.items():
            node = cluster.leader_for(tp)
            if node < 0:
                continue
            by_node.setdefault(node, {})[tp] = ts
        if not by_node:
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"no leader for {sorted(pending)}")
            if refreshed:
                await asyncio.sleep(client.retry_backoff)
            await client.refresh_metadata()
            refreshed = True
            continue
        refreshed = False

        async def one(
            node: int, q: dict[TopicPartition, int], cluster: ClusterMetadata = cluster
        ) -> None:
            conn = await client.connection(node)
            version = conn.version(ListOffsetsRequest.API_KEY, min_version=1)
            if any(ts == MAX_TIMESTAMP for ts in q.values()):
                version = max(version, 7)
            topics: dict[str, list[ListOffsetsRequest.Topics.Partitions]] = {}
            for tp, ts in q.items():
                pm = cluster.partition(tp)
                topics.setdefault(tp.topic, []).append(
                    ListOffsetsRequest.Topics.Partitions(
                        partition_index=tp.partition,
                        current_leader_epoch=pm.leader_epoch if pm else -1,
                        timestamp=ts,
                    )
                )
            req = ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[
                    ListOffsetsRequest.Topics(name=t, partitions=ps) for t, ps in topics.items()
                ],
            )
            resp: ListOffsetsResponse = await conn.send(req, version)
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if tp not in pending:
                        continue
                    if p.error_code == 0:
                        off = p.offset if p.offset >= 0 else None
                        out[tp] = (off, p.timestamp, p.leader_epoch)
                        del pending[tp]
                    elif error_for_code(p.error_code).retriable:
                        client.request_update()
                    else:
                        raise error_for_code(p.error_code)(f"ListOffsets {tp}")

        results = await asyncio.gather(
            *(one(n, q) for n, q in by_node.items()), return_exceptions=True
        )
        for r in results:
            if isinstance(r, BaseException):
                if isinstance(r, KafkaError) and r.retriable:
                    client.request_update()
                else:
                    raise r
        if pending:
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"ListOffsets did not complete for {sorted(pending)}")
            await asyncio.sleep(client.retry_backoff)
            await client.refresh_metadata()
    return out
