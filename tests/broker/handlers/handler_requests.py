"""Request builders shared by the handler tests: create a topic, produce a batch, fetch."""

from __future__ import annotations

import uuid
from typing import Any

from handler_wire import Wire

from gregor.protocol.messages.create_topics import CreateTopicsRequest
from gregor.protocol.messages.fetch import FetchRequest, FetchResponse
from gregor.protocol.messages.produce import ProduceRequest
from gregor.protocol.records.batch import build_batch, decode_batches

CT = CreateTopicsRequest.Topics
FT = FetchRequest.Topics
FP = FetchRequest.Topics.Partitions
Forget = FetchRequest.ForgottenTopicsData
PT = ProduceRequest.TopicData
PP = ProduceRequest.TopicData.PartitionData

BASE_TS = 1_700_000_000_000
PRODUCE_VERSION = 9


def create_topic(wire: Wire, name: str, partitions: int = 1, **configs: str) -> uuid.UUID:
    resp = wire.request(
        CreateTopicsRequest(
            topics=[
                CT(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    configs=[
                        CT.Configs(name=k.replace("_", "."), value=v) for k, v in configs.items()
                    ],
                )
            ],
            timeout_ms=5000,
        ),
        7,
    )
    (t,) = resp.topics
    assert t.error_code == 0, t.error_message
    return t.topic_id


def batch(*values: bytes, ts: int = BASE_TS, **builder_args: Any) -> bytes:
    return build_batch([(ts + i, None, v) for i, v in enumerate(values)], **builder_args)


def produce(
    wire: Wire,
    topic: str,
    partition: int,
    records: bytes | None,
    acks: int = -1,
    version: int = PRODUCE_VERSION,
    transactional_id: str | None = None,
) -> Any:
    """One partition's produce; returns that partition's response (None for acks=0)."""
    req = ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        transactional_id=transactional_id,
        topic_data=[PT(name=topic, partition_data=[PP(index=partition, records=records)])],
    )
    if acks == 0:
        wire.run(wire.send(req, version))
        return None
    resp = wire.request(req, version)
    (t,) = resp.responses
    assert t.name == topic
    (p,) = t.partition_responses
    return p


def fetch_request(
    topics: dict[Any, dict[int, int]],
    *,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: dict[Any, list[int]] | None = None,
    version: int = 12,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    leader_epoch: int = -1,
) -> FetchRequest:
    """``topics`` maps a topic (its name before v13, its id from v13) to {partition: offset}."""

    def key(t: Any) -> dict[str, Any]:
        return {"topic_id": t} if version >= 13 else {"topic": t}

    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[
            FT(
                **key(t),
                partitions=[
                    FP(
                        partition=p,
                        fetch_offset=o,
                        partition_max_bytes=1 << 20,
                        current_leader_epoch=leader_epoch,
                    )
                    for p, o in parts.items()
                ],
            )
            for t, parts in topics.items()
        ],
        forgotten_topics_data=[
            Forget(**key(t), partitions=ps) for t, ps in (forgotten or {}).items()
        ],
    )


def fetch(wire: Wire, topics: dict[Any, dict[int, int]], **kw: Any) -> FetchResponse:
    version = kw.get("version", 12)
    return wire.request(fetch_request(topics, **kw), version)


def values_of(records: Any) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a fetched record set."""
    out = []
    for b in decode_batches(bytes(records or b"")):
        out.extend((r.offset, r.value) for r in b.records)
    return out


def partitions_of(resp: FetchResponse) -> dict[tuple[Any, int], Any]:
    """The response's partitions by (topic name or id, partition)."""
    return {
        (t.topic or t.topic_id, p.partition_index): p for t in resp.responses for p in t.partitions
    }
