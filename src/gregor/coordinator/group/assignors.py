"""Server-side assignors of the KIP-848 consumer protocol: ``uniform`` and ``range``.

Both take each member's subscribed topic ids and its current target assignment, and the
partition count of every subscribed topic, and return a new target assignment
(member id -> topic id -> partitions). They are pure and deterministic: the same input gives
the same output, so a target computed again after a restart matches the one persisted.

``uniform`` spreads all partitions evenly (member counts differ by at most one among members
that could take the same partitions) and is sticky: a partition stays with its current owner
unless balance requires a move. With identical subscriptions it fills exact floor/ceil
quotas; with different subscriptions it places free partitions on the least loaded eligible
member and then moves partitions from the most to the least loaded member until no move
helps.

``range`` assigns each topic on its own: the members subscribed to it, sorted by member id,
get contiguous ranges, the first ``partitions % members`` one partition more, so members
subscribed to co-partitioned topics get the same partition numbers of each.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

Assignment = dict[uuid.UUID, set[int]]


@dataclass
class MemberSpec:
    member_id: str
    topics: set[uuid.UUID]
    current: Assignment = field(default_factory=dict)


class UnknownAssignorError(ValueError):
    pass


def _empty(members: Mapping[str, MemberSpec]) -> dict[str, Assignment]:
    return {m: {} for m in members}


def _add(a: Assignment, tid: uuid.UUID, p: int) -> None:
    a.setdefault(tid, set()).add(p)


def range_assign(
    members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    out = _empty(members)
    topics = sorted({t for m in members.values() for t in m.topics if t in partitions}, key=str)
    for tid in topics:
        subs = sorted(m for m, spec in members.items() if tid in spec.topics)
        n = partitions[tid]
        base, extra = divmod(n, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            count = base + (1 if i < extra else 0)
            for p in range(start, start + count):
                _add(out[mid], tid, p)
            start += count
    return out


def uniform_assign(
    members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    if not members:
        return {}
    subs = {frozenset(t for t in m.topics if t in partitions) for m in members.values()}
    if len(subs) == 1:
        return _uniform_homogeneous(members, partitions, next(iter(subs)))
    return _uniform_general(members, partitions)


def _all_partitions(
    topics: frozenset[uuid.UUID] | set[uuid.UUID], partitions: Mapping[uuid.UUID, int]
) -> list[tuple[uuid.UUID, int]]:
    return [(t, p) for t in sorted(topics, key=str) for p in range(partitions[t])]


def _uniform_homogeneous(
    members: Mapping[str, MemberSpec],
    partitions: Mapping[uuid.UUID, int],
    topics: frozenset[uuid.UUID],
) -> dict[str, Assignment]:
    all_tps = _all_partitions(topics, partitions)
    valid = set(all_tps)
    order = sorted(members)
    kept: dict[str, list[tuple[uuid.UUID, int]]] = {}
    for mid in order:
        cur = members[mid].current
        kept[mid] = sorted(
            ((t, p) for t, ps in cur.items() for p in ps if (t, p) in valid),
            key=lambda x: (str(x[0]), x[1]),
        )
    base, extra = divmod(len(all_tps), len(order))
    # The members that already own the most get the larger quotas: fewest moves.
    by_owned = sorted(order, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_owned)}
    taken: set[tuple[uuid.UUID, int]] = set()
    result: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in order}
    for mid in order:
        for tp in kept[mid]:
            if len(result[mid]) >= quota[mid]:
                break
            if tp not in taken:
                taken.add(tp)
                result[mid].append(tp)
    free = [tp for tp in all_tps if tp not in taken]
    fi = 0
    for mid in order:
        while len(result[mid]) < quota[mid] and fi < len(free):
            result[mid].append(free[fi])
            fi += 1
    out = _empty(members)
    for mid, tps in result.items():
        for t, p in tps:
            _add(out[mid], t, p)
    return out


def _uniform_general(
    members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    order = sorted(members)
    topics = {t for m in members.values() for t in m.topics if t in partitions}
    all_tps = _all_partitions(topics, partitions)
    eligible = {tp: [m for m in order if tp[0] in members[m].topics] for tp in all_tps}
    owner: dict[tuple[uuid.UUID, int], str] = {}
    load = {m: 0 for m in order}
    for mid in order:
        for t, ps in members[mid].current.items():
            for p in ps:
                tp = (t, p)
                if tp in eligible and tp not in owner and mid in eligible[tp]:
                    owner[tp] = mid
                    load[mid] += 1
    for tp in all_tps:
        if tp not in owner and eligible[tp]:
            mid = min(eligible[tp], key=lambda m: (load[m], m))
            owner[tp] = mid
            load[mid] += 1
    owned: dict[str, list[tuple[uuid.UUID, int]]] = {m: [] for m in order}
    for tp, mid in owner.items():
        owned[mid].append(tp)
    moved = True
    while moved:
        moved = False
        ranked = sorted(order, key=lambda m: (load[m], m))
        for lo in ranked:
            for hi in reversed(ranked):
                if load[hi] - load[lo] <= 1:
                    break
                cand = [tp for tp in owned[hi] if lo in eligible[tp]]
                if not cand:
                    continue
                tp = max(cand, key=lambda x: (str(x[0]), x[1]))
                owned[hi].remove(tp)
                owned[lo].append(tp)
                load[hi] -= 1
                load[lo] += 1
                moved = True
                break
            if moved:
                break
    out = _empty(members)
    for mid, tps in owned.items():
        for t, p in tps:
            _add(out[mid], t, p)
    return out


ASSIGNORS = {"uniform": uniform_assign, "range": range_assign}


def assign(
    name: str, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
) -> dict[str, Assignment]:
    try:
        fn = ASSIGNORS[name]
    except KeyError:
        raise UnknownAssignorError(name) from None
    return fn(members, partitions)
