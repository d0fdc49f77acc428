"""The producer's per-record path, compiled (``producer._send``) and pure Python
(``producer._send_py``), must agree: the same partition, index, timestamp and sizes for every
record, the same errors, the same batch bytes and byte accounting.

``AIOProducer`` and ``RecordAccumulator`` take their base class at import, so the test builds
twins of both on each implementation's base (same methods) and sends one script of records
through each, without a broker: the producer is never started, its topic cache is filled by
hand as metadata would fill it."""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any

import pytest

from gregor.client.core.metadata import TopicPartition
from gregor.client.producer import _send_py
from gregor.client.producer.accumulator import RecordAccumulator
from gregor.client.producer.producer import AIOProducer
from gregor.client.producer.sender import Sender

try:
    from gregor.client.producer import _send as _compiled
except ImportError:  # pragma: no cover - the build failed
    _compiled = None

pytestmark = pytest.mark.skipif(_compiled is None, reason="the compiled send path is not built")

TS = 1_700_000_000_000


def twin(cls: type, *bases: type) -> type:
    ns = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    return type(cls.__name__, bases, ns)


def producer_on(mod: ModuleType, **config: Any) -> Any:
    producer_cls = twin(AIOProducer, Sender, mod.ProducerCore)
    acc_cls = twin(RecordAccumulator, mod.AccumulatorCore)
    import gregor.client.producer.producer as producer_module

    saved = producer_module.RecordAccumulator
    producer_module.RecordAccumulator = acc_cls  # type: ignore[misc]
    try:
        p = producer_cls(
            {"bootstrap.servers": "127.0.0.1:1", "enable.idempotence": False, **config}
        )
    finally:
        producer_module.RecordAccumulator = saved  # type: ignore[misc]
    assert type(p.accumulator).__mro__[1] is mod.AccumulatorCore
    p._tps = {"t": [TopicPartition("t", i) for i in range(3)]}
    p._tps_version = p._client.cluster.version
    return p


SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("explicit partition", {"value": b"v0", "partition": 1, "timestamp_ms": TS}),
    ("bytes key", {"value": b"v1", "key": b"k1", "timestamp_ms": TS + 1}),
    ("str key and value", {"value": "v2", "key": "k1", "timestamp_ms": TS + 2}),
    ("null value", {"value": None, "key": b"k2", "timestamp_ms": TS + 3}),
    ("bytearray value", {"value": bytearray(b"v4"), "partition": 2, "timestamp_ms": TS + 4}),
    ("memoryview key", {"value": b"v5", "key": memoryview(b"k5"), "timestamp_ms": TS + 5}),
    (
        "headers",
        {
            "value": b"v6",
            "partition": 0,
            "timestamp_ms": TS + 6,
            "headers": [("h", b"x"), (b"h2", None)],
        },
    ),
    ("sticky", {"value": b"v7" * 50, "timestamp_ms": TS + 7}),
    ("sticky again", {"value": b"v8", "timestamp_ms": TS + 8}),
    ("older timestamp", {"value": b"v9", "partition": 1, "timestamp_ms": TS - 100}),
    ("partition out of range", {"value": b"x", "partition": 3, "timestamp_ms": TS}),
    ("negative partition", {"value": b"x", "partition": -1, "timestamp_ms": TS}),
    ("unknown topic", {"topic": "nope", "value": b"x", "timestamp_ms": TS}),
    ("bad value type", {"value": 12, "partition": 0, "timestamp_ms": TS}),
    (
        "big values fill batches",
        {"value": b"B" * 700, "partition": 0, "timestamp_ms": TS + 9, "repeat": 6},
    ),
    (
        "buffer full, no blocking",
        {
            "value": b"F" * 3000,
            "partition": 2,
            "timestamp_ms": TS + 10,
            "block": False,
            "repeat": 3,
        },
    ),
]


def run(mod: ModuleType) -> list[Any]:
    random.seed(5)  # the sticky partitioner's choice
    p = producer_on(mod, **{"batch.size": 2048, "buffer.memory": 7000})
    out: list[Any] = []
    for label, kw in SCRIPT:
        kw = dict(kw)
        topic = kw.pop("topic", "t")
        repeat = kw.pop("repeat", 1)
        for _ in range(repeat):
            try:
                f = p.send_nowait(topic, **kw)
                out.append(
                    (label, f._batch.partition, f._index, f._timestamp, f._key_size, f._value_size)
                )
            except Exception as e:
                out.append((label, type(e).__name__, str(e)))
    acc = p.accumulator
    out.append(("bytes used", acc.bytes_used))
    for tp, q in sorted(acc.queues.items()):
        out.append((tp.partition, [(b.size, b.builder.build()) for b in q.batches]))
    f = p.send_nowait("t", b"now", partition=0)
    out.append(("clock", abs(f._timestamp - __import__("time").time() * 1000) < 60_000))
    p._closed = True
    try:
        p.send_nowait("t", b"late", partition=0)
    except Exception as e:
        out.append(("closed", type(e).__name__, str(e)))
    return out


def test_compiled_and_reference_send_paths_agree() -> None:
    compiled = run(_compiled)
    reference = run(_send_py)
    assert compiled == reference
    results = {r[0]: r[1:] for r in reference}
    assert results["explicit partition"] == (1, 0, TS, -1, 2)
    assert results["str key and value"][1:] == (1, TS + 2, 2, 2)  # after "bytes key" in its batch
    assert results["partition out of range"][0] == "KafkaError"
    assert results["unknown topic"][0] == "NoTopicMetadataError"
    assert results["bad value type"][0] == "TypeError"
    assert results["buffer full, no blocking"][0] == "BufferFullError"
    assert results["clock"] == (True,)
    assert results["closed"][0] == "IllegalStateError"
