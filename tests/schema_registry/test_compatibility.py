"""Compatibility matrices per format: each case is an old and a new schema and whether the new
one passes BACKWARD (the new schema reads data written with the old) and FORWARD (the old
reads the new); FULL is both. The error types are Confluent's names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gregor.schema_registry.formats import parse
from gregor.schema_registry.formats.base import SchemaParseError

from .conftest import avro_record


def verdict(schema_type: str, old: str, new: str) -> tuple[set[str], set[str]]:
    """The error types of BACKWARD and FORWARD ({} each when compatible)."""
    o, n = parse(schema_type, old), parse(schema_type, new)
    return {i.error_type for i in n.incompatibilities(o)}, {
        i.error_type for i in o.incompatibilities(n)
    }


REC = "com.example.Rec"

AVRO_CASES: list[tuple[str, str, str, set[str], set[str]]] = [
    (
        "add a field with a default",
        avro_record(REC, ("a", "string")),
        avro_record(REC, ("a", "string"), ("b", "int", 0)),
        set(),
        set(),
    ),
    (
        "add a field without a default",
        avro_record(REC, ("a", "string")),
        avro_record(REC, ("a", "string"), ("b", "int")),
        {"READER_FIELD_MISSING_DEFAULT_VALUE"},
        set(),
    ),
    (
        "remove a field that had a default",
        avro_record(REC, ("a", "string"), ("b", "int", 0)),
        avro_record(REC, ("a", "string")),
        set(),
        set(),
    ),
    (
        "remove a field without a default",
        avro_record(REC, ("a", "string"), ("b", "int")),
        avro_record(REC, ("a", "string")),
        set(),
        {"READER_FIELD_MISSING_DEFAULT_VALUE"},
    ),
    (
        "promote int to long",
        avro_record(REC, ("a", "int")),
        avro_record(REC, ("a", "long")),
        set(),
        {"TYPE_MISMATCH"},
    ),
    (
        "string to int",
        avro_record(REC, ("a", "string")),
        avro_record(REC, ("a", "int")),
        {"TYPE_MISMATCH"},
        {"TYPE_MISMATCH"},
    ),
    (
        "string to bytes (both ways)",
        avro_record(REC, ("a", "string")),
        avro_record(REC, ("a", "bytes")),
        set(),
        set(),
    ),
    (
        "add an enum symbol",
        avro_record(REC, ("e", {"type": "enum", "name": "E", "symbols": ["A"]})),
        avro_record(REC, ("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]})),
        set(),
        {"MISSING_ENUM_SYMBOLS"},
    ),
    (
        "add an enum symbol, the old reader has a default",
        avro_record(REC, ("e", {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"})),
        avro_record(
            REC, ("e", {"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"})
        ),
        set(),
        set(),
    ),
    (
        "rename the record",
        avro_record(REC, ("a", "int")),
        avro_record("com.example.Other", ("a", "int")),
        {"NAME_MISMATCH"},
        {"NAME_MISMATCH"},
    ),
    (
        "rename the record with an alias",
        avro_record(REC, ("a", "int")),
        json.dumps(
            {
                "type": "record",
                "name": "Other",
                "namespace": "com.example",
                "aliases": ["com.example.Rec"],
                "fields": [{"name": "a", "type": "int"}],
            }
        ),
        set(),
        {"NAME_MISMATCH"},
    ),
    (
        "resize a fixed",
        avro_record(REC, ("f", {"type": "fixed", "name": "F", "size": 4})),
        avro_record(REC, ("f", {"type": "fixed", "name": "F", "size": 8})),
        {"FIXED_SIZE_MISMATCH"},
        {"FIXED_SIZE_MISMATCH"},
    ),
    (
        "make a field nullable",
        avro_record(REC, ("a", "string")),
        avro_record(REC, ("a", ["null", "string"], None)),
        set(),
        {"TYPE_MISMATCH"},
    ),
    (
        "narrow a union",
        avro_record(REC, ("a", ["null", "string", "int"])),
        avro_record(REC, ("a", ["null", "string"])),
        {"MISSING_UNION_BRANCH"},
        set(),
    ),
    (
        "promote array items",
        avro_record(REC, ("xs", {"type": "array", "items": "int"})),
        avro_record(REC, ("xs", {"type": "array", "items": "double"})),
        set(),
        {"TYPE_MISMATCH"},
    ),
    (
        "map values changed",
        avro_record(REC, ("m", {"type": "map", "values": "string"})),
        avro_record(REC, ("m", {"type": "map", "values": "boolean"})),
        {"TYPE_MISMATCH"},
        {"TYPE_MISMATCH"},
    ),
    (
        "a recursive record against itself",
        json.dumps(
            {
                "type": "record",
                "name": "Node",
                "fields": [
                    {"name": "v", "type": "int"},
                    {"name": "next", "type": ["null", "Node"], "default": None},
                ],
            }
        ),
        json.dumps(
            {
                "type": "record",
                "name": "Node",
                "fields": [
                    {"name": "v", "type": "long"},
                    {"name": "next", "type": ["null", "Node"], "default": None},
                ],
            }
        ),
        set(),
        {"TYPE_MISMATCH"},
    ),
    (
        "a logical type on the same primitive",
        avro_record(REC, ("d", "int")),
        avro_record(REC, ("d", {"type": "int", "logicalType": "date"})),
        set(),
        set(),
    ),
]


@pytest.mark.parametrize(
    ("case", "old", "new", "backward", "forward"), AVRO_CASES, ids=[c[0] for c in AVRO_CASES]
)
def test_avro_matrix(case: str, old: str, new: str, backward: set[str], forward: set[str]) -> None:
    assert verdict("AVRO", old, new) == (backward, forward)


def _obj(props: dict[str, Any], closed: bool = False, required: list[str] | None = None) -> str:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if closed:
        schema["additionalProperties"] = False
    if required:
        schema["required"] = required
    return json.dumps(schema)


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
JSON_CASES: list[tuple[str, str, str, set[str], set[str]]] = [
    (
        "add a property to an open content model",
        _obj({"a": STR}),
        _obj({"a": STR, "b": INT}),
        {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"},
        set(),
    ),
    (
        "add a property to a closed content model",
        _obj({"a": STR}, True),
        _obj({"a": STR, "b": INT}, True),
        set(),
        {"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"},
    ),
    (
        "remove a property from an open content model",
        _obj({"a": STR, "b": INT}),
        _obj({"a": STR}),
        set(),
        {"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"},
    ),
    ("widen integer to number", _obj({"a": INT}), _obj({"a": NUM}), set(), {"TYPE_NARROWED"}),
    (
        "make a property required",
        _obj({"a": STR}),
        _obj({"a": STR}, required=["a"]),
        {"REQUIRED_ATTRIBUTE_ADDED"},
        set(),
    ),
    (
        "decrease maxLength",
        _obj({"a": {"type": "string", "maxLength": 10}}),
        _obj({"a": {"type": "string", "maxLength": 5}}),
        {"MAX_LENGTH_DECREASED"},
        set(),
    ),
    (
        "narrow an enum",
        json.dumps({"enum": ["x", "y"]}),
        json.dumps({"enum": ["x"]}),
        {"ENUM_ARRAY_NARROWED"},
        set(),
    ),
    (
        "open a closed content model",
        _obj({"a": STR}, True),
        _obj({"a": STR}),
        set(),
        {"ADDITIONAL_PROPERTIES_REMOVED"},
    ),
    (
        "the same schema with keys reordered",
        json.dumps({"type": "object", "properties": {"a": STR}}),
        json.dumps({"properties": {"a": STR}, "type": "object"}),
        set(),
        set(),
    ),
    (
        "add a format",
        _obj({"a": STR}),
        _obj({"a": {"type": "string", "format": "email"}}),
        {"SCHEMA_CHANGED"},
        set(),
    ),
    (
        "change tuple items",
        json.dumps({"type": "array", "items": [INT, STR]}),
        json.dumps({"type": "array", "items": [STR, STR]}),
        {"SCHEMA_CHANGED"},
        {"SCHEMA_CHANGED"},
    ),
    (
        "a local $ref followed",
        json.dumps(
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/definitions/T"}},
                "definitions": {"T": INT},
            }
        ),
        json.dumps(
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/definitions/T"}},
                "definitions": {"T": STR},
            }
        ),
        {"TYPE_NARROWED"},
        {"TYPE_NARROWED"},
    ),
]


@pytest.mark.parametrize(
    ("case", "old", "new", "backward", "forward"), JSON_CASES, ids=[c[0] for c in JSON_CASES]
)
def test_json_schema_matrix(
    case: str, old: str, new: str, backward: set[str], forward: set[str]
) -> None:
    assert verdict("JSON", old, new) == (backward, forward)


P1 = 'syntax = "proto3";\npackage acme;\nmessage Order {\n  string id = 1;\n  int32 qty = 2;\n}\n'
PROTO_CASES: list[tuple[str, str, str, set[str], set[str]]] = [
    (
        "add a field",
        P1,
        P1.replace("int32 qty = 2;", "int32 qty = 2;\n  string note = 3;"),
        set(),
        set(),
    ),
    ("remove a field", P1, P1.replace("  int32 qty = 2;\n", ""), set(), set()),
    ("int32 to int64", P1, P1.replace("int32 qty", "int64 qty"), set(), set()),
    (
        "int32 to string",
        P1,
        P1.replace("int32 qty", "string qty"),
        {"FIELD_KIND_CHANGED"},
        {"FIELD_KIND_CHANGED"},
    ),
    (
        "singular to repeated",
        P1,
        P1.replace("int32 qty", "repeated int32 qty"),
        {"FIELD_SCALAR_KIND_CHANGED"},
        {"FIELD_SCALAR_KIND_CHANGED"},
    ),
    (
        "change a field's message type to another of the same short name",
        P1
        + "message O1 { message Item { string x = 1; } }\nmessage O2 { message Item { string x = 1; } }\n"
        + "message Box { O1.Item item = 1; }\n",
        P1
        + "message O1 { message Item { string x = 1; } }\nmessage O2 { message Item { string x = 1; } }\n"
        + "message Box { O2.Item item = 1; }\n",
        {"FIELD_KIND_CHANGED"},
        {"FIELD_KIND_CHANGED"},
    ),
    ("remove a message", P1 + "message Extra { string x = 1; }\n", P1, {"MESSAGE_REMOVED"}, set()),
    (
        "change the package",
        P1,
        P1.replace("package acme;", "package other;"),
        {"PACKAGE_CHANGED"},
        {"PACKAGE_CHANGED"},
    ),
    (
        "move a field into an existing oneof",
        P1.replace("int32 qty = 2;", "int32 qty = 2;\n  oneof pick { string a = 3; }"),
        P1.replace("  int32 qty = 2;\n", "  oneof pick { string a = 3; int32 qty = 2; }\n"),
        {"FIELD_MOVED_TO_EXISTING_ONEOF"},
        set(),
    ),
]


@pytest.mark.parametrize(
    ("case", "old", "new", "backward", "forward"), PROTO_CASES, ids=[c[0] for c in PROTO_CASES]
)
def test_protobuf_matrix(
    case: str, old: str, new: str, backward: set[str], forward: set[str]
) -> None:
    assert verdict("PROTOBUF", old, new) == (backward, forward)


@pytest.mark.parametrize(
    ("schema_type", "text", "why"),
    [
        ("AVRO", "{", "not JSON"),
        ("AVRO", '{"type": "record", "name": "R"}', "fields"),
        ("AVRO", '{"type": "recrd", "name": "R", "fields": []}', "recrd"),
        (
            "AVRO",
            '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}',
            "(?i)default",
        ),
        ("AVRO", "[" * 5000 + "]" * 5000, "nested too deeply|not JSON"),
        ("JSON", "[1, 2]", "object or a boolean"),
        ("JSON", '{"type": "strin"}', "strin"),
        ("JSON", '{"type": "object", "properties": 3}', "object"),
        ("PROTOBUF", 'syntax = "proto3"; message M { strin x = 1; }', "strin"),
        (
            "PROTOBUF",
            'syntax = "proto3"; import "missing.proto"; message M { int32 x = 1; }',
            "missing.proto",
        ),
        ("PROTOBUF", "AAAA////", "FileDescriptorProto"),
    ],
)
def test_invalid_schemas_say_why(schema_type: str, text: str, why: str) -> None:
    with pytest.raises(SchemaParseError, match=why):
        parse(schema_type, text)


def test_avro_refuses_fastavros_bookkeeping_keys() -> None:
    # fastavro takes this as already parsed and checks nothing: a nonsense type got registered
    with pytest.raises(SchemaParseError, match="__fastavro_parsed"):
        parse("AVRO", '{"__fastavro_parsed": true, "__named_schemas": {}, "type": "no such type"}')


def test_json_schemas_too_deep_to_compare_are_incompatible() -> None:
    def nested(leaf: str, depth: int) -> str:
        text = json.dumps({"type": leaf})
        for _ in range(depth):
            text = f'{{"type": "array", "items": {text}}}'
        return text

    backward, forward = verdict("JSON", nested("integer", 70), nested("string", 70))
    assert backward == forward == {"SCHEMA_TOO_DEEP"}  # not compared, so not compatible
    assert verdict("JSON", nested("integer", 20), nested("string", 20)) == (
        {"TYPE_NARROWED"},
        {"TYPE_NARROWED"},
    )
