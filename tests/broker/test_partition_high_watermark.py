"""A leader's high watermark counts every replica the controller could elect: the ISR and a
follower asked into it but not yet confirmed (Kafka's maximal ISR). Without that, records
acknowledged while the follower's joining was in flight could be missing from it when the
controller, having committed the new ISR, elects it leader: acknowledged data lost (the
likely cause of 50 records the append checker once lost, its faults coming right after an ISR
expansion; not reproduced)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from gregor.broker.replication.partition import Partition
from gregor.protocol.errors import NotEnoughReplicasAfterAppendError
from gregor.protocol.records import build_batch
from gregor.storage import Log, LogConfig

NOW = 1_700_000_000_000


def records(n: int) -> bytes:
    return build_batch([(NOW, None, b"v%d" % i) for i in range(n)])


def leader(tmp_path: Path) -> tuple[Partition, list[tuple[int, ...]]]:
    log = Log(str(tmp_path / "t-0"), LogConfig.from_props({}), clock=lambda: NOW)
    p = Partition("t", 0, uuid.uuid4(), log, local_id=1)
    asked: list[tuple[int, ...]] = []
    p.alter_isr = lambda _p, isr: asked.append(isr)
    p.make_leader(leader_epoch=1, partition_epoch=1, replicas=(1, 2, 3), isr=(1, 2))
    return p, asked


def test_a_follower_asked_into_the_isr_holds_the_high_watermark_back(tmp_path: Path) -> None:
    p, asked = leader(tmp_path)
    p.append_as_leader(records(5), required_acks=-1)
    p.update_follower(2, 5, NOW)
    assert p.log.high_watermark == 5  # ISR {1, 2}: both hold 5 records
    p.update_follower(3, 5, NOW)  # 3 has caught up: asked in
    assert asked == [(1, 2, 3)] and p.pending_isr == (1, 2, 3) and p.isr == (1, 2)

    # The same partition state applied again (a metadata reload) does not settle the change.
    p.make_leader(leader_epoch=1, partition_epoch=1, replicas=(1, 2, 3), isr=(1, 2))
    assert p.pending_isr == (1, 2, 3)

    p.append_as_leader(records(4), required_acks=-1)
    p.update_follower(2, 9, NOW)
    # 2 holds all 9, but 3 (which the controller may already have made a member, and may
    # elect) holds 5: nothing past 5 may be acknowledged yet.
    assert p.log.high_watermark == 5
    p.update_follower(3, 9, NOW)
    assert p.log.high_watermark == 9

    # The change confirmed: 3 is a member like any other.
    p.make_leader(leader_epoch=1, partition_epoch=2, replicas=(1, 2, 3), isr=(1, 2, 3))
    p.append_as_leader(records(1), required_acks=-1)
    p.update_follower(2, 10, NOW)
    assert p.log.high_watermark == 9
    p.update_follower(3, 10, NOW)
    assert p.log.high_watermark == 10


def test_a_refused_join_stops_holding_the_high_watermark_back(tmp_path: Path) -> None:
    p, asked = leader(tmp_path)
    p.append_as_leader(records(3), required_acks=-1)
    p.update_follower(2, 3, NOW)
    p.update_follower(3, 3, NOW)
    assert p.pending_isr == (1, 2, 3)
    p.append_as_leader(records(2), required_acks=-1)
    p.update_follower(2, 5, NOW)
    assert p.log.high_watermark == 3
    p.pending_isr = None  # the controller refused it (what AlterPartitionManager does)
    assert p.maybe_advance_high_watermark() and p.log.high_watermark == 5


def test_a_follower_asked_out_counts_until_the_image_drops_it(tmp_path: Path) -> None:
    p, asked = leader(tmp_path)
    p.append_as_leader(records(3), required_acks=-1)
    p.update_follower(2, 1, NOW)
    # 2 has not caught up for longer than the lag allowed: asked out, but still a member.
    p.shrink_isr(time.time_ns() // 1_000_000 + 60_000, 10_000)
    assert asked == [(1,)] and p.isr == (1, 2)
    assert p.log.high_watermark == 1
    p.make_leader(leader_epoch=1, partition_epoch=2, replicas=(1, 2, 3), isr=(1,))
    assert p.log.high_watermark == 3


def test_acks_all_released_by_a_shrunken_isr_is_not_enough_replicas_after_append(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        p, asked = leader(tmp_path)
        p.min_insync_replicas = 2
        p.append_as_leader(records(2), required_acks=-1)
        client = p.wait_for_high_watermark(2, min_isr=True)
        coordinator = p.wait_for_high_watermark(2)  # a coordinator's write: no such check
        assert not client.done()
        # 2 never fetches; the image drops it from the ISR: the high watermark is the leader's
        # alone, so the records are committed, on one replica where two were asked for.
        p.make_leader(leader_epoch=1, partition_epoch=2, replicas=(1, 2, 3), isr=(1,))
        assert p.log.high_watermark == 2
        assert isinstance(client.exception(), NotEnoughReplicasAfterAppendError)
        assert coordinator.done() and coordinator.exception() is None
        # With the ISR whole again, the same wait succeeds (a producer's retry of the batch).
        p.make_leader(leader_epoch=1, partition_epoch=3, replicas=(1, 2, 3), isr=(1, 2))
        again = p.wait_for_high_watermark(2, min_isr=True)
        assert again.done() and again.exception() is None

    asyncio.run(run())
