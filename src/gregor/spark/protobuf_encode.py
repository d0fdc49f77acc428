"""The sink's Protobuf columns: a struct ``value`` (or ``key``) written as a Confluent-framed
Protobuf message of a subject's registered schema (``valueFormat protobuf`` on ``df.write`` /
``writeStream``).

The schema is the subject's version looked up once when the write is planned, kept as the
registry's compiled descriptor (``format=serialized``, as the source keeps it, so a worker needs
no protoc); the message is the file's first, as the source reads it. Each row is set into a
message of protobuf's dynamic class for that descriptor, serialized, and framed as
confluent-kafka's ``ProtobufSerializer`` frames it: a magic byte 0, the schema id (4 bytes,
big-endian), the message indexes (for the first message the single byte 0), the message.

Values map as the source reads them (:mod:`gregor.spark.protobuf_schema`), so a round trip is
exact: a struct -> a message, an array -> a repeated field, a map -> a map field, a string -> an
enum by its value's name (or a number's text, as the source reads a number the enum does not
name), a timestamp -> ``google.protobuf.Timestamp``, a long -> uint64/fixed64 by its bits (as
the source reads them). A null leaves the field unset (a proto3 scalar then reads as its
default). A row that does not fit (a number out of the field's range, an enum name the enum
lacks, a null inside an array, two members of one ``oneof`` set) fails the task naming the
column, the field and the reason.
"""

from __future__ import annotations

import datetime
import struct
import threading
from typing import Any

import pyarrow as pa

from gregor.columns.framing import TypedColumn
from gregor.columns.protobuf_schema import (
    TIMESTAMP,
    TYPE_GROUP,
    TYPE_MESSAGE,
    is_map,
    reader_message,
)
from gregor.spark.options import OptionError

UTC = datetime.UTC
_ENUM = 14
_UNSIGNED_64 = (4, 6)  # uint64, fixed64

_CLASSES: dict[str, Any] = {}
_LOCK = threading.Lock()


class _Unfit(ValueError):
    """A row's value does not fit its field: the field's path and the reason."""


def message_class(schema: str) -> Any:
    """protobuf's dynamic message class of the first message of ``schema`` (the base64
    ``FileDescriptorProto``)."""
    with _LOCK:
        got = _CLASSES.get(schema)
    if got is None:
        from google.protobuf import message_factory

        got = message_factory.GetMessageClass(reader_message(schema))
        with _LOCK:
            _CLASSES[schema] = got
    return got


def unknown_fields(schema: str, names: list[str]) -> list[str]:
    """Which of the struct's field ``names`` the column's message has no field for."""
    fields = reader_message(schema).fields_by_name
    return [n for n in names if n not in fields]


def _scalar(value: Any, field: Any, path: str) -> Any:
    """A value of a single (not message) field as protobuf takes it."""
    if field.type == _ENUM:
        if isinstance(value, str):
            named = field.enum_type.values_by_name.get(value)
            if named is not None:
                return named.number
            if value.lstrip("-").isdigit():  # a number the enum does not name, as read
                return int(value)
            raise _Unfit(f"{path}: the enum {field.enum_type.full_name} has no value {value!r}")
        return value
    if field.type in _UNSIGNED_64 and isinstance(value, int) and value < 0:
        return value & 0xFFFF_FFFF_FFFF_FFFF  # the source reads their bits as a signed long
    return value


def _timestamp(target: Any, value: Any, path: str) -> None:
    if not isinstance(value, datetime.datetime):
        raise _Unfit(f"{path}: a google.protobuf.Timestamp needs a timestamp, got {value!r}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    target.FromDatetime(value)


def _fill(target: Any, row: dict[str, Any], path: str) -> None:
    """Set the fields of the message ``target`` from the struct ``row``."""
    message = target.DESCRIPTOR
    if message.full_name == TIMESTAMP:
        raise _Unfit(f"{path}: a google.protobuf.Timestamp needs a timestamp")
    oneofs: dict[str, str] = {}
    for name, value in row.items():
        field = message.fields_by_name.get(name)
        where = f"{path}.{name}" if path else name
        if field is None:
            raise _Unfit(f"{where}: the message {message.full_name} has no such field")
        if value is None:
            continue
        group = field.containing_oneof
        if group is not None:
            if group.name in oneofs:
                raise _Unfit(
                    f"{where}: the oneof {group.name} has {oneofs[group.name]} set already"
                )
            oneofs[group.name] = name
        try:
            _set(target, field, value, where)
        except _Unfit:
            raise
        except (TypeError, ValueError, OverflowError) as e:  # protobuf's own checks
            raise _Unfit(f"{where}: {e}") from None


def _set(target: Any, field: Any, value: Any, path: str) -> None:
    name = field.name
    nested = field.type in (TYPE_MESSAGE, TYPE_GROUP)
    if is_map(field):
        container = getattr(target, name)
        value_field = field.message_type.fields_by_name["value"]
        key_field = field.message_type.fields_by_name["key"]
        pairs = value.items() if isinstance(value, dict) else value
        for k, v in pairs:
            at = f"{path}[{k!r}]"
            key = _scalar(k, key_field, at)
            if v is None:
                raise _Unfit(f"{at}: a map value cannot be null in Protobuf")
            if value_field.type in (TYPE_MESSAGE, TYPE_GROUP):
                _into(container[key], v, at)
            else:
                container[key] = _scalar(v, value_field, at)
        return
    if field.is_repeated:
        container = getattr(target, name)
        for i, v in enumerate(value):
            at = f"{path}[{i}]"
            if v is None:
                raise _Unfit(f"{at}: an element of a repeated field cannot be null in Protobuf")
            if nested:
                _into(container.add(), v, at)
            else:
                container.append(_scalar(v, field, at))
        return
    if nested:
        _into(getattr(target, name), value, path)
        return
    setattr(target, name, _scalar(value, field, path))


def _into(target: Any, value: Any, path: str) -> None:
    """Set the message ``target`` (a field's, marked present) from ``value``."""
    if target.DESCRIPTOR.full_name == TIMESTAMP:
        _timestamp(target, value, path)
        return
    if not isinstance(value, dict):
        raise _Unfit(f"{path}: the message {target.DESCRIPTOR.full_name} needs a struct")
    target.SetInParent()
    _fill(target, value, path)


def encode_column(array: pa.Array, spec: TypedColumn) -> pa.Array:
    """``array`` (the struct column) as a binary column of framed messages; nulls stay null."""
    from google.protobuf.message import EncodeError

    cls = message_class(spec.schema)
    prefix = b"\x00" + struct.pack(">I", spec.schema_id) + b"\x00"
    out: list[bytes | None] = []
    for row in array.to_pylist(maps_as_pydicts="strict"):
        if row is None:
            out.append(None)
            continue
        msg = cls()
        try:
            _fill(msg, row, "")
            payload = msg.SerializeToString()
        except (ValueError, EncodeError) as e:  # _Unfit, or a proto2 required field unset
            reason = str(e)
        else:
            out.append(prefix + payload)
            continue
        raise OptionError(
            f"the {spec.column} column does not fit the subject {spec.subject} version "
            f"{spec.version}: {reason}"
        )
    return pa.array(out, pa.binary())


__all__ = ["encode_column", "message_class", "unknown_fields"]
