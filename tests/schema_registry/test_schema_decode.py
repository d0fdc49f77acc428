"""Gregor's deeper schema validation level (``gregor.value.schema.validation.level=decode``): a
real in-process broker asks a real registry for each record's schema and decodes the payload
against it. confluent-kafka's SchemaRegistryClient and its Avro, JSON Schema and Protobuf
serializers register and frame the records; refusals are read from raw Produce frames
(``record_errors``) and the accepted records are read back with confluent-kafka's consumer."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from gregor.protocol.errors import ErrorCode
from gregor.schema_registry.formats.base import Dependency
from gregor.schema_registry.formats.protobuf import ProtobufSchema

from .conftest import avro_record
from .test_schema_validation import (
    SET,
    VALIDATE,
    Served,
    batch,
    consume,
    create,
    create_error,
    end_offset,
    raw_produce,
    topic_name,
)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

DECODE = {**VALIDATE, "gregor.value.schema.validation.level": "decode"}


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    s = Served()
    try:
        yield s
    finally:
        s.close()


def space_of(topic: str) -> str:
    return topic.replace("-", "_")


def order(space: str) -> str:
    return avro_record(f"{space}.Order", ("id", "string"), ("qty", "int"))


def avro(served: Served, topic: str, schema: str, side: str = MessageField.VALUE) -> Any:
    ser = AvroSerializer(SchemaRegistryClient({"url": served.url}), schema)
    ctx = SerializationContext(topic, side)
    return lambda obj: ser(obj, ctx)


def refusals(p: Any) -> list[tuple[int, str]]:
    return [(e.batch_index, e.batch_index_error_message) for e in p.record_errors]


def test_good_records_of_each_format_are_accepted_and_read_back(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("decoded")
    space = space_of(topic)
    create(bs, topic, DECODE)
    ctx = SerializationContext(topic, MessageField.VALUE)
    client = SchemaRegistryClient({"url": served.url})
    client.set_compatibility(subject_name=f"{topic}-value", level="NONE")  # three formats
    orders = [{"id": f"o{i}", "qty": i} for i in range(4)]
    to_avro = avro(served, topic, order(space))
    json_schema = json.dumps(
        {
            "title": f"Reading_{space}",
            "type": "object",
            "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
            "required": ["sensor", "value"],
        }
    )
    to_json = JSONSerializer(json_schema, client, conf={"auto.register.schemas": True})
    readings = [{"sensor": f"s{i}", "value": i / 2} for i in range(3)]
    order_cls = message_class(space)
    to_proto = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})
    messages = []
    for i in range(3):
        m = order_cls(id=f"p{i}", tags=["a", str(i)])
        m.price.currency = "EUR"
        m.price.units = 100 * i
        messages.append(m)
    values = (
        [to_avro(o) for o in orders]
        + [to_json(r, ctx) for r in readings]
        + [to_proto(m, ctx) for m in messages]
    )
    producer = Producer({"bootstrap.servers": bs, "acks": "all", "retries": 0})
    errors: list[Any] = []
    for v in [*values, None]:
        producer.produce(topic, value=v, on_delivery=lambda err, _m: errors.append(err))
    assert producer.flush(60) == 0
    assert errors == [None] * 11
    got = [v for _, v in consume(bs, topic, 11)]
    assert got == [*values, None]
    avro_reader = AvroDeserializer(SchemaRegistryClient({"url": served.url}))
    json_reader = JSONDeserializer(None, schema_registry_client=client)
    proto_reader = ProtobufDeserializer(order_cls, {"use.deprecated.format": False}, client)
    assert [avro_reader(v, ctx) for v in got[:4]] == orders
    assert [json_reader(v, ctx) for v in got[4:7]] == readings
    assert [proto_reader(v, ctx) for v in got[7:10]] == messages


def test_avro_payloads_that_do_not_decode_are_refused_with_their_index(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("avro-bad")
    create(bs, topic, DECODE)
    good = avro(served, topic, order(space_of(topic)))({"id": "abc", "qty": 7})
    schema_id = int.from_bytes(good[1:5], "big")
    truncated = good[:-1]
    extra = good + b"\x00\x00"
    # the id is right, the body another schema's: a long where the string's length should be
    # is read as a length past the end
    wrong_type = good[:5] + b"\x80\x80\x80\x80\x08" + b"x"
    bad_utf8 = good[:5] + b"\x04\xff\xfe\x02"
    prefix = f"The value does not decode with schema id {schema_id} (AVRO)"
    for codec in (0, 1, 4):  # none, gzip, zstd
        p = raw_produce(
            bs,
            topic,
            batch([good, truncated, None, extra, wrong_type, bad_utf8], compression=codec),
        )
        assert (p.error_code, p.base_offset) == (ErrorCode.INVALID_RECORD, -1)
        got = refusals(p)
        assert [i for i, _ in got] == [1, 3, 4, 5]
        assert got[0] == (1, f"{prefix}: the payload ends too early")
        assert got[1] == (3, f"{prefix}: 2 bytes left over after the datum")
        assert got[2] == (4, f"{prefix}: the payload ends too early")
        assert got[3] == (5, f"{prefix}: a string is not UTF-8")
        assert p.error_message.startswith(
            "One or more records have been rejected due to 4 record errors in total"
        )
    assert end_offset(bs, topic) == 0  # nothing of any refused batch was stored
    assert raw_produce(bs, topic, batch([good, None, good], compression=1)).error_code == 0
    assert consume(bs, topic, 3) == [(None, good), (None, None), (None, good)]


def test_corrupt_batches_are_not_decoded_and_large_ones_are(served: Served) -> None:
    """A batch whose CRC does not match is left to the log (CORRUPT_MESSAGE), not decoded; a
    request of more than a MiB of records is decoded in a worker thread, with the same
    verdicts."""
    bs = served.broker.bootstrap_servers
    topic = topic_name("avro-large")
    create(bs, topic, DECODE)
    schema = avro_record(f"{space_of(topic)}.Blob", ("id", "long"), ("text", "string"))
    to_avro = avro(served, topic, schema)
    values = [to_avro({"id": i, "text": f"{i:08d}" * 125}) for i in range(1200)]
    schema_id = int.from_bytes(values[0][1:5], "big")
    values[1100] = values[1100] + b"\x00"
    big = batch(values, compression=1)  # gzip: small on the wire, 1.2 MB of records
    assert len(big) < 1 << 20 < sum(len(v) for v in values)
    p = raw_produce(bs, topic, big)
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert refusals(p) == [
        (
            1100,
            f"The value does not decode with schema id {schema_id} (AVRO): 1 bytes left "
            "over after the datum",
        )
    ]
    corrupt = bytearray(batch([values[0], b"\x00" + values[0][1:5] + b"\x7f"]))
    corrupt[17] ^= 0x01  # the stored CRC (after base offset, length, epoch, magic)
    p = raw_produce(bs, topic, bytes(corrupt))
    assert p.error_code == ErrorCode.CORRUPT_MESSAGE
    assert end_offset(bs, topic) == 0
    values[1100] = values[1099]
    assert raw_produce(bs, topic, batch(values, compression=1)).error_code == 0
    assert end_offset(bs, topic) == 1200


def test_avro_schema_with_a_reference_is_decoded(served: Served) -> None:
    """The schema's references are fetched from the registry and parsed with it."""
    bs = served.broker.bootstrap_servers
    topic = topic_name("avro-ref")
    space = space_of(topic)
    create(bs, topic, DECODE)
    client = SchemaRegistryClient({"url": served.url})
    money = avro_record(f"{space}.Money", ("units", "long"), ("currency", "string"))
    client.register_schema(f"{space}.Money", Schema(money, "AVRO"))
    priced = json.dumps(
        {
            "type": "record",
            "name": f"{space}.Priced",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "price", "type": f"{space}.Money"},
            ],
        }
    )
    schema = Schema(priced, "AVRO", [SchemaReference(f"{space}.Money", f"{space}.Money", 1)])
    schema_id = client.register_schema(f"{topic}-value", schema)
    ser = AvroSerializer(client, conf={"auto.register.schemas": False, "use.latest.version": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    good = ser({"id": "a", "price": {"units": 5, "currency": "EUR"}}, ctx)
    assert int.from_bytes(good[1:5], "big") == schema_id
    p = raw_produce(bs, topic, batch([good, good[:-2]]))
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert refusals(p) == [
        (
            1,
            f"The value does not decode with schema id {schema_id} (AVRO): the payload ends too early",
        )
    ]
    assert raw_produce(bs, topic, batch([good])).error_code == 0
    reader = AvroDeserializer(client)
    assert [reader(v, ctx) for _, v in consume(bs, topic, 1)] == [
        {"id": "a", "price": {"units": 5, "currency": "EUR"}}
    ]


def test_key_decode_checks_keys(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("keys-decoded")
    create(
        bs,
        topic,
        {
            "confluent.key.schema.validation": "true",
            "gregor.key.schema.validation.level": "decode",
        },
    )
    key_schema = avro_record(f"{space_of(topic)}.Key", ("n", "long"))
    key = avro(served, topic, key_schema, MessageField.KEY)({"n": 3})
    schema_id = int.from_bytes(key[1:5], "big")
    p = raw_produce(bs, topic, batch([b"v", b"w"], keys=[key, key + b"!"]))
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert refusals(p) == [
        (
            1,
            f"The key does not decode with schema id {schema_id} (AVRO): 1 bytes left over "
            "after the datum",
        )
    ]
    assert raw_produce(bs, topic, batch([b"any value"], keys=[key])).error_code == 0
    assert consume(bs, topic, 1) == [(key, b"any value")]


def test_json_and_protobuf_payloads_that_do_not_decode_are_refused(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    topic = topic_name("formats-bad")
    space = space_of(topic)
    create(bs, topic, DECODE)
    client = SchemaRegistryClient({"url": served.url})
    client.set_compatibility(subject_name=f"{topic}-value", level="NONE")
    ctx = SerializationContext(topic, MessageField.VALUE)
    json_schema = json.dumps(
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    )
    good_json = JSONSerializer(json_schema, client)({"n": 1}, ctx)
    json_id = int.from_bytes(good_json[1:5], "big")
    order_cls = message_class(space)
    good_proto = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})(
        order_cls(id="x"), ctx
    )
    proto_id = int.from_bytes(good_proto[1:5], "big")
    assert good_proto[5] == 0  # the first message: a single 0 index
    json_prefix = f"The value does not decode with schema id {json_id} (JSON)"
    proto_prefix = f"The value does not decode with schema id {proto_id} (PROTOBUF)"
    p = raw_produce(
        bs,
        topic,
        batch(
            [
                good_json,
                good_json[:5] + b'{"n": "one"}',  # JSON, not what the schema says
                good_json[:5] + b'{"n": 1',  # not JSON
                good_json[:5] + b"[" * 100_000 + b"]" * 100_000,  # nested past the parser
                good_proto,
                good_proto + b"\x0a\x05ab",  # a field whose length runs past the end
                good_proto[:5] + b"\x02\x08" + good_proto[6:],  # message index 4: none
                good_proto[:5],  # no message indexes
            ],
            compression=4,
        ),
    )
    assert p.error_code == ErrorCode.INVALID_RECORD
    got = refusals(p)
    assert [i for i, _ in got] == [1, 2, 3, 5, 6, 7]
    assert got[0] == (1, f"{json_prefix}: at /n: 'one' is not of type 'integer'")
    assert got[1][1].startswith(f"{json_prefix}: not JSON: JSONDecodeError")
    assert got[2] == (3, f"{json_prefix}: nested too deeply")
    assert got[3][1].startswith(f"{proto_prefix}: DecodeError")
    assert got[4] == (6, f"{proto_prefix}: the schema has no message at indexes [4]")
    assert got[5] == (7, f"{proto_prefix}: no message indexes after the schema id")
    assert end_offset(bs, topic) == 0
    assert raw_produce(bs, topic, batch([good_json, good_proto])).error_code == 0
    assert end_offset(bs, topic) == 2


def test_hostile_avro_payloads_are_bounded(served: Served) -> None:
    """fastavro's compiled reader recurses on the C stack without a limit (a recursive schema's
    payload a few thousand levels deep crashes the process) and loops over an array's count
    even when its items take no bytes; the broker's walk refuses a datum nested too deeply and
    reads an array of nulls without looping."""
    bs = served.broker.bootstrap_servers
    topic = topic_name("hostile")
    space = space_of(topic)
    create(bs, topic, DECODE)
    client = SchemaRegistryClient({"url": served.url})
    client.set_compatibility(subject_name=f"{topic}-value", level="NONE")
    node = json.dumps(
        {
            "type": "record",
            "name": f"{space}.Node",
            "fields": [{"name": "next", "type": ["null", f"{space}.Node"]}],
        }
    )
    node_id = client.register_schema(f"{topic}-value", Schema(node, "AVRO"))
    nulls = json.dumps({"type": "array", "items": "null"})
    nulls_id = client.register_schema(f"{topic}-value", Schema(nulls, "AVRO"))
    framed = lambda i, body: b"\x00" + i.to_bytes(4, "big") + body  # noqa: E731
    shallow = framed(node_id, b"\x02" * 90 + b"\x00")
    deep = framed(node_id, b"\x02" * 100_000 + b"\x00")
    many_nulls = framed(nulls_id, b"\xfe\xff\xff\xff\x0f\x00")  # 2**31 - 1 nulls, one block
    p = raw_produce(bs, topic, batch([shallow, deep, many_nulls]))
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert refusals(p) == [
        (
            1,
            f"The value does not decode with schema id {node_id} (AVRO): the datum is nested "
            "more than 200 levels deep",
        )
    ]
    assert raw_produce(bs, topic, batch([shallow, many_nulls])).error_code == 0
    assert end_offset(bs, topic) == 2


def test_level_is_validated_described_and_altered(served: Served) -> None:
    bs = served.broker.bootstrap_servers
    bad = create_error(
        bs, topic_name("bad"), {**VALIDATE, "gregor.value.schema.validation.level": "deep"}
    )
    assert bad.code() == KafkaError.INVALID_CONFIG
    assert "gregor.value.schema.validation.level" in bad.str()
    topic = topic_name("levels")
    create(bs, topic, VALIDATE)
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource("topic", topic)
    entries = admin.describe_configs([resource])[resource].result(60)
    assert entries["gregor.value.schema.validation.level"].value == "id"
    assert entries["gregor.key.schema.validation.level"].value == "id"
    good = avro(served, topic, order(space_of(topic)))({"id": "a", "qty": 1})
    undecodable = good[:5] + b"\x7f"
    # at level id a registered id is enough
    assert raw_produce(bs, topic, batch([undecodable])).error_code == 0
    altered = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("gregor.value.schema.validation.level", "decode", incremental_operation=SET)
        ],
    )
    admin.incremental_alter_configs([altered])[altered].result(60)
    entries = admin.describe_configs([resource])[resource].result(60)
    assert entries["gregor.value.schema.validation.level"].value == "decode"
    p = raw_produce(bs, topic, batch([good, undecodable]))
    assert (p.error_code, [i for i, _ in refusals(p)]) == (ErrorCode.INVALID_RECORD, [1])
    assert raw_produce(bs, topic, batch([good])).error_code == 0
    assert end_offset(bs, topic) == 2
    wrong = ConfigResource(
        "topic",
        topic,
        incremental_configs=[
            ConfigEntry("gregor.value.schema.validation.level", "DECODE", incremental_operation=SET)
        ],
    )
    with pytest.raises(Exception) as info:
        admin.incremental_alter_configs([wrong])[wrong].result(60)
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG


