"""The main job's Avro page views (``gregor.pipelines.pageview_avro``): the bulk encoder writes
exactly the bytes fastavro writes for the registered schema, framed as confluent-kafka frames
them; and which value formats the job accepts. No broker, no process."""

from __future__ import annotations

import io
import struct

import fastavro
import pytest

from gregor.pipelines import clickstream as cs
from gregor.pipelines import pageview_avro

PARSED = fastavro.parse_schema(pageview_avro.SCHEMA)


def framed(event: dict, schema_id: int) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(out, PARSED, event)
    return out.getvalue()


def test_a_generated_chunk_is_fastavros_bytes_with_confluents_frame() -> None:
    table = cs.generate_columns(5000, users=40, minutes=3, seed=11)
    values = pageview_avro.avro_values(table, 513).to_pylist()
    rows = table.to_pylist()
    assert len(values) == len(rows) == 5000
    assert values == [framed(r, 513) for r in rows]
    # and they read back as the rows: magic byte 0, id 513, then the datum
    for v, r in zip(values[:50], rows[:50], strict=True):
        assert v[:5] == b"\x00\x00\x00\x02\x01"
        assert fastavro.schemaless_reader(io.BytesIO(v[5:]), PARSED, PARSED) == r


@pytest.mark.parametrize(
    "n",
    [0, -1, 1, 63, -64, 64, -65, 8191, 8192, 2**31 - 1, -(2**31), 2**62, 2**63 - 1, -(2**63)],
)
def test_varints_at_every_width(n: int) -> None:
    # longs of every varint width (1 to 10 bytes), the int field at its extremes, strings of a
    # multi-byte length and non-ASCII text
    duration = max(min(n, 2**31 - 1), -(2**31))
    event = {
        "event_id": n,
        "user_id": "ü" * 100,
        "page": "",
        "ts": -n if n != -(2**63) else n,
        "referrer": "x" * 200,
        "duration_ms": duration,
    }
    assert pageview_avro.avro_record(event, 2**32 - 1) == framed(event, 2**32 - 1)


def test_the_end_marker_encodes_as_a_page_view() -> None:
    marker = cs.end_marker(cs.START_MS)
    assert pageview_avro.avro_record(marker, 1) == framed(marker, 1)


def test_an_empty_chunk_encodes_to_no_values() -> None:
    assert pageview_avro.avro_values(cs.generate_columns(0), 1).to_pylist() == []


def test_value_formats_the_job_accepts() -> None:
    base = cs.PipelineConfig("127.0.0.1:9092")
    assert cs.format_error(base) == (
        "Avro page views need the cluster's schema registry: give its URL "
        "(--schema-registry URL), or --value-format json"
    )
    assert cs.format_error(cs.PipelineConfig("b:1", schema_registry="http://r:8081")) is None
    assert cs.format_error(cs.PipelineConfig("b:1", value_format="json")) is None
    assert cs.format_error(cs.PipelineConfig("b:1", value_format="xml")) == (
        "value format must be one of avro, json, not 'xml'"
    )
    assert cs.format_error(
        cs.PipelineConfig("b:1", schema_registry="http://r:8081", source_format="kafka")
    ) == ("Spark's own Kafka connector reads Avro only with spark-avro: use the json format")
    # JSON needs no registry: the encoder writes the module docstring's JSON
    encode = cs.event_encoder(cs.PipelineConfig("b:1", value_format="json"))
    assert encode(cs.end_marker(cs.START_MS)) == (
        b'{"event_id":-1,"user_id":"","page":"__end__","ts":1767225780000,"referrer":"",'
        b'"duration_ms":0}'
    )
    with pytest.raises(ValueError, match="need the cluster's schema registry"):
        cs.register_schema(base)
