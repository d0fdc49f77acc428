"""A follower's Fetch (with a replica id: it reads past the high watermark) from a broker
that holds no replica of the partition here is refused, as Kafka refuses it."""

from __future__ import annotations

import pytest
from handler_wire import Wire
from test_elect_leaders import create

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.fetch import FetchRequest

pytestmark = pytest.mark.timeout(60)


def test_a_replica_fetch_from_a_broker_that_is_not_a_follower_is_refused(wire: Wire) -> None:
    """Fetch with a replica id (a follower's fetch, which reads past the high watermark) from
    a broker that holds no replica here: NOT_LEADER_OR_FOLLOWER, as Kafka answers."""
    create(wire, "t", 1)
    resp = wire.request(
        FetchRequest(
            replica_id=7,
            max_wait_ms=0,
            min_bytes=0,
            max_bytes=1 << 20,
            topics=[
                FetchRequest.Topics(
                    topic="t",
                    partitions=[
                        FetchRequest.Topics.Partitions(
                            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
        ),
        12,
    )
    p = resp.responses[0].partitions[0]
    assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and not p.records
