"""Gregor's producer speaks transaction version 2 (KIP-890 part 2) when the cluster finalized
``transaction.version`` 2, and version 1 below: on a real in-process broker at each level, the
same transactions (commit, abort, offsets) read back the same; what differs is on the wire
(AddPartitionsToTxn and AddOffsetsToTxn only at version 1) and in the epochs (bumped by every
end at version 2, and with them the markers)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from gregor.client import AIOProducer, Consumer, TopicPartition
from gregor.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
)
from gregor.testing import InProcessBroker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=[2, 0], ids=["tv2", "tv0"])
def broker(request: pytest.FixtureRequest) -> Iterator[tuple[InProcessBroker, int]]:
    level = int(request.param)
    with InProcessBroker(
        config={
            "num.partitions": 2,
            "transaction.state.log.num.partitions": 3,
            "offsets.topic.num.partitions": 3,
        }
    ) as b:
        server = b.broker
        assert server is not None
        if level != 2:
            b.call(
                lambda: server.cluster_admin.update_features(
                    lambda _levels: {"transaction.version": level}
                )
            )
        yield b, level


def _requests(b: InProcessBroker, api_key: int) -> int:
    assert b.broker is not None
    return b.broker.metrics.requests.get(api_key, 0)


def test_transactions_at_the_clusters_version(broker: tuple[InProcessBroker, int]) -> None:
    b, level = broker
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    adds = (
        _requests(b, AddPartitionsToTxnRequest.API_KEY),
        _requests(b, AddOffsetsToTxnRequest.API_KEY),
    )
    ends = _requests(b, EndTxnRequest.API_KEY)

    async def run() -> list[tuple[int, int]]:
        ids = []
        conf = {"bootstrap.servers": b.bootstrap_servers, "transactional.id": f"tx-{topic}"}
        async with AIOProducer(conf) as p:
            await p.init_transactions()
            ids.append((p.producer_id, p.producer_epoch))
            for n, commit in enumerate((True, False, True)):
                p.begin_transaction()
                await p.send(topic, b"v%d-0" % n, partition=0)
                await p.send(topic, b"v%d-1" % n, partition=1)
                await p.send_offsets_to_transaction({tp0: 10 * (n + 1)}, group)
                if commit:
                    await p.commit_transaction()
                else:
                    await p.flush()
                    await p.abort_transaction()
                ids.append((p.producer_id, p.producer_epoch))
        return ids

    ids = asyncio.run(run())
    pid, epoch = ids[0]
    if level >= 2:
        assert ids == [(pid, epoch + n) for n in range(4)]  # each end bumped the epoch
        # No AddPartitionsToTxn or AddOffsetsToTxn: the (single) broker adds in process.
        assert (
            _requests(b, AddPartitionsToTxnRequest.API_KEY),
            _requests(b, AddOffsetsToTxnRequest.API_KEY),
        ) == adds
    else:
        assert ids == [(pid, epoch)] * 4
        assert _requests(b, AddPartitionsToTxnRequest.API_KEY) > adds[0]
        assert _requests(b, AddOffsetsToTxnRequest.API_KEY) == adds[1] + 3
    assert _requests(b, EndTxnRequest.API_KEY) == ends + 3
    with Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "group.id": group,
        }
    ) as c:
        got = c.committed([tp0])
        assert got[tp0] is not None and got[tp0].offset == 30
        c.assign([tp0, tp1])
        values: list[bytes] = []
        while len(values) < 4:
            values += [r.value for r in c.poll(300)]
        values += [r.value for r in c.poll(300)]
    assert sorted(values) == [b"v0-0", b"v0-1", b"v2-0", b"v2-1"]
