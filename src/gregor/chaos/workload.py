"""The workload: which operation each client runs next, seeded.

Keys are topic-partitions: key ``k`` is partition ``k % PARTITIONS`` of topic
``chaos-<k // PARTITIONS>``. Values are integers, unique in the run, sent as their decimal
text (the record key is the key's number). A *slot* is a client position: its client library,
whether its producer is transactional, and whether its consumer assigns or subscribes; the
process in a slot is replaced after a crash or an operation of unknown outcome, and the new
one keeps the slot's transactional id (so it fences its predecessor) and group.

Operations per slot:

- a subscribing slot first subscribes to every topic (one group for all of them, so members
  come and go and rebalance mid-run); an assigning slot assigns a few keys, and re-assigns
  every few operations, steered toward keys with values sent but not yet read;
- a transactional slot runs transactions of one to four micro-operations (sends to random
  keys, polls), which commit the offsets they read (``send_offsets_to_transaction``); one in
  ten ends with an abort on purpose;
- a plain slot (idempotent producer) sends one value or polls, committing after each poll;
- with client crashes on, now and then a ``crash``: the worker process is killed (SIGKILL).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PARTITIONS", "Slot", "Workload", "key_of", "topic_partition"]

PARTITIONS = 4


def topic_partition(key: int) -> tuple[str, int]:
    return f"chaos-{key // PARTITIONS}", key % PARTITIONS


def key_of(topic: str, partition: int) -> int:
    return int(topic.rsplit("-", 1)[1]) * PARTITIONS + partition


def topics(keys: int) -> list[str]:
    return sorted({topic_partition(k)[0] for k in range(keys)})


@dataclass
class Slot:
    index: int
    client: str
    transactional: bool
    mode: str  # "assign" | "subscribe"
    ops: int = 0
    assigned: list[int] = field(default_factory=list)
    needs_binding: bool = True

    @property
    def group(self) -> str:
        return "chaos-subscribers" if self.mode == "subscribe" else f"chaos-assign-{self.index}"

    @property
    def transactional_id(self) -> str | None:
        return f"chaos-txn-{self.index}" if self.transactional else None


class Workload:
    def __init__(
        self,
        seed: int,
        keys: int,
        clients: list[str],
        slots: int,
        crash_rate: float = 0.0,
        abort_rate: float = 0.1,
    ) -> None:
        self.rng = random.Random(seed)
        self.keys = keys
        self.crash_rate = crash_rate
        self.abort_rate = abort_rate
        self._lock = threading.Lock()
        self._next_value = 0
        self.unread: dict[int, set[int]] = {k: set() for k in range(keys)}
        combos = [
            (c, t, m) for t in (True, False) for m in ("assign", "subscribe") for c in clients
        ]
        self.rng.shuffle(combos)
        # round-robin over the client libraries, so each appears before any repeats
        chosen: list[tuple[str, bool, str]] = []
        by_client = {c: [x for x in combos if x[0] == c] for c in clients}
        while len(chosen) < slots:
            for c in clients:
                if by_client[c] and len(chosen) < slots:
                    chosen.append(by_client[c].pop(0))
            if not any(by_client.values()):
                by_client = {c: [x for x in combos if x[0] == c] for c in clients}
        self.slots = [Slot(i, c, t, m) for i, (c, t, m) in enumerate(chosen)]

    def value(self) -> int:
        self._next_value += 1
        return self._next_value

    def next_op(self, slot: Slot) -> dict[str, Any]:
        with self._lock:
            return self._next(slot)

    def _next(self, slot: Slot) -> dict[str, Any]:
        rng = self.rng
        if slot.needs_binding or (slot.mode == "assign" and slot.ops % 8 == 7):
            slot.needs_binding = False
            slot.ops += 1
            if slot.mode == "subscribe":
                return {"f": "subscribe", "value": list(range(self.keys))}
            slot.assigned = self._steer(rng.randint(1, 3))
            return {"f": "assign", "value": slot.assigned}
        slot.ops += 1
        if self.crash_rate and rng.random() < self.crash_rate:
            return {"f": "crash", "value": None}
        if slot.transactional:
            mops: list[list[Any]] = []
            for _ in range(rng.randint(1, 4)):
                if rng.random() < 0.6:
                    mops.append(["send", rng.randrange(self.keys), self.value(), None])
                else:
                    mops.append(["poll", []])
            op: dict[str, Any] = {"f": "txn", "value": mops}
            if rng.random() < self.abort_rate:
                op["abort"] = True
            return op
        if rng.random() < 0.5:
            return {"f": "send", "value": [["send", rng.randrange(self.keys), self.value(), None]]}
        return {"f": "poll", "value": [["poll", []]]}

    def _steer(self, n: int) -> list[int]:
        """``n`` keys, drawn with weight 1 + the number of values sent there but not yet read."""
        keys = list(range(self.keys))
        weights = [1 + len(self.unread[k]) for k in keys]
        chosen: set[int] = set()
        while len(chosen) < min(n, self.keys):
            chosen.add(self.rng.choices(keys, weights)[0])
        return sorted(chosen)

    def completed(self, slot: Slot, op: dict[str, Any], done: dict[str, Any]) -> None:
        """Learn from a completion: acknowledged values become unread, read ones leave."""
        with self._lock:
            if done.get("type") == "info" and op["f"] in (
                "assign",
                "subscribe",
                "crash",
                "poll",
                "txn",
                "send",
            ):
                slot.needs_binding = True  # a new process: bind its consumer again
            if op["f"] == "crash":
                slot.needs_binding = True
            for mop in done.get("value") or []:
                if not isinstance(mop, list):
                    continue
                if mop[0] == "send" and mop[3] is not None and done["type"] == "ok":
                    self.unread[mop[1]].add(mop[2])
                elif mop[0] == "poll":
                    for k, _o, v in mop[1]:
                        self.unread.get(k, set()).discard(v)
