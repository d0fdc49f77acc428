"""A share group consumer (KIP-932): queue-like consumption where members of a group may share
partitions and each record is handed to one member at a time.

Theory of operation. ``AIOShareConsumer`` joins its share group with ShareGroupHeartbeat
(v1: the member names itself with a UUID) on a background task and keeps the assignment it is
given (topic ids, mapped to names through metadata). ``poll`` sends ShareFetch to the leader of
each assigned partition, one share session per broker: epoch 0 opens it with that broker's
partitions, each later request carries the next epoch, names partitions new to the session and
forgets the ones no longer assigned; a session the broker lost (SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH) is opened again. A fetch answer's records are returned only
inside its acquired ranges, each with its delivery count.

Acknowledgements ride on the next ShareFetch to the same broker. In ``implicit`` mode
(``share.acknowledgement.mode``, the default) every record of a poll is accepted when the next
``poll`` (or ``commit_sync``) runs; in ``explicit`` mode the application calls
``acknowledge(record, ACCEPT | RELEASE | REJECT)``. ``commit_sync`` sends pending
acknowledgements at once (ShareAcknowledge) and returns each partition's result. ``close``
sends what is pending with the final epoch (-1), which also releases what the member still
holds, and leaves the group.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable
from typing import NamedTuple

from gregor.client.core.client import KafkaClient
from gregor.client.core.config import Config, Settings, SettingValue
from gregor.client.core.errors import error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol import messages
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.protocol.records.batch import iter_records

log = logging.getLogger("gregor.client.share")

ACCEPT, RELEASE, REJECT = 1, 2, 3
_SESSION_LOST = (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH)


class ShareRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    delivery_count: int


class _Session:
    __slots__ = ("epoch", "partitions")

    def __init__(self) -> None:
        self.epoch = 0
        self.partitions: set[TopicPartition] = set()


class AIOShareConsumer:
    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
        self.config = Config("share_consumer", config, **kwargs)
        group_id = self.config["group.id"]
        if not group_id:
            raise KafkaError("a share consumer needs group.id")
        mode = self.config["share.acknowledgement.mode"]
        if mode not in ("implicit", "explicit"):
            raise KafkaError(
                f"share.acknowledgement.mode must be implicit or explicit, not {mode!r}"
            )
        self.explicit = mode == "explicit"
        self.group_id: str = group_id
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self._client = KafkaClient(self.config)
        self._topics: list[str] = []
        self._assignment: dict[uuid.UUID, list[int]] = {}
        self._interval = 5.0
        self._heartbeats: asyncio.Task[None] | None = None
        self._sessions: dict[int, _Session] = {}
        self._pending: dict[TopicPartition, dict[int, int]] = {}  # offset -> acknowledge type
        self._delivered: list[ShareRecord] = []  # the last poll's records (implicit mode)
        self._joined = asyncio.Event()
        self.closed = False

    async def start(self) -> AIOShareConsumer:
        await self._client.start()
        return self

    async def __aenter__(self) -> AIOShareConsumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- membership ---

    async def subscribe(self, topics: Iterable[str]) -> None:
        self._topics = sorted(set(topics))
        self._client.set_topics(self._topics)
        if self._heartbeats is None:
            self._heartbeats = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        else:
            await self._heartbeat()

    async def _heartbeat(self, leaving: bool = False) -> None:
        node = await self._client.find_coordinator(self.group_id, 0)
        req = messages.ShareGroupHeartbeatRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            member_epoch=-1 if leaving else self.member_epoch,
            rack_id=self.config["client.rack"] or None,
            subscribed_topic_names=None if leaving or self.member_epoch else self._topics,
        )
        resp: messages.ShareGroupHeartbeatResponse = await self._client.send(node, req)
        if leaving:
            return
        if resp.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            self.member_epoch = 0  # join again with the next heartbeat
            return
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        self.member_epoch = resp.member_epoch
        if resp.heartbeat_interval_ms > 0:
            self._interval = resp.heartbeat_interval_ms / 1000
        if resp.assignment is not None:
            self._assignment = {
                t.topic_id: list(t.partitions) for t in resp.assignment.topic_partitions
            }
            self._joined.set()

    async def _heartbeat_loop(self) -> None:
        while not self.closed:
            try:
                await self._heartbeat()
            except (KafkaError, OSError) as e:
                log.debug("share group heartbeat failed: %s", e)
            await asyncio.sleep(self._interval if self.member_epoch else 0.1)

    def assignment(self) -> set[TopicPartition]:
        names = self._client.cluster.topic_names
        return {
            TopicPartition(names[tid], p)
            for tid, ps in self._assignment.items()
            if tid in names
            for p in ps
        }

    # --- acknowledgements ---

    def acknowledge(self, record: ShareRecord, ack_type: int = ACCEPT) -> None:
        if ack_type not in (ACCEPT, RELEASE, REJECT):
            raise KafkaError(f"unknown acknowledge type {ack_type}")
        self._pending.setdefault(TopicPartition(record.topic, record.partition), {})[
            record.offset
        ] = ack_type

    def _implicit_acks(self) -> None:
        if not self.explicit:
            for r in self._delivered:
                self._pending.setdefault(TopicPartition(r.topic, r.partition), {}).setdefault(
                    r.offset, ACCEPT
                )
        self._delivered = []

    @staticmethod
    def _batches(acks: dict[int, int]) -> list[tuple[int, int, int]]:
        """(first, last, type) runs of consecutive offsets with one type."""
        runs: list[tuple[int, int, int]] = []
        for off in sorted(acks):
            kind = acks[off]
            if runs and runs[-1][1] == off - 1 and runs[-1][2] == kind:
                runs[-1] = (runs[-1][0], off, kind)
            else:
                runs.append((off, off, kind))
        return runs

    def _take_acks(self, node: int) -> dict[TopicPartition, list[tuple[int, int, int]]]:
        cluster = self._client.cluster
        out: dict[TopicPartition, list[tuple[int, int, int]]] = {}
        for tp in [tp for tp in self._pending if cluster.leader_for(tp) == node]:
            out[tp] = self._batches(self._pending.pop(tp))
        return out

    # --- fetching ---

    async def poll(self, timeout: float = 1.0) -> list[ShareRecord]:
        """Records acquired for this member (at most ``max.poll.records`` per broker)."""
        self._implicit_acks()
        if not self._joined.is_set():
            try:  # asyncio.timeout keeps a cancellation that races the wake-up (3.11)
                async with asyncio.timeout(timeout):
                    await self._joined.wait()
            except TimeoutError:
                return []
        await self._client.refresh_metadata()
        by_node: dict[int, set[TopicPartition]] = {}
        for tp in self.assignment():
            by_node.setdefault(self._client.cluster.leader_for(tp), set()).add(tp)
        for node in [n for n in self._sessions if n not in by_node]:
            by_node[node] = set()  # forget what moved away
        wait_ms = min(int(timeout * 1000), self.config["fetch.max.wait.ms"])
        results = await asyncio.gather(
            *(self._fetch(node, tps, wait_ms) for node, tps in by_node.items() if node >= 0),
            return_exceptions=True,
        )
        records: list[ShareRecord] = []
        for r in results:
            if isinstance(r, BaseException):
                log.debug("share fetch failed: %s", r)
                continue
            records.extend(r)
        self._delivered = list(records)
        return records

    async def _fetch(
        self, node: int, partitions: set[TopicPartition], wait_ms: int
    ) -> list[ShareRecord]:
        session = self._sessions.setdefault(node, _Session())
        acks = self._take_acks(node)
        cluster = self._client.cluster
        if session.epoch == 0:
            session.partitions = set()
        added = partitions - session.partitions
        forgotten = session.partitions - partitions
        named = added | set(acks)
        T = messages.ShareFetchRequest.Topics
        topics: dict[uuid.UUID, list[messages.ShareFetchRequest.Topics.Partitions]] = {}
        for tp in sorted(named):
            tid = cluster.topic_id(tp.topic)
            if tid is None:
                continue
            topics.setdefault(tid, []).append(
                T.Partitions(
                    partition_index=tp.partition,
                    partition_max_bytes=self.config["max.partition.fetch.bytes"],
                    acknowledgement_batches=[
                        T.Partitions.AcknowledgementBatches(
                            first_offset=a, last_offset=b, acknowledge_types=[k]
                        )
                        for a, b, k in acks.get(tp, [])
                    ],
                )
            )
        forget: dict[uuid.UUID, list[int]] = {}
        for tp in forgotten:
            tid = cluster.topic_id(tp.topic)
            if tid is not None:
                forget.setdefault(tid, []).append(tp.partition)
        req = messages.ShareFetchRequest(
            group_id=self.group_id,
            member_id=self.member_id,
            share_session_epoch=session.epoch,
            max_wait_ms=wait_ms,
            min_bytes=1,
            max_bytes=self.config["fetch.max.bytes"],
            max_records=self.config["max.poll.records"],
            batch_size=self.config["max.poll.records"],
            topics=[T(topic_id=tid, partitions=ps) for tid, ps in topics.items()],
            forgotten_topics_data=[
                messages.ShareFetchRequest.ForgottenTopicsData(topic_id=tid, partitions=ps)
                for tid, ps in forget.items()
            ],
        )
        resp: messages.ShareFetchResponse = await self._client.send(node, req)
        if resp.error_code in _SESSION_LOST:
            session.epoch = 0
            for tp, runs in acks.items():  # try them again with a new session
                for first, last, kind in runs:
                    for off in range(first, last + 1):
                        self._pending.setdefault(tp, {}).setdefault(off, kind)
            return []
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        session.partitions = set(partitions)
        out: list[ShareRecord] = []
        for t in resp.responses:
            name = cluster.topic_names.get(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                if p.error_code or not p.acquired_records or not p.records:
                    continue
                counts = {}
                for a in p.acquired_records:
                    for off in range(a.first_offset, a.last_offset + 1):
                        counts[off] = a.delivery_count
                for rec in iter_records(p.records, skip_control=True):
                    count = counts.get(rec.offset)
                    if count is not None:
                        out.append(
                            ShareRecord(
                                name,
                                p.partition_index,
                                rec.offset,
                                rec.timestamp,
                                rec.key,
                                rec.value,
                                tuple((k, v) for k, v in rec.headers),
                                count,
                            )
                        )
        return out

    async def commit_sync(self) -> dict[TopicPartition, KafkaError | None]:
        """Send pending acknowledgements now; each partition's result."""
        self._implicit_acks()
        return await self._acknowledge(final=False)

    async def _acknowledge(self, final: bool) -> dict[TopicPartition, KafkaError | None]:
        cluster = self._client.cluster
        out: dict[TopicPartition, KafkaError | None] = {}
        nodes = {cluster.leader_for(tp) for tp in self._pending} | (
            set(self._sessions) if final else set()
        )
        for node in sorted(n for n in nodes if n >= 0):
            session = self._sessions.get(node)
            acks = self._take_acks(node)
            if session is None or session.epoch == 0:
                out.update(
                    {tp: KafkaError("no share session with the partition's leader") for tp in acks}
                )
                continue
            A = messages.ShareAcknowledgeRequest.Topics
            topics: dict[uuid.UUID, list[messages.ShareAcknowledgeRequest.Topics.Partitions]] = {}
            for tp, runs in acks.items():
                tid = cluster.topic_id(tp.topic)
                if tid is not None:
                    topics.setdefault(tid, []).append(
                        A.Partitions(
                            partition_index=tp.partition,
                            acknowledgement_batches=[
                                A.Partitions.AcknowledgementBatches(
                                    first_offset=a, last_offset=b, acknowledge_types=[k]
                                )
                                for a, b, k in runs
                            ],
                        )
                    )
            req = messages.ShareAcknowledgeRequest(
                group_id=self.group_id,
                member_id=self.member_id,
                share_session_epoch=-1 if final else session.epoch,
                topics=[A(topic_id=tid, partitions=ps) for tid, ps in topics.items()],
            )
            resp: messages.ShareAcknowledgeResponse = await self._client.send(node, req)
            if final:
                self._sessions.pop(node, None)
            else:
                session.epoch += 1
            if resp.error_code:
                err = error_for_code(resp.error_code)(resp.error_message)
                out.update(dict.fromkeys(acks, err))
                if resp.error_code in _SESSION_LOST:
                    session.epoch = 0
                continue
            for t in resp.responses:
                name = cluster.topic_names.get(t.topic_id, "")
                for p in t.partitions:
                    out[TopicPartition(name, p.partition_index)] = (
                        error_for_code(p.error_code)(p.error_message) if p.error_code else None
                    )
            for tp in acks:
                out.setdefault(tp, None)
        return out

    async def close(self) -> None:
        if self.closed:
            return
        self._implicit_acks()
        try:
            await self._acknowledge(final=True)
        except (KafkaError, OSError) as e:
            log.debug("final acknowledgements failed: %s", e)
        self.closed = True
        if self._heartbeats is not None:
            self._heartbeats.cancel()
            try:
                await self._heartbeats
            except BaseException:  # noqa: BLE001 - cancelled on purpose
                pass
            try:
                await self._heartbeat(leaving=True)
            except (KafkaError, OSError) as e:
                log.debug("leaving the share group failed: %s", e)
        await self._client.close()


__all__ = ["ACCEPT", "AIOShareConsumer", "REJECT", "RELEASE", "ShareRecord"]
