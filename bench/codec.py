"""Message codec speed: Gregor vs kafka-python (kafka.protocol) vs kio, in the same run.

Rows (each encode and decode of a whole body, no header):
  * MetadataResponse v12, 100 topics x 10 partitions (3 replicas, 3 ISR each);
  * FetchRequest v15, 100 partitions (10 topics by id x 10 partitions);
  * ProduceRequest v11, 10 partitions with one 1 KiB record batch each (opaque bytes);
  * FetchResponse v16, 100 partitions (10 topics x 10) with 1 KiB of records each (extra row:
    the broker's encode and the consumer's decode hot path).

Every library encodes the same content: kafka-python's and kio's objects are made by decoding
our bytes, and their encodings are checked to be byte-identical to ours before timing.

Each row is (name, ours_us, kafka_python_us, kio_us_or_None): the best of several rounds, in
microseconds per operation. If ``bench/codec_records.py`` exists and defines ``rows()`` with
the same shape, its rows (record batches) are appended.

Run: .venv/bin/python bench/codec.py
"""

from __future__ import annotations

import importlib.util
import io
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from gregor.protocol.messages import FetchRequest, FetchResponse, MetadataResponse, ProduceRequest

Row = tuple[str, float, float, "float | None"]


def _best_us(fn: Callable[[], object], rounds: int = 7, min_time: float = 0.05) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        n = 0
        start = time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / n)
    return best * 1e6


def metadata_response() -> MetadataResponse:
    T, P, B = MetadataResponse.Topics, MetadataResponse.Topics.Partitions, MetadataResponse.Brokers
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            B(node_id=i, host=f"broker-{i}.example.com", port=9092, rack=f"rack-{i}")
            for i in range(3)
        ],
        cluster_id="gregor-cluster-0001",
        controller_id=0,
        topics=[
            T(
                error_code=0,
                name=f"topic-{t:03d}",
                topic_id=uuid.UUID(int=(t + 1) * 0x1000100010001),
                is_internal=False,
                partitions=[
                    P(
                        error_code=0,
                        partition_index=p,
                        leader_id=p % 3,
                        leader_epoch=7,
                        replica_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
                        isr_nodes=[p % 3, (p + 1) % 3, (p + 2) % 3],
                        offline_replicas=[],
                    )
                    for p in range(10)
                ],
                topic_authorized_operations=-2147483648,
            )
            for t in range(100)
        ],
    )


def fetch_request() -> FetchRequest:
    T, P = FetchRequest.Topics, FetchRequest.Topics.Partitions
    return FetchRequest(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=52428800,
        isolation_level=1,
        session_id=0,
        session_epoch=-1,
        topics=[
            T(
                topic_id=uuid.UUID(int=(t + 1) * 0x1000100010001),
                partitions=[
                    P(
                        partition=p,
                        current_leader_epoch=7,
                        fetch_offset=1_000_000 + p,
                        last_fetched_epoch=7,
                        log_start_offset=-1,
                        partition_max_bytes=1048576,
                    )
                    for p in range(10)
                ],
            )
            for t in range(10)
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def produce_request() -> ProduceRequest:
    batch = os.urandom(1024)
    return ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[
            ProduceRequest.TopicData(
                name="events",
                partition_data=[
                    ProduceRequest.TopicData.PartitionData(index=p, records=batch)
                    for p in range(10)
                ],
            )
        ],
    )


def fetch_response() -> FetchResponse:
    T, P = FetchResponse.Responses, FetchResponse.Responses.Partitions
    batch = os.urandom(1024)
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=123,
        responses=[
            T(
                topic_id=uuid.UUID(int=(t + 1) * 0x1000100010001),
                partitions=[
                    P(
                        partition_index=p,
                        error_code=0,
                        high_watermark=2_000_000,
                        last_stable_offset=2_000_000,
                        log_start_offset=0,
                        aborted_transactions=[],
                        preferred_read_replica=-1,
                        records=batch,
                    )
                    for p in range(10)
                ],
            )
            for t in range(10)
        ],
    )


CASES = [
    ("MetadataResponse v12 100x10", metadata_response, 12),
    ("FetchRequest v15 100 partitions", fetch_request, 15),
    ("ProduceRequest v11 10x1KiB", produce_request, 11),
    ("FetchResponse v16 100x1KiB", fetch_response, 16),
]


def _kafka_python(name: str):
    from kafka.protocol.consumer import FetchRequest as KF
    from kafka.protocol.consumer import FetchResponse as KFR
    from kafka.protocol.metadata import MetadataResponse as KM
    from kafka.protocol.producer import ProduceRequest as KP

    return {"MetadataResponse": KM, "FetchRequest": KF, "ProduceRequest": KP, "FetchResponse": KFR}[
        name
    ]


def _kio(name: str, version: int):
    from pkgutil import resolve_name

    from kio.schema.index import schema_name_map
    from kio.static.constants import EntityType

    api = {
        "MetadataResponse": "metadata",
        "FetchRequest": "fetch",
        "FetchResponse": "fetch",
        "ProduceRequest": "produce",
    }[name]
    kind = EntityType.response if name.endswith("Response") else EntityType.request
    return resolve_name(schema_name_map[api][version][kind])


def rows() -> list[Row]:
    from kio.serial import entity_reader, entity_writer

    out: list[Row] = []
    for label, build, v in CASES:
        msg = build()
        cls = type(msg)
        data = msg.encode(v)
        assert cls.decode(data, v) == msg

        kp_cls = _kafka_python(cls.__name__)
        kp_obj = kp_cls.decode(data, version=v)
        kp_obj._header = None  # decode() leaves it unset; encode() reads it
        assert bytes(kp_obj.encode(version=v)) == data

        kio_cls = _kio(cls.__name__, v)
        kio_read = entity_reader(kio_cls)
        kio_write = entity_writer(kio_cls)
        kio_obj, _ = kio_read(data, 0)

        def kio_encode(o=kio_obj, w=kio_write) -> bytes:
            buf = io.BytesIO()
            w(buf, o)
            return buf.getvalue()

        assert kio_encode() == data

        out.append(
            (
                f"{label} encode",
                _best_us(lambda m=msg, v=v: m.encode(v)),
                _best_us(lambda o=kp_obj, v=v: o.encode(version=v)),
                _best_us(kio_encode),
            )
        )
        out.append(
            (
                f"{label} decode",
                _best_us(lambda c=cls, d=data, v=v: c.decode(d, v)),
                _best_us(lambda c=kp_cls, d=data, v=v: c.decode(d, version=v)),
                _best_us(lambda r=kio_read, d=data: r(d, 0)),
            )
        )
    return out


def _record_rows() -> list[Row]:
    path = Path(__file__).with_name("codec_records.py")
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location("codec_records", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.rows()) if hasattr(mod, "rows") else []


def _ratio(theirs: float | None, ours: float) -> str:
    return "-" if theirs is None else f"{theirs / ours:.2f}x"


def main() -> int:
    all_rows = rows() + _record_rows()
    w = max(len(r[0]) for r in all_rows)
    head = f"{'row':<{w}}  {'ours µs':>10}  {'kafka-py µs':>11}  {'kio µs':>10}  {'kp/ours':>8}  {'kio/ours':>8}"
    print(head)
    print("-" * len(head))
    for name, ours, kp, kio in all_rows:
        kio_s = "-" if kio is None else f"{kio:.1f}"
        print(
            f"{name:<{w}}  {ours:>10.1f}  {kp:>11.1f}  {kio_s:>10}  {_ratio(kp, ours):>8}  {_ratio(kio, ours):>8}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
