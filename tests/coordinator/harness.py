"""Drive a GroupCoordinator without sockets or sleeps: a fake clock, a topics table, and an
in-memory ``__consumer_offsets`` that assigns offsets the way the log does.

``Harness.call`` runs one request and returns its reply (or ``PENDING`` when the coordinator
holds it, as it does for JoinGroup and SyncGroup); held replies show up in ``replies`` when a
later call or ``advance`` releases them. ``restart`` builds a new coordinator and loads it from
the bytes written so far, as the broker does after a restart.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass, field
from typing import Any

from gregor.coordinator import CoordinatorConfig, GroupCoordinator, Token
from gregor.coordinator.group.records import decode_key, decode_value
from gregor.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from gregor.protocol.messages.heartbeat import HeartbeatRequest
from gregor.protocol.messages.join_group import JoinGroupRequest
from gregor.protocol.messages.offset_commit import OffsetCommitRequest
from gregor.protocol.messages.offset_fetch import OffsetFetchRequest
from gregor.protocol.messages.sync_group import SyncGroupRequest
from gregor.protocol.records.batch import decode_batch
from gregor.protocol.records.header import read_header, set_base_offset

PENDING = object()
T0 = 1_700_000_000_000


class FakeClock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Topics:
    """A TopicsView backed by a dict: name -> (id, partitions)."""

    def __init__(self, **counts: int) -> None:
        self.by_name: dict[str, tuple[uuid.UUID, int]] = {}
        for name, n in counts.items():
            self.add(name, n)

    def add(self, name: str, partitions: int) -> uuid.UUID:
        tid = (
            self.by_name[name][0] if name in self.by_name else uuid.uuid5(uuid.NAMESPACE_DNS, name)
        )
        self.by_name[name] = (tid, partitions)
        return tid

    def partition_count(self, topic: str) -> int | None:
        e = self.by_name.get(topic)
        return None if e is None else e[1]

    def topic_id(self, topic: str) -> uuid.UUID | None:
        e = self.by_name.get(topic)
        return None if e is None else e[0]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for name, (tid, _) in self.by_name.items():
            if tid == topic_id:
                return name
        return None

    def topic_names(self) -> list[str]:
        return list(self.by_name)


@dataclass
class Harness:
    config: CoordinatorConfig = field(
        default_factory=lambda: CoordinatorConfig(
            num_partitions=4,
            initial_rebalance_delay_ms=0,
            min_session_timeout_ms=1000,
        )
    )
    topics: Topics = field(default_factory=lambda: Topics(t=6, u=2))
    clock: FakeClock = field(default_factory=FakeClock)
    fail_writes: int = 0  # error code every write completes with, 0 for success
    hold_writes: bool = False  # leave writes uncompleted in ``held``

    def __post_init__(self) -> None:
        self.log: dict[int, list[bytes]] = {p: [] for p in range(self.config.num_partitions)}
        self.next_offset = dict.fromkeys(range(self.config.num_partitions), 0)
        self.replies: dict[int, Any] = {}
        self.held: list[Any] = []
        self.tokens = itertools.count(1)
        self.coord = self._new_coordinator()
        for p in range(self.config.num_partitions):
            self.coord.begin_load(p)
            self.coord.complete_load(p)

    def _new_coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(self.config, self.topics, self.clock)

    # --- driving ---

    def pump(self) -> None:
        c = self.coord
        while c.has_output:
            out = c.take()
            for w in out.writes:
                if self.hold_writes:
                    self.held.append(w)
                    continue
                self._complete(w)
            for r in out.replies:
                r.deliver()

    def _complete(self, w: Any) -> None:
        if self.fail_writes:
            self.coord.write_complete(w.id, self.fail_writes)
            return
        buf = bytearray(w.batch)
        base = self.next_offset[w.partition]
        set_base_offset(buf, 0, base)
        h = read_header(buf, 0)
        self.next_offset[w.partition] = base + h.last_offset_delta + 1
        self.log[w.partition].append(bytes(buf))
        self.coord.write_complete(w.id, 0, base)

    def release_writes(self) -> None:
        held, self.held = self.held, []
        for w in held:
            self._complete(w)
        self.pump()

    def token(self) -> Token[Any]:
        """A new request's token: its reply lands in ``replies`` under its id."""
        n = next(self.tokens)

        def deliver(response: Any) -> None:
            assert n not in self.replies, f"second reply for token {n}"
            self.replies[n] = response

        return Token(n, deliver)

    def send(self, method: str, *args: Any) -> int:
        token = self.token()
        getattr(self.coord, method)(token, *args)
        self.pump()
        return token.id

    def result(self, token: int) -> Any:
        return self.replies.pop(token, PENDING)

    def call(self, method: str, *args: Any) -> Any:
        return self.result(self.send(method, *args))

    def advance(self, ms: int) -> None:
        self.clock.now += ms
        self.coord.tick()
        self.pump()

    def restart(self) -> None:
        """A new coordinator rebuilt from the log."""
        self.coord = self._new_coordinator()
        self.replies.clear()
        for p, batches in self.log.items():
            self.coord.begin_load(p)
            for b in batches:
                self.coord.load_batches(p, b)
            self.coord.complete_load(p)
        self.pump()

    # --- the log ---

    def records(self, partition: int | None = None) -> list[tuple[Any, Any]]:
        """Every (key, value) written, decoded, in log order."""
        out = []
        parts = [partition] if partition is not None else sorted(self.log)
        for p in parts:
            for b in self.log[p]:
                for rec in decode_batch(b).records:
                    key = decode_key(rec.key)
                    out.append((key, decode_value(key, rec.value)))
        return out

    def partition_of(self, group_id: str) -> int:
        return self.coord.partition_for(group_id)

    # --- request helpers ---

    def join(
        self,
        group: str,
        member_id: str = "",
        version: int = 5,
        *,
        instance: str | None = None,
        protocols: list[tuple[str, bytes]] | None = None,
        session: int = 10000,
        rebalance: int = 20000,
        protocol_type: str = "consumer",
        client_id: str = "c",
    ) -> int:
        req = JoinGroupRequest(
            group_id=group,
            session_timeout_ms=session,
            rebalance_timeout_ms=rebalance,
            member_id=member_id,
            group_instance_id=instance,
            protocol_type=protocol_type,
            protocols=[
                JoinGroupRequest.Protocols(name=n, metadata=m)
                for n, m in (
                    protocols
                    if protocols is not None
                    else [("range", b"meta-" + (instance or member_id or "x").encode())]
                )
            ],
        )
        return self.send("join_group", req, version, client_id, "/127.0.0.1")

    def sync(
        self,
        group: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        version: int = 3,
        instance: str | None = None,
    ) -> int:
        req = SyncGroupRequest(
            group_id=group,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
            assignments=[
                SyncGroupRequest.Assignments(member_id=m, assignment=a)
                for m, a in (assignments or {}).items()
            ],
        )
        return self.send("sync_group", req, version)

    def heartbeat(
        self,
        group: str,
        member_id: str,
        generation: int,
        version: int = 3,
        instance: str | None = None,
    ) -> int:
        resp = self.call(
            "heartbeat",
            HeartbeatRequest(
                group_id=group,
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance,
            ),
            version,
        )
        return resp.error_code

    def commit(
        self,
        group: str,
        offsets: dict[tuple[str, int], int],
        generation: int = -1,
        member_id: str = "",
        version: int = 8,
        metadata: str | None = "m",
        leader_epoch: int = -1,
        retention: int = -1,
    ) -> Any:
        topics: dict[str, list[Any]] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append(
                OffsetCommitRequest.Topics.Partitions(
                    partition_index=p,
                    committed_offset=off,
                    committed_leader_epoch=leader_epoch,
                    committed_metadata=metadata,
                )
            )
        req = OffsetCommitRequest(
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            retention_time_ms=retention,
            topics=[OffsetCommitRequest.Topics(name=t, partitions=ps) for t, ps in topics.items()],
        )
        return self.send("offset_commit", req, version)

    def commit_errors(self, token: int) -> dict[tuple[str, int], int]:
        resp = self.result(token)
        assert resp is not PENDING
        return {
            (t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions
        }

    def fetch(
        self,
        group: str,
        topics: dict[str, list[int]] | None,
        version: int = 8,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[int, dict[tuple[str, int], tuple[int, int, str | None, int]]]:
        if version >= 8:
            req = OffsetFetchRequest(
                require_stable=require_stable,
                groups=[
                    OffsetFetchRequest.Groups(
                        group_id=group,
                        member_id=member_id,
                        member_epoch=member_epoch,
                        topics=None
                        if topics is None
                        else [
                            OffsetFetchRequest.Groups.Topics(name=t, partition_indexes=ps)
                            for t, ps in topics.items()
                        ],
                    )
                ],
            )
            resp = self.call("offset_fetch", req, version)
            g = resp.groups[0]
            return g.error_code, {
                (t.name, p.partition_index): (
                    p.committed_offset,
                    p.committed_leader_epoch,
                    p.metadata,
                    p.error_code,
                )
                for t in g.topics
                for p in t.partitions
            }
        req = OffsetFetchRequest(
            group_id=group,
            require_stable=require_stable,
            topics=None
            if topics is None
            else [
                OffsetFetchRequest.Topics(name=t, partition_indexes=ps) for t, ps in topics.items()
            ],
        )
        resp = self.call("offset_fetch", req, version)
        return resp.error_code, {
            (t.name, p.partition_index): (
                p.committed_offset,
                p.committed_leader_epoch,
                p.metadata,
                p.error_code,
            )
            for t in resp.topics
            for p in t.partitions
        }

    def cgh(
        self,
        group: str,
        member_id: str = "",
        epoch: int = 0,
        *,
        topics: list[str] | None = None,
        owned: dict[str, list[int]] | None | str = "auto",
        rebalance: int = -1,
        instance: str | None = None,
        assignor: str | None = None,
        version: int = 0,
        regex: str | None = None,
    ) -> Any:
        """A ConsumerGroupHeartbeat; ``owned`` "auto" sends [] when joining, else null."""
        if owned == "auto":
            owned = {} if epoch == 0 else None
        owned_wire = None
        if isinstance(owned, dict):
            owned_wire = [
                ConsumerGroupHeartbeatRequest.TopicPartitions(
                    topic_id=self.topics.topic_id(t), partitions=ps
                )
                for t, ps in owned.items()
            ]
        fields = dict(
            group_id=group,
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance,
            rebalance_timeout_ms=rebalance,
            subscribed_topic_names=topics,
            server_assignor=assignor,
            topic_partitions=owned_wire,
        )
        req = ConsumerGroupHeartbeatRequest(subscribed_topic_regex=regex, **fields)
        return self.call("consumer_group_heartbeat", req, version, "client", "/10.0.0.1")

    def assignment_of(self, resp: Any) -> dict[str, list[int]] | None:
        if resp.assignment is None:
            return None
        return {
            self.topics.topic_name(tp.topic_id): sorted(tp.partitions)
            for tp in resp.assignment.topic_partitions
        }
