"""The controller's partition duties: leaders for partitions whose leader died, and ISRs
without dead brokers.

Theory of operation. Every broker runs a ``Controller``; it acts only while the image names
this broker as the controller (elected through the metadata store: etcd in a cluster, the
lowest live node in the local stores). It looks at each image that changes brokers, the
controller or partitions, and at a slow timer, and for every partition compares the image
with the live brokers (``decide``):

* leader alive, some ISR member dead: the ISR loses the dead members (same leader and epoch);
* leader dead (or none): the first replica, in replica order, that is alive and in the ISR
  becomes leader with the leader epoch bumped (a clean election); with none, and
  ``unclean.leader.election.enable`` on, the first live replica, alone in its ISR (data may
  be lost, as Kafka warns); otherwise the partition goes offline (leader -1, epoch bumped)
  and keeps its last ISR, so a member that comes back is elected.

With ``auto.leader.rebalance.enable`` (Kafka's default) the controller also checks, every
``leader.imbalance.check.interval.seconds``, how many of each live broker's preferred
partitions (it is their first replica) another broker leads; above
``leader.imbalance.per.broker.percentage`` it runs a preferred election for them, so
leadership spreads out again after a broker comes back.

Each decision is a compare-and-set on the partition epoch; one that loses a race is decided
again from the next image. Only one pass runs at a time; a change during a pass asks for
another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from gregor.broker.common.errors import code_of
from gregor.broker.common.events import log_event
from gregor.cluster.image import MetadataDelta, MetadataImage, PartitionImage
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("gregor.broker.controller")

#: A pass also runs this often, in case a refused change has nothing new to trigger it.
RECHECK_S = 1.0


@dataclass(frozen=True, slots=True)
class PartitionChange:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


def decide(p: PartitionImage, live: set[int], unclean: bool) -> PartitionChange | None:
    """What the controller changes in ``p`` given the live brokers, or None."""
    live_isr = tuple(r for r in p.isr if r in live)
    if p.leader in live:
        if len(live_isr) < len(p.isr):
            return PartitionChange(p.leader, p.leader_epoch, live_isr)
        return None
    candidates = [r for r in p.replicas if r in live_isr]
    if candidates:
        leader = candidates[0]
        return PartitionChange(leader, p.leader_epoch + 1, live_isr)
    live_replicas = [r for r in p.replicas if r in live]
    if unclean and live_replicas:
        return PartitionChange(live_replicas[0], p.leader_epoch + 1, (live_replicas[0],))
    if p.leader != -1:
        return PartitionChange(-1, p.leader_epoch + 1, p.isr)
    return None


PREFERRED = 0
UNCLEAN = 1


def elect(p: PartitionImage, live: set[int], election_type: int) -> PartitionChange | ErrorCode:
    """ElectLeaders for one partition: the change to make, or the error to answer (Kafka's
    ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE).

    PREFERRED (0) moves leadership to the first replica if it is alive and in the ISR;
    UNCLEAN (1) elects a leader for a partition without a live one: from the live ISR if it
    can, else the first live replica (which may lose data, as Kafka warns)."""
    if election_type == PREFERRED:
        preferred = p.replicas[0] if p.replicas else -1
        if p.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED
        if preferred not in live or preferred not in p.isr:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        return PartitionChange(preferred, p.leader_epoch + 1, p.isr)
    if p.leader in live:
        return ErrorCode.ELECTION_NOT_NEEDED
    change = decide(p, live, unclean=True)
    if change is None or change.leader < 0:
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    return change


async def elect_leaders(
    store: MetadataStore, election_type: int, partitions: list[tuple[str, int]] | None
) -> dict[tuple[str, int], ErrorCode]:
    """Run ``elect`` on each partition (None: every partition) and write the changes; the
    result of each (NONE when its leader moved)."""
    image = store.image
    live = set(image.live_broker_ids())
    if partitions is None:
        partitions = [(t.name, p.partition) for t in image.topics.values() for p in t.partitions]
    out: dict[tuple[str, int], ErrorCode] = {}
    for topic, index in partitions:
        p = store.image.partition(topic, index)
        if p is None:
            out[(topic, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        decided = elect(p, live, election_type)
        if isinstance(decided, ErrorCode):
            out[(topic, index)] = decided
            continue
        try:
            await store.alter_partition(
                topic,
                index,
                leader=decided.leader,
                leader_epoch=decided.leader_epoch,
                isr=decided.isr,
                expected_partition_epoch=p.partition_epoch,
            )
        except KafkaError as e:
            out[(topic, index)] = code_of(e)
            continue
        log_event(
            log,
            "partition.elected",
            topic=topic,
            partition=index,
            leader=decided.leader,
            leader_epoch=decided.leader_epoch,
            election_type=election_type,
        )
        out[(topic, index)] = ErrorCode.NONE
    return out


def imbalanced(image: MetadataImage, max_imbalance_percent: int) -> list[tuple[str, int]]:
    """Kafka's auto leader rebalance: for each live broker, the share of the partitions it is
    preferred leader of (first replica) that another broker leads; where that share is above
    ``max_imbalance_percent``, the partitions whose preferred leader is alive and in the ISR
    (so a preferred election can move them back)."""
    live = set(image.live_broker_ids())
    preferred_of: dict[int, list[tuple[str, int, bool, bool]]] = {}
    for t in image.topics.values():
        for p in t.partitions:
            if p.replicas:
                first = p.replicas[0]
                elsewhere = p.leader != first
                movable = elsewhere and first in p.isr
                preferred_of.setdefault(first, []).append((t.name, p.partition, elsewhere, movable))
    out: list[tuple[str, int]] = []
    for broker, parts in preferred_of.items():
        led_elsewhere = sum(1 for _, _, elsewhere, _ in parts if elsewhere)
        if broker in live and led_elsewhere * 100 > max_imbalance_percent * len(parts):
            out.extend((t, i) for t, i, _, movable in parts if movable)
    return out


@dataclass(frozen=True, slots=True)
class RebalanceConfig:
    """``auto.leader.rebalance.enable``, ``leader.imbalance.check.interval.seconds`` and
    ``leader.imbalance.per.broker.percentage``."""

    enabled: bool = True
    interval_s: float = 300.0
    max_imbalance_percent: int = 10


class Controller:
    def __init__(
        self,
        node_id: int,
        store: MetadataStore,
        unclean_leader_election: bool,
        rebalance: RebalanceConfig | None = None,
    ) -> None:
        self.node_id = node_id
        self.store = store
        self.unclean = unclean_leader_election
        self.rebalance = rebalance or RebalanceConfig(enabled=False)
        self._again = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._next_rebalance = 0.0
        self.elections = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="controller")
        self._again.set()

    def on_delta(self, delta: MetadataDelta) -> None:
        image = delta.image
        if image.controller_id != self.node_id:
            return
        if (
            image.brokers != delta.previous.brokers
            or image.controller_id != delta.previous.controller_id
            or delta.changed_partitions
        ):
            self._again.set()

    async def _run(self) -> None:
        while True:
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns a wait that
            # finished in the same turn as a cancellation and drops the cancellation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(RECHECK_S):
                    await self._again.wait()
            self._again.clear()
            image = self.store.image
            if image.controller_id != self.node_id:
                continue
            try:
                await self._pass(image)
                await self._maybe_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the controller must keep running
                log.exception("controller pass failed")

    async def _maybe_rebalance(self) -> None:
        now = asyncio.get_running_loop().time()
        if not self.rebalance.enabled or now < self._next_rebalance:
            return
        first = self._next_rebalance == 0.0
        self._next_rebalance = now + self.rebalance.interval_s
        if first:
            return  # the first check comes one interval after this broker became controller
        moved = imbalanced(self.store.image, self.rebalance.max_imbalance_percent)
        if moved:
            results = await elect_leaders(self.store, PREFERRED, moved)
            log_event(
                log,
                "controller.leader_rebalance",
                partitions=len(moved),
                moved=sum(1 for code in results.values() if not code),
            )

    async def _pass(self, image: MetadataImage) -> None:
        live = set(image.live_broker_ids())
        for topic in image.topics.values():
            for p in topic.partitions:
                change = decide(p, live, self.unclean)
                if change is None:
                    continue
                try:
                    await self.store.alter_partition(
                        topic.name,
                        p.partition,
                        leader=change.leader,
                        leader_epoch=change.leader_epoch,
                        isr=change.isr,
                        expected_partition_epoch=p.partition_epoch,
                    )
                except KafkaError as e:  # lost a race: the next image decides again
                    log.info("controller: %s-%d not changed: %s", topic.name, p.partition, e)
                    self._again.set()
                    continue
                if change.leader != p.leader:
                    self.elections += 1
                log_event(
                    log,
                    "partition.elected" if change.leader != p.leader else "partition.isr_shrunk",
                    topic=topic.name,
                    partition=p.partition,
                    leader=change.leader,
                    leader_epoch=change.leader_epoch,
                    isr=",".join(map(str, change.isr)),
                )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
