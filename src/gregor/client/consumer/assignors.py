"""Classic group protocol: the consumer's subscription/assignment encoding and the assignors.

Layouts (Kafka's "consumer" protocol type; non-flexible encoding: INT16 string lengths,
INT32 array and bytes lengths):

* Subscription v0: version INT16, topics [STRING], user_data NULLABLE_BYTES;
  v1 adds owned_partitions [topic STRING, partitions [INT32]]; v2 adds generation_id INT32;
  v3 adds rack_id NULLABLE_STRING.
* Assignment v0/v1: version INT16, assigned_partitions [topic STRING, partitions [INT32]],
  user_data NULLABLE_BYTES.

Readers accept any version at or above what they know and ignore trailing fields, as Kafka
does, so members running newer clients can share a group.

Assignors run on the group leader: ``assign(members, partitions_per_topic)`` where
``members`` maps member id to :class:`Subscription`. ``range`` and ``roundrobin`` are eager
(every member gives up everything at each rebalance); ``cooperative-sticky`` keeps owned
partitions where balance allows and, for a partition that must move, leaves it unassigned in
this round so its owner revokes it first; the owner's follow-up rejoin then places it.
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from gregor.protocol.exceptions import ProtocolError

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

EAGER = "eager"
COOPERATIVE = "cooperative"


@dataclass
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: dict[str, list[int]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 3


@dataclass
class Assignment:
    partitions: dict[str, list[int]]
    user_data: bytes | None = None
    version: int = 1


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def left(self) -> int:
        return len(self.buf) - self.pos

    def i16(self) -> int:
        v: int = _I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self) -> int:
        v: int = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.buf[self.pos : self.pos + n]
        if len(s) != n:
            raise ProtocolError("truncated string")
        self.pos += n
        return s.decode()

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n < 0:
            return None
        b = self.buf[self.pos : self.pos + n]
        if len(b) != n:
            raise ProtocolError("truncated bytes")
        self.pos += n
        return bytes(b)

    def topic_partitions(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for _ in range(max(self.i32(), 0)):
            topic = self.string() or ""
            n = self.i32()
            out[topic] = [self.i32() for _ in range(max(n, 0))]
        return out


def _string(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    b = s.encode()
    return _I16.pack(len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    if b is None:
        return _I32.pack(-1)
    return _I32.pack(len(b)) + b


def _topic_partitions(tps: Mapping[str, list[int]]) -> bytes:
    parts = [_I32.pack(len(tps))]
    for topic, ps in sorted(tps.items()):
        parts.append(_string(topic))
        parts.append(_I32.pack(len(ps)))
        parts.extend(_I32.pack(p) for p in sorted(ps))
    return b"".join(parts)


def encode_subscription(sub: Subscription) -> bytes:
    v = sub.version
    parts = [_I16.pack(v), _I32.pack(len(sub.topics))]
    parts.extend(_string(t) for t in sub.topics)
    parts.append(_bytes(sub.user_data))
    if v >= 1:
        parts.append(_topic_partitions(sub.owned_partitions))
    if v >= 2:
        parts.append(_I32.pack(sub.generation_id))
    if v >= 3:
        parts.append(_string(sub.rack_id))
    return b"".join(parts)


def decode_subscription(data: bytes) -> Subscription:
    try:
        r = _Reader(bytes(data))
        version = r.i16()
        topics = [r.string() or "" for _ in range(max(r.i32(), 0))]
        user_data = r.bytes_()
        sub = Subscription(topics, user_data, version=version)
        if version >= 1 and r.left():
            sub.owned_partitions = r.topic_partitions()
        if version >= 2 and r.left():
            sub.generation_id = r.i32()
        if version >= 3 and r.left():
            sub.rack_id = r.string()
        return sub
    except (struct.error, UnicodeDecodeError) as e:
        raise ProtocolError(f"malformed consumer subscription: {e}") from None


def encode_assignment(a: Assignment) -> bytes:
    return b"".join((_I16.pack(a.version), _topic_partitions(a.partitions), _bytes(a.user_data)))


def decode_assignment(data: bytes) -> Assignment:
    if not data:
        return Assignment({})
    try:
        r = _Reader(bytes(data))
        version = r.i16()
        parts = r.topic_partitions()
        user_data = r.bytes_() if r.left() >= 4 else None
        return Assignment(parts, user_data, version)
    except (struct.error, UnicodeDecodeError) as e:
        raise ProtocolError(f"malformed consumer assignment: {e}") from None


# --- assignors ---


class Assignor:
    name = ""
    protocol = EAGER

    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> dict[str, dict[str, list[int]]]:
        raise NotImplementedError


class RangeAssignor(Assignor):
    """Per topic, consecutive ranges of partitions to the members sorted by id."""

    name = "range"

    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> dict[str, dict[str, list[int]]]:
        out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
        by_topic: dict[str, list[str]] = defaultdict(list)
        for m, sub in members.items():
            for t in sub.topics:
                by_topic[t].append(m)
        for topic, subscribers in by_topic.items():
            n = partitions.get(topic, 0)
            if n <= 0:
                continue
            subscribers.sort()
            per, extra = divmod(n, len(subscribers))
            start = 0
            for i, m in enumerate(subscribers):
                count = per + (1 if i < extra else 0)
                if count:
                    out[m][topic] = list(range(start, start + count))
                start += count
        return out


class RoundRobinAssignor(Assignor):
    """All partitions, sorted, dealt to the members in turn (skipping non-subscribers)."""

    name = "roundrobin"

    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> dict[str, dict[str, list[int]]]:
        out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
        ids = sorted(members)
        if not ids:
            return out
        topics = sorted({t for s in members.values() for t in s.topics})
        i = 0
        for topic in topics:
            for p in range(partitions.get(topic, 0)):
                for _ in range(len(ids)):
                    m = ids[i % len(ids)]
                    i += 1
                    if topic in members[m].topics:
                        out[m].setdefault(topic, []).append(p)
                        break
        return out


class CooperativeStickyAssignor(Assignor):
    """Balanced, sticky to what members own, and safe for incremental rebalancing."""

    name = "cooperative-sticky"
    protocol = COOPERATIVE

    def assign(
        self, members: Mapping[str, Subscription], partitions: Mapping[str, int]
    ) -> dict[str, dict[str, list[int]]]:
        ids = sorted(members)
        out: dict[str, dict[str, list[int]]] = {m: {} for m in ids}
        if not ids:
            return out
        all_tps = [
            (t, p)
            for t in sorted({t for s in members.values() for t in s.topics})
            for p in range(partitions.get(t, 0))
        ]
        subscribers = {t: {m for m in ids if t in members[m].topics} for t, _ in all_tps}
        # Who owns what now (the highest generation wins a partition claimed twice).
        owner: dict[tuple[str, int], str] = {}
        best_gen: dict[tuple[str, int], int] = {}
        for m in ids:
            sub = members[m]
            for t, ps in sub.owned_partitions.items():
                if m not in subscribers.get(t, ()):
                    continue
                for p in ps:
                    tp = (t, p)
                    if p >= partitions.get(t, 0):
                        continue
                    if tp in owner and best_gen[tp] >= sub.generation_id:
                        continue
                    owner[tp] = m
                    best_gen[tp] = sub.generation_id
        floor, extra = divmod(len(all_tps), len(ids))
        owned_by = {m: sorted(tp for tp, o in owner.items() if o == m) for m in ids}
        target: dict[str, list[tuple[str, int]]] = {}
        # Keep owned partitions up to the balanced quota (floor, or floor + 1 for `extra`).
        for m in sorted(ids, key=lambda x: (-len(owned_by[x]), x)):
            cap = floor
            if extra and len(owned_by[m]) > floor:
                cap = floor + 1
                extra -= 1
            target[m] = owned_by[m][:cap]
        assigned = {tp for ps in target.values() for tp in ps}
        for tp in all_tps:
            if tp in assigned:
                continue
            cands = [m for m in ids if m in subscribers[tp[0]]]
            if not cands:
                continue
            m = min(cands, key=lambda c: (len(target[c]), c))
            target[m].append(tp)
        # A partition moving away from a live owner waits one round.
        for m in ids:
            for tp in target[m]:
                prev = owner.get(tp)
                if prev is not None and prev != m:
                    continue
                out[m].setdefault(tp[0], []).append(tp[1])
        return out


ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)
}


def make_assignors(names: str | list[str]) -> list[Assignor]:
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    out = []
    for n in names:
        key = n.lower().rsplit(".", 1)[-1]
        key = {
            "rangeassignor": "range",
            "roundrobinassignor": "roundrobin",
            "cooperativestickyassignor": "cooperative-sticky",
        }.get(key, key)
        cls = ASSIGNORS.get(key)
        if cls is None:
            raise ValueError(f"unknown partition.assignment.strategy {n!r}")
        out.append(cls())
    return out
