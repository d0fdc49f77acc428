"""The ``_schemas`` layout (Confluent's keys and values, byte for byte) and the state rebuilt
from records: soft and permanent deletes, config and mode tombstones, records it cannot read."""

from __future__ import annotations

import json

from gregor.schema_registry.records import (
    Key,
    Reference,
    SchemaValue,
    config_value,
    decode_key,
    decode_schema_value,
    delete_subject_value,
    mode_value,
)
from gregor.schema_registry.state import RegistryState


def test_keys_are_confluents_json() -> None:
    assert Key("SCHEMA", "orders-value", 3).encode() == (
        b'{"keytype":"SCHEMA","subject":"orders-value","version":3,"magic":1}'
    )
    assert Key("CONFIG", None).encode() == b'{"keytype":"CONFIG","subject":null,"magic":0}'
    assert Key("MODE", "s").encode() == b'{"keytype":"MODE","subject":"s","magic":0}'
    assert (
        Key("DELETE_SUBJECT", "s").encode()
        == b'{"keytype":"DELETE_SUBJECT","subject":"s","magic":0}'
    )
    assert Key("NOOP").encode() == b'{"keytype":"NOOP","magic":0}'


def test_values_are_confluents_json() -> None:
    avro = SchemaValue("s", 1, 7, '"string"')
    assert json.loads(avro.encode()) == {
        "subject": "s",
        "version": 1,
        "id": 7,
        "schema": '"string"',
        "deleted": False,
    }
    proto = SchemaValue(
        "p", 2, 8, 'syntax = "proto3";', "PROTOBUF", (Reference("a.proto", "a", 1),), True
    )
    assert json.loads(proto.encode()) == {
        "subject": "p",
        "version": 2,
        "id": 8,
        "schemaType": "PROTOBUF",
        "references": [{"name": "a.proto", "subject": "a", "version": 1}],
        "schema": 'syntax = "proto3";',
        "deleted": True,
    }
    assert config_value("FULL") == b'{"compatibilityLevel":"FULL"}'
    assert mode_value("READONLY") == b'{"mode":"READONLY"}'
    assert delete_subject_value("s", 4) == b'{"subject":"s","version":4}'


def test_keys_and_values_round_trip() -> None:
    for key in (
        Key("SCHEMA", "a", 1),
        Key("CONFIG", None),
        Key("CONFIG", "x"),
        Key("MODE", None),
        Key("DELETE_SUBJECT", "y"),
        Key("CLEAR_SUBJECT", "y"),
        Key("NOOP"),
    ):
        assert decode_key(key.encode()) == key
    value = SchemaValue("s", 5, 9, "{}", "JSON", (Reference("r", "t", 2),))
    assert decode_schema_value(value.encode()) == value


def test_records_it_cannot_read_decode_to_none() -> None:
    for raw in (
        None,
        b"",
        b"\xff\xfe",
        b"[]",
        b"42",
        b'{"keytype":"WHAT"}',
        b'{"keytype":"SCHEMA","subject":"s"}',
        b'{"keytype":"SCHEMA","subject":1,"version":1}',
        b'{"keytype":"SCHEMA","subject":"s","version":true}',
        b'{"keytype":"DELETE_SUBJECT","subject":null}',
        b"[" * 100000,
    ):
        assert decode_key(raw) is None, raw
    for raw in (
        b"{}",
        b'{"subject":"s","version":1,"id":"1","schema":"x"}',
        b'{"subject":"s","version":1,"id":1,"schema":"x","references":[{"name":1}]}',
    ):
        assert decode_schema_value(raw) is None, raw


def _schema(
    state: RegistryState, subject: str, version: int, sid: int, deleted: bool = False
) -> None:
    state.apply(
        Key("SCHEMA", subject, version),
        SchemaValue(subject, version, sid, f'"{sid}"', deleted=deleted).encode(),
    )


def test_state_soft_and_permanent_deletes() -> None:
    state = RegistryState()
    _schema(state, "a", 1, 1)
    _schema(state, "a", 2, 2)
    _schema(state, "b", 1, 1)
    assert state.max_id == 2 and state.id_users[1] == {("a", 1), ("b", 1)}
    state.apply(Key("DELETE_SUBJECT", "a"), delete_subject_value("a", 1))
    assert [v.version for v in state.versions("a")] == [2]
    assert [v.version for v in state.versions("a", deleted=True)] == [1, 2]
    state.apply(Key("SCHEMA", "a", 1), None)  # permanent: a tombstone
    assert [v.version for v in state.versions("a", deleted=True)] == [2]
    assert 1 in state.schemas  # still b's
    state.apply(Key("SCHEMA", "b", 1), None)
    assert 1 not in state.schemas and 1 not in state.id_users
    assert state.max_id == 2  # ids are never handed out again by this state


def test_state_config_and_mode_with_tombstones() -> None:
    state = RegistryState()
    assert state.compatibility("s") == "BACKWARD" and state.mode_of("s") == "READWRITE"
    state.apply(Key("CONFIG", None), config_value("FULL"))
    state.apply(Key("CONFIG", "s"), config_value("NONE"))
    state.apply(Key("MODE", "s"), mode_value("READONLY"))
    assert state.compatibility("s") == "NONE" and state.compatibility("t") == "FULL"
    assert state.mode_of("s") == "READONLY" and state.mode_of(None) == "READWRITE"
    state.apply(Key("CONFIG", "s"), None)
    state.apply(Key("MODE", "s"), None)
    assert state.compatibility("s") == "FULL" and state.mode_of("s") == "READWRITE"


def test_state_skips_what_it_cannot_read() -> None:
    state = RegistryState()
    state.apply(None, b"x")
    state.apply(Key("SCHEMA", "s", 1), b"not json")
    state.apply(
        Key("SCHEMA", "s", 1), SchemaValue("other", 1, 1, "{}").encode()
    )  # key and value disagree
    state.apply(Key("CONFIG", None), b'{"compatibilityLevel": 5}')
    state.apply(Key("DELETE_SUBJECT", "s"), b'{"subject":"s"}')
    assert state.skipped == 5 and not state.subjects and state.compatibility(None) == "BACKWARD"
