"""Protobuf schemas as the Arrow types of the columns they decode into (the Spark types of the
same columns: ``gregor.spark.protobuf_schema``).

A Protobuf column's schema is the subject's compiled ``FileDescriptorProto``, base64, as the
registry serves it with ``format=serialized`` (so a Spark worker needs no protoc): it is built
into a private descriptor pool (with Google's well-known types it imports), and the column is
the file's first message, as Confluent's serializer frames it with the message index ``[0]``.

The mapping is Spark's ``from_protobuf``'s: a message -> struct, a repeated field -> array, a
map field -> map<K, V>, an enum -> string (its value's name; a number the enum does not name
reads as the number), int32/sint32/sfixed32 -> int, int64/sint64/sfixed64/uint64/fixed64 ->
long (the unsigned 64-bit ones as Spark reads them: their bits as a signed long),
uint32/fixed32 -> long, float, double, bool, string, bytes -> binary, and the well-known
``google.protobuf.Timestamp`` -> timestamp. Fields keep Protobuf's values: a proto3 scalar left
unset reads as its default (0, ""), as Spark's ``emit.default.values`` renders it; a field
with presence (a message, ``optional``, a oneof member) reads as null when absent. Refused with
:class:`ProtobufUnsupported`: recursive messages, imports of other schemas (references).
"""

from __future__ import annotations

import base64
import binascii
import threading
from typing import Any

import pyarrow as pa


class ProtobufUnsupported(ValueError):
    """A Protobuf schema the typed columns cannot decode."""


TIMESTAMP = "google.protobuf.Timestamp"
_INT = {5, 15, 17}  # int32, sfixed32, sint32
_LONG = {3, 4, 6, 7, 13, 16, 18}  # int64, uint64, fixed64, fixed32, uint32, sfixed64, sint64
_ARROW: dict[int, pa.DataType] = {
    1: pa.float64(),
    2: pa.float32(),
    8: pa.bool_(),
    9: pa.string(),
    12: pa.binary(),
    14: pa.string(),
    **{t: pa.int32() for t in _INT},
    **{t: pa.int64() for t in _LONG},
}
TYPE_MESSAGE, TYPE_GROUP = 11, 10

_MESSAGES: dict[str, Any] = {}
_LOCK = threading.Lock()


def _well_known_pool() -> Any:
    """The default pool with Google's well-known types loaded (their _pb2 modules register
    them), to copy the imported ones from."""
    from google.protobuf import (  # noqa: F401
        any_pb2,
        api_pb2,
        descriptor_pool,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        source_context_pb2,
        struct_pb2,
        timestamp_pb2,
        type_pb2,
        wrappers_pb2,
    )

    return descriptor_pool.Default()


def reader_message(schema: str) -> Any:
    """The message descriptor a column decodes: the first message of the file ``schema`` (the
    base64 ``FileDescriptorProto``), its types checked (:func:`arrow_type` refuses)."""
    with _LOCK:
        got = _MESSAGES.get(schema)
    if got is not None:
        return got
    from google.protobuf import descriptor_pb2, descriptor_pool

    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema, validate=True))
    except (binascii.Error, ValueError) as e:
        raise ProtobufUnsupported(f"a schema that is not a compiled descriptor ({e})") from None
    if not fdp.message_type:
        raise ProtobufUnsupported("a schema without a message")
    pool = descriptor_pool.DescriptorPool()
    known = _well_known_pool()
    added: set[str] = set()

    def add(name: str) -> None:
        if name in added:
            return
        if not name.startswith("google/protobuf/"):
            raise ProtobufUnsupported(f"the import {name!r} (schema references)")
        try:
            file = known.FindFileByName(name)
        except KeyError:
            raise ProtobufUnsupported(f"the import {name!r}") from None
        for dep in file.dependencies:
            add(dep.name)
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb))
        added.add(name)

    for dep in fdp.dependency:
        add(dep)
    try:
        pool.Add(fdp)
        prefix = f"{fdp.package}." if fdp.package else ""
        message = pool.FindMessageTypeByName(prefix + fdp.message_type[0].name)
    except (TypeError, KeyError, ValueError) as e:
        raise ProtobufUnsupported(f"a descriptor that does not build ({e})") from None
    arrow_type(message)  # refuses recursion
    with _LOCK:
        _MESSAGES[schema] = message
    return message


def is_map(field: Any) -> bool:
    return bool(
        field.type == TYPE_MESSAGE
        and field.is_repeated
        and field.message_type.GetOptions().map_entry
    )


def _field_type(field: Any, open_: frozenset[str]) -> Any:
    if is_map(field):
        key, value = (
            field.message_type.fields_by_name["key"],
            field.message_type.fields_by_name["value"],
        )
        k, v = _single(key, open_), _single(value, open_)
        return pa.map_(k, v)
    single = _single(field, open_)
    if not field.is_repeated:
        return single
    return pa.list_(pa.field("element", single))


def _single(field: Any, open_: frozenset[str]) -> Any:
    if field.type in (TYPE_MESSAGE, TYPE_GROUP):
        return _message_type(field.message_type, open_)
    return _ARROW[field.type]


def _message_type(message: Any, open_: frozenset[str]) -> Any:
    if message.full_name == TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if message.full_name in open_:
        raise ProtobufUnsupported(
            f"the recursive message {message.full_name!r} (a Spark type cannot nest without end)"
        )
    inner = open_ | {message.full_name}
    fields = [(f.name, _field_type(f, inner)) for f in message.fields]
    return pa.struct([pa.field(n, t) for n, t in fields])


def arrow_type(message: Any) -> pa.DataType:
    """The Arrow type of the column ``message`` decodes into (its Spark type:
    ``gregor.spark.protobuf_schema.spark_type``)."""
    return _message_type(message, frozenset())


def field_arrow_type(field: Any) -> pa.DataType:
    return _field_type(field, frozenset())


def single_arrow_type(field: Any) -> pa.DataType:
    return _single(field, frozenset())


__all__ = [
    "TIMESTAMP",
    "ProtobufUnsupported",
    "arrow_type",
    "field_arrow_type",
    "is_map",
    "reader_message",
    "single_arrow_type",
]
