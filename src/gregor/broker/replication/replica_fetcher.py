"""Followers: fetch each followed partition from its leader, as Kafka's replica fetchers do.

Theory of operation. ``ReplicaFetchers`` keeps one ``LeaderFetcher`` task per leader broker;
the replica manager hands it each partition this broker follows (``follow``) and takes it
back when the partition is led here, deleted or moved (``unfollow``). A fetcher holds one
connection to its leader, on the inter-broker listener the leader registered, and loops:

1. **Truncate.** A partition that just got a new leader or leader epoch may hold records
   the new leader never had (written by a deposed leader and never committed). Before it
   fetches, the fetcher asks the leader where the follower's latest epoch ends
   (OffsetForLeaderEpoch) and truncates the log there (KIP-101/279). With no epoch known
   it truncates to its high watermark, the older rule.
2. **Fetch.** One Fetch (with this broker's id as replica id) for every partition ready to
   fetch, each from its log end offset, fenced by the leader epoch. Fetches run in a fetch
   session (KIP-227): after the first, a request names only partitions whose position moved
   and the answer only partitions with news, so idle partitions cost (almost) nothing. The
   leader answers once there is data or after ``replica.fetch.wait.max.ms``. The batches
   come with the leader's offsets and epochs and are appended as they are; the follower
   takes the leader's high watermark and log start offset. The next fetch tells the leader
   how far this follower got, which is what moves the leader's high watermark (acks=all).
3. **Errors.** A follower behind the leader's log start restarts its log there; one ahead
   of the leader truncates (back to 1). Leadership errors (the leader or we have not yet
   seen the newest image) retry shortly; anything else backs off ``replica.fetch.backoff.ms``.
   A lost connection is opened again, at the leader the image names then.

Everything runs on the broker's event loop; a partition is touched only between awaits, and
a response is applied only if the partition is still followed by the same fetcher and its
log end offset is still where the fetch started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gregor.broker.channels.broker_channels import connect_to_broker
from gregor.broker.common.events import log_event
from gregor.broker.config.listener_security import InterBrokerClient
from gregor.broker.replication.partition import Partition
from gregor.client.conn import BrokerConnection
from gregor.client.errors import KafkaConnectionError, KafkaTimeoutError
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages import FetchRequest, FetchResponse, OffsetForLeaderEpochRequest

log = logging.getLogger("gregor.broker.replication")

#: Fetch v12 names topics (v13+ uses ids) and still carries the replica id as a field.
FETCH_MAX_VERSION = 12
#: Retry after a leadership error: the newer image is usually a few milliseconds away.
LEADERSHIP_RETRY_S = 0.05
_LEADERSHIP_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    node_id: int
    listener: str
    #: TLS and SASL login for the inter-broker listener (None: plain text).
    security: InterBrokerClient | None = None
    wait_max_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 1048576
    response_max_bytes: int = 10485760
    backoff_ms: int = 1000


@dataclass(slots=True)
class _Followed:
    partition: Partition
    truncate: bool
    retry_at: float = 0.0


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1


def complete_batches(records: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
    """``records`` without a partial batch at the end (a read cut off by its byte limit)."""
    n = len(records)
    pos = 0
    while pos + 12 <= n:
        end = pos + 12 + int.from_bytes(records[pos + 8 : pos + 12], "big", signed=True)
        if end > n or end <= pos:
            break
        pos = end
    return records if pos == n else memoryview(records)[:pos]


class LeaderFetcher:
    """Replicates every partition this broker follows from one leader."""

    def __init__(
        self, leader_id: int, config: FetcherConfig, image: Callable[[], MetadataImage]
    ) -> None:
        self.leader_id = leader_id
        self.config = config
        self._image = image
        self.followed: dict[tuple[str, int], _Followed] = {}
        self._wake = asyncio.Event()
        self._conn: BrokerConnection | None = None
        #: The fetch session (0: none yet) and what it holds: per partition the follower
        #: state and (fetch offset, leader epoch, log start offset) last sent.
        self._session_id = 0
        self._session_epoch = 0
        self._sent: dict[tuple[str, int], tuple[_Followed, int, int, int]] = {}
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{leader_id}")

    def add(self, partition: Partition, truncate: bool) -> None:
        key = (partition.topic, partition.index)
        current = self.followed.get(key)
        if current is None or current.partition is not partition:
            self.followed[key] = _Followed(partition, True)
        elif truncate:
            current.truncate = True
            current.retry_at = 0.0
        self._wake.set()

    def remove(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        current = self.followed.get(key)
        if current is not None and current.partition is partition:
            del self.followed[key]

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if self._conn is not None:
            self._conn.close()

    # --- the loop ---

    async def _run(self) -> None:
        while True:
            if not self.followed:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                conn = await self._connection()
                await self._truncate(conn)
                now = time.monotonic()
                ready = [f for f in self.followed.values() if not f.truncate and f.retry_at <= now]
                if ready:
                    await self._fetch(conn, ready)
                else:
                    waits = [f.retry_at for f in self.followed.values() if not f.truncate]
                    await self._pause(max(0.0, min(waits, default=now + 0.1) - now))
            except (KafkaConnectionError, KafkaTimeoutError, ProtocolError, OSError) as e:
                log.info("replica fetcher for leader %d: %s", self.leader_id, e)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                self._session_id, self._sent = 0, {}
                await self._pause(self.config.backoff_ms / 1000)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep replicating; say what failed
                log.exception("replica fetcher for leader %d failed", self.leader_id)
                await self._pause(self.config.backoff_ms / 1000)

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake early when a partition is added or needs truncating."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):  # asyncio.timeout: see Controller._run
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    async def _connection(self) -> BrokerConnection:
        """This fetcher's own connection to the leader (its long polls would hold up anything
        else on a shared one)."""
        if self._conn is None or not self._conn.connected:
            self._conn = await connect_to_broker(
                self._image(),
                self.leader_id,
                self.config.listener,
                client_id=f"gregor-replica-fetcher-{self.config.node_id}",
                request_timeout_ms=self.config.wait_max_ms + 30000,
                security=self.config.security,
            )
        return self._conn

    # --- truncation ---

    async def _truncate(self, conn: BrokerConnection) -> None:
        pending = [
            f for f in self.followed.values() if f.truncate and f.retry_at <= time.monotonic()
        ]
        asks: dict[str, list[OffsetForLeaderEpochRequest.Topics.Partitions]] = {}
        for f in pending:
            p = f.partition
            latest = p.log.leader_epoch_cache.latest_epoch
            if latest is None:
                # No epochs (an empty or old log): keep only what was committed.
                self._truncate_log(p, p.log.high_watermark)
                f.truncate = False
                continue
            asks.setdefault(p.topic, []).append(
                OffsetForLeaderEpochRequest.Topics.Partitions(
                    partition=p.index, current_leader_epoch=p.leader_epoch, leader_epoch=latest
                )
            )
        if not asks:
            return
        version = conn.version(OffsetForLeaderEpochRequest.API_KEY)
        req = OffsetForLeaderEpochRequest(
            replica_id=self.config.node_id,
            topics=[
                OffsetForLeaderEpochRequest.Topics(topic=t, partitions=ps) for t, ps in asks.items()
            ],
        )
        resp = await conn.request(req, version)
        for t in resp.topics:
            for r in t.partitions:
                asked = self.followed.get((t.topic, r.partition))
                if asked is None or not asked.truncate:
                    continue
                if r.error_code:
                    asked.retry_at = time.monotonic() + LEADERSHIP_RETRY_S
                    continue
                p = asked.partition
                log_ = p.log
                if r.end_offset < 0:
                    target = log_.high_watermark
                else:
                    # Where the leader's answer epoch ends in our own log, capped by its end.
                    _, ours = log_.leader_epoch_cache.end_offset_for(
                        r.leader_epoch, log_.log_end_offset
                    )
                    target = min(r.end_offset, ours if ours >= 0 else log_.log_end_offset)
                self._truncate_log(p, target)
                asked.truncate = False

    @staticmethod
    def _truncate_log(p: Partition, offset: int) -> None:
        if p.log.truncate_to(max(offset, 0)):
            log_event(log, "replica.truncated", topic=p.topic, partition=p.index, offset=offset)

    # --- fetching ---

    async def _fetch(self, conn: BrokerConnection, ready: list[_Followed]) -> None:
        """One fetch in this fetcher's session (KIP-227): the first names every partition and
        opens it; later ones name only partitions whose position changed, and forget those
        no longer ready, so an idle partition costs nothing on either side."""
        cfg = self.config
        topics: dict[str, list[FetchRequest.Topics.Partitions]] = {}
        wanted: dict[tuple[str, int], tuple[_Followed, int, int, int]] = {}
        for f in ready:
            p = f.partition
            wanted[(p.topic, p.index)] = (
                f,
                p.log.log_end_offset,
                p.leader_epoch,
                p.log.log_start_offset,
            )
        full = self._session_id == 0
        for key, (f, offset, epoch, start) in wanted.items():
            if full or self._sent.get(key) != (f, offset, epoch, start):
                topics.setdefault(key[0], []).append(
                    FetchRequest.Topics.Partitions(
                        partition=key[1],
                        current_leader_epoch=epoch,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=start,
                        partition_max_bytes=cfg.max_bytes,
                    )
                )
        forgotten: dict[str, list[int]] = {}
        if not full:
            for key in self._sent:
                if key not in wanted:
                    forgotten.setdefault(key[0], []).append(key[1])
        req = FetchRequest(
            replica_id=cfg.node_id,
            max_wait_ms=cfg.wait_max_ms,
            min_bytes=cfg.min_bytes,
            max_bytes=cfg.response_max_bytes,
            isolation_level=0,
            session_id=self._session_id,
            session_epoch=0 if full else self._session_epoch,
            topics=[FetchRequest.Topics(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[
                FetchRequest.ForgottenTopicsData(topic=t, partitions=ps)
                for t, ps in forgotten.items()
            ],
            rack_id="",
        )
        version = min(conn.version(FetchRequest.API_KEY), FETCH_MAX_VERSION)
        self._sent = dict(wanted)  # what the session holds once this request is taken
        resp = await conn.request(req, version)
        if resp.error_code:
            self._session_id, self._sent = 0, {}  # the session is gone: a full fetch next
            if resp.error_code in (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            ):
                return
            raise KafkaConnectionError(
                f"fetch from leader {self.leader_id} failed: {ErrorCode(resp.error_code).name}"
            )
        if resp.session_id == 0:
            self._session_id, self._sent = 0, {}  # no session (cache full): full fetches
        else:
            self._session_id = resp.session_id
            self._session_epoch = 1 if full else _next_epoch(self._session_epoch)
        for t in resp.responses:
            for r in t.partitions:
                entry = wanted.get((t.topic, r.partition_index))
                if entry is None:
                    continue
                f, offset = entry[0], entry[1]
                p = f.partition
                if (
                    self.followed.get((p.topic, p.index)) is not f
                    or f.truncate
                    or p.log.log_end_offset != offset
                ):
                    continue  # moved, re-led or truncated while the fetch was out
                self._apply(f, r)

    def _apply(self, f: _Followed, r: FetchResponse.Responses.Partitions) -> None:
        p = f.partition
        code = r.error_code
        if code == ErrorCode.NONE:
            records = r.records
            if records:
                records = complete_batches(records)
                if len(records):
                    try:
                        p.append_as_follower(records)
                    except KafkaError as e:
                        log.warning(
                            "%s-%d: follower append failed (%s): truncating", p.topic, p.index, e
                        )
                        f.truncate = True
                        return
            p.follower_fetched(r.high_watermark, r.log_start_offset)
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if 0 <= p.log.log_end_offset < r.log_start_offset:
                p.log.truncate_fully_and_start_at(r.log_start_offset)
                log_event(
                    log,
                    "replica.restarted_at",
                    topic=p.topic,
                    partition=p.index,
                    offset=r.log_start_offset,
                )
            else:
                f.truncate = True  # ahead of the leader: find where we diverged
        elif code in _LEADERSHIP_ERRORS:
            f.retry_at = time.monotonic() + LEADERSHIP_RETRY_S
        else:
            log.warning(
                "%s-%d: fetch from leader %d: %s",
                p.topic,
                p.index,
                self.leader_id,
                ErrorCode(code).name,
            )
            f.retry_at = time.monotonic() + self.config.backoff_ms / 1000


class ReplicaFetchers:
    """The ``FollowerFetchers`` of the replica manager: one ``LeaderFetcher`` per leader."""

    def __init__(self, config: FetcherConfig, image: Callable[[], MetadataImage]) -> None:
        self.config = config
        self._image = image
        self.fetchers: dict[int, LeaderFetcher] = {}
        self._leader_of: dict[tuple[str, int], int] = {}

    def follow(self, partition: Partition, *, truncate: bool) -> None:
        key = (partition.topic, partition.index)
        leader = partition.leader_id
        old = self._leader_of.get(key)
        if old is not None and old != leader and old in self.fetchers:
            self.fetchers[old].remove(partition)
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = LeaderFetcher(leader, self.config, self._image)
        self._leader_of[key] = leader
        fetcher.add(partition, truncate or old != leader)

    def unfollow(self, partition: Partition) -> None:
        key = (partition.topic, partition.index)
        old = self._leader_of.pop(key, None)
        if old is not None and old in self.fetchers:
            self.fetchers[old].remove(partition)

    async def close(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        for fetcher in fetchers:
            await fetcher.close()