# --- a Protobuf message class with a reference, as protoc would generate it ---


def message_class(space: str) -> Any:
    from google.protobuf import descriptor_pool, message_factory

    common_text = (
        f'syntax = "proto3";\npackage {space};\n'
        "message Money {\n  string currency = 1;\n  int64 units = 2;\n}\n"
    )
    order_text = (
        f'syntax = "proto3";\npackage {space};\nimport "{space}/common.proto";\n'
        f"message Order {{\n  string id = 1;\n  {space}.Money price = 2;\n"
        "  repeated string tags = 3;\n}\n"
    )
    common = ProtobufSchema.parse(common_text).file
    common.name = f"{space}/common.proto"
    order_file = ProtobufSchema.parse(
        order_text, (Dependency(f"{space}/common.proto", "PROTOBUF", common_text),)
    ).file
    order_file.name = f"{space}/order.proto"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(common)
    pool.Add(order_file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{space}.Order"))


# --- the Avro payload walk held to fastavro's reader ---

RICH = {
    "type": "record",
    "name": "rich.Event",
    "fields": [
        {"name": "flag", "type": "boolean"},
        {"name": "n", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "raw", "type": "bytes"},
        {"name": "text", "type": "string"},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 3}},
        {"name": "suit", "type": {"type": "enum", "name": "Suit", "symbols": ["S", "H", "D"]}},
        {"name": "maybe", "type": ["null", "string", "long"]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "nothing", "type": {"type": "array", "items": "null"}},
        {
            "name": "tree",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Node",
                    "fields": [
                        {"name": "v", "type": "long"},
                        {"name": "kids", "type": {"type": "array", "items": "Node"}},
                    ],
                },
            ],
        },
    ],
}
RICH_DATA = [
    {
        "flag": True,
        "n": -123456789012,
        "f": 1.5,
        "d": -2.25,
        "raw": b"\x00\xff",
        "text": "hello",
        "hash": b"abc",
        "suit": "D",
        "maybe": "x",
        "tags": ["a", "bc"],
        "counts": {"k": 5, "l": -1},
        "nothing": [None, None],
        "tree": {"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3, "kids": []}]},
    },
    {
        "flag": False,
        "n": 0,
        "f": 0.0,
        "d": 0.0,
        "raw": b"",
        "text": "",
        "hash": b"\x00\x00\x00",
        "suit": "S",
        "maybe": None,
        "tags": [],
        "counts": {},
        "nothing": [],
        "tree": None,
    },
]


def _walks() -> list[Any]:
    from gregor.protocol.records import _scan_py, walk

    out = [pytest.param(_scan_py.AvroValidator, id="python")]
    compiled = walk._IMPLEMENTATIONS["cython"]
    out.append(
        pytest.param(
            compiled.AvroValidator if compiled else None,
            id="cython",
            marks=pytest.mark.skipif(compiled is None, reason="the compiled walk is not built"),
        )
    )
    return out


@pytest.mark.parametrize("validator_cls", _walks())
def test_avro_walk_agrees_with_fastavro(validator_cls: Any) -> None:
    """Every truncation, every byte set to a few values and bytes appended: the walk accepts
    a payload exactly when fastavro's reader decodes it whole."""
    import io

    import fastavro

    from gregor.broker.replication.schema_decoder import _AvroProgram

    named: dict[str, Any] = {}
    parsed = fastavro.parse_schema(RICH, named_schemas=named)
    walk = validator_cls(*_AvroProgram(named).build(parsed))

    def fastavro_reads(payload: bytes) -> bool:
        fo = io.BytesIO(payload[5:])
        try:
            fastavro.schemaless_reader(fo, parsed, None)
        except Exception:
            return False
        return fo.tell() == len(payload) - 5

    checked = refused = stricter = 0
    for datum in RICH_DATA:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, datum)
        good = b"\x00\x00\x00\x00\x01" + out.getvalue()
        assert walk.check(good) is None
        cases = [good[:n] for n in range(len(good))] + [good + b"\x00", good + b"\x02\x00"]
        for i in range(5, len(good)):
            for byte in (0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, good[i] ^ 0x01):
                cases.append(good[:i] + bytes([byte]) + good[i + 1 :])
        for case in cases:
            ours = walk.check(case)
            theirs = fastavro_reads(case)
            checked += 1
            refused += ours is not None
            if ours is not None and theirs and NEGATIVE_INDEX.fullmatch(ours):
                stricter += 1  # fastavro indexes Python lists with it: -1 is the last symbol
                continue
            assert (ours is None) == theirs, (
                f"walk: {ours!r}, fastavro reads it: {theirs}: {case!r}"
            )
    assert checked > 600 and refused > 200 and stricter > 0, (checked, refused, stricter)


NEGATIVE_INDEX = re.compile(r"(an enum symbol|a union branch) index -\d+ out of range")


@pytest.mark.parametrize("validator_cls", _walks())
def test_avro_walk_refuses_what_avro_forbids(validator_cls: Any) -> None:
    """Beyond fastavro's reader (which reads these): an int of more than 32 bits and a varint
    of more than 10 bytes; an array block count of 2**63 has no negation."""
    import fastavro

    from gregor.broker.replication.schema_decoder import _AvroProgram

    def walk(schema: Any) -> Any:
        named: dict[str, Any] = {}
        return validator_cls(
            *_AvroProgram(named).build(fastavro.parse_schema(schema, named_schemas=named))
        )

    frame = b"\x00\x00\x00\x00\x01"
    assert walk("int").check(frame + b"\xfe\xff\xff\xff\x0f") is None  # 2**31 - 1
    assert walk("int").check(frame + b"\x80\x80\x80\x80\x10") == "an int out of 32 bits"
    assert walk("long").check(frame + b"\x80" * 10 + b"\x01") == "a long takes more than 10 bytes"
    min_long = frame + b"\xff" * 9 + b"\x01"  # zigzag: -2**63
    assert walk({"type": "array", "items": "long"}).check(min_long) == "the payload ends too early"
    assert walk("string").check(frame + b"\x01") == "a negative length"
    for text, ok in (
        (b"ascii only, longer than a word", True),
        ("grüße aus köln, ünïcödé".encode(), True),
        (b"sixteen ascii by" + b"\xff", False),  # a bad byte after two whole words
        (b"abcdefgh\xc3", False),  # a sequence cut short at the end
        ("x\ud800".encode("utf-8", "surrogatepass"), False),  # a surrogate
    ):
        encoded = frame + bytes([len(text) * 2]) + text  # a one-byte length: under 64 bytes
        assert walk("string").check(encoded) == (None if ok else "a string is not UTF-8"), text
    assert walk("null").check(frame) is None
    assert walk("null").check(b"\x00") == "the payload ends too early"


def test_a_schema_the_broker_cannot_build_refuses_every_payload() -> None:
    """Decode validation fails closed: a schema it cannot parse (or of a type it does not
    know) gives a decoder that refuses every payload, saying why."""
    from gregor.broker.replication.schema_decoder import decoder_for

    payload = b"\x00\x00\x00\x00\x01\x02"
    bad = decoder_for(1, "AVRO", '{"type": "record", "name": "R", "fields": "no"}', ())
    assert bad.walker is None
    why = bad.check(payload)
    assert why is not None
    assert why.startswith(
        "cannot be decoded with schema id 1: the broker cannot build a decoder of its schema ("
    )
    assert bad.reason(why) == why
    unknown = decoder_for(2, "XML", "<schema/>", ())
    assert unknown.check(payload) == (
        "cannot be decoded with schema id 2: the broker cannot build a decoder of its schema "
        "(ValueError: unknown schema type 'XML')"
    )
    good = decoder_for(3, "AVRO", '"long"', ())
    assert good.check(payload) is None
    assert good.check(payload + b"\x00") == (
        "does not decode with schema id 3 (AVRO): 1 bytes left over after the datum"
    )
