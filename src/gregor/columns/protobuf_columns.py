"""Confluent-framed Protobuf keys and values (a magic byte 0, the schema id, the message
indexes as zigzag varints, the message) decoded into typed Arrow columns, batch at a time.

The frames are checked and grouped by writer id in :mod:`gregor.columns.framing`; a writer id must
name a Protobuf schema. Every value is read as the reader's message (the subject's version the
query planned with, :mod:`gregor.columns.protobuf_schema`): Protobuf's wire format needs no
writer's schema, and fields the reader lacks are skipped. The message indexes must be ``[0]``
(the file's first message: one byte 0, or a count of one and index 0).

A group's payloads become one message in one parse: ``GregorBatch { repeated <message> rows =
1; }``, whose wire form is each payload after a tag byte and its length. That buffer is built
with numpy over the batch's Arrow buffers (no per-row bytes objects) and parsed by protobuf's
compiled runtime (upb) in one call; a group that does not parse is halved to find the bad
payloads. The parsed messages are then read into Arrow a field at a time over all rows (a
list of Python values per field: protobuf has no columnar output), which is where the time
goes.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa

from gregor.columns.framing import (
    ColumnDecoders,
    GroupDecoder,
    TypedColumn,
    Undecodable,
    WriterFormats,
    buffers,
    decode_framed,
    halve,
)
from gregor.columns.protobuf_schema import (
    TIMESTAMP,
    TYPE_GROUP,
    TYPE_MESSAGE,
    arrow_type,
    field_arrow_type,
    is_map,
    reader_message,
    single_arrow_type,
)

_BATCHES = itertools.count()


class _Decoder:
    """The decoding state of one column in one process: the reader's message, its batch
    wrapper's class, and which writer ids are Protobuf schemas."""

    def __init__(self, spec: TypedColumn) -> None:
        from google.protobuf import descriptor_pb2, message_factory

        self.spec = spec
        self.message = reader_message(spec.schema)
        self.target = arrow_type(self.message)
        pool = self.message.file.pool
        wrapper = descriptor_pb2.FileDescriptorProto(
            name=f"gregor_batch_{next(_BATCHES)}.proto",
            package=f"gregor_batch_{next(_BATCHES)}",
            dependency=[self.message.file.name],
            syntax="proto3",
        )
        batch = wrapper.message_type.add(name="GregorBatch")
        batch.field.add(
            name="rows",
            number=1,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
            type_name="." + self.message.full_name,
        )
        pool.Add(wrapper)
        self.batch_class = message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{wrapper.package}.GregorBatch")
        )
        self.writer_known = WriterFormats(spec, "PROTOBUF")
        self.writers = self.writer_known.known


_decoder = ColumnDecoders(_Decoder).get


def _header_lengths(values: pa.BinaryArray) -> np.ndarray:
    """Each framed value's header length (frame and message indexes ``[0]``), or 0 when its
    indexes are not ``[0]`` or do not end in the value."""
    offs, data = buffers(values)
    starts, lengths = offs[:-1], np.diff(offs)
    out = np.zeros(len(values), dtype=np.int64)
    has = lengths >= 6
    first = np.where(has, data[np.minimum(starts + 5, max(len(data) - 1, 0))], 1)
    out[has & (first == 0)] = 6  # the common case: one byte 0 for [0]
    # else a count of one and the index 0, as zigzag varints: 0x02 0x00
    two = has & (first == 2) & (lengths >= 7)
    second = np.where(two, data[np.minimum(starts + 6, max(len(data) - 1, 0))], 1)
    out[two & (second == 0)] = 7
    return out


def _varint_widths(n: np.ndarray) -> np.ndarray:
    return 1 + (n >= 1 << 7) + (n >= 1 << 14) + (n >= 1 << 21) + (n >= 1 << 28)


def _wrapped(values: pa.BinaryArray, header: np.ndarray) -> bytes:
    """The wire form of ``GregorBatch`` holding each value's message: for each, the tag of
    field 1 (length-delimited, ``0x0a``), the message's length (varint), the message."""
    offs, data = buffers(values)
    starts = offs[:-1] + header
    lengths = offs[1:] - starts
    before = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    body = data[np.repeat(starts - before, lengths) + np.arange(int(lengths.sum()))]
    width = _varint_widths(lengths)
    head = 1 + width
    head_starts = np.concatenate(([0], np.cumsum(head)[:-1])).astype(np.int64)
    fill = np.empty(int(head.sum()), dtype=np.uint8)
    fill[head_starts] = 0x0A
    for j in range(5):
        m = width > j
        byte = (lengths[m] >> (7 * j)) & 0x7F
        byte |= np.where(width[m] > j + 1, 0x80, 0)
        fill[head_starts[m] + 1 + j] = byte.astype(np.uint8)
    return np.insert(body, np.repeat(before, head), fill).tobytes()


def _parse(values: pa.BinaryArray, header: np.ndarray, dec: _Decoder) -> pa.Array:
    from google.protobuf.message import DecodeError

    batch = dec.batch_class()
    try:
        batch.ParseFromString(_wrapped(values, header))
    except (DecodeError, ValueError, RuntimeError) as e:
        raise Undecodable(str(e)) from None
    rows = list(batch.rows)
    if len(rows) != len(values):
        raise Undecodable("row count")
    return _struct(rows, dec.message, None)


def _struct(msgs: list[Any], message: Any, present: np.ndarray | None) -> pa.Array:
    """The messages ``msgs`` (of ``message``) as a struct array; ``present`` False where the
    message was absent (null)."""
    if message.full_name == TIMESTAMP:
        micros = np.array([m.seconds for m in msgs], dtype=np.int64) * 1_000_000 + (
            np.array([m.nanos for m in msgs], dtype=np.int64) // 1000
        )
        return pa.array(
            micros,
            type=pa.timestamp("us", tz="UTC"),
            mask=None if present is None else ~present,
        )
    children = [_field(msgs, f) for f in message.fields]
    return pa.StructArray.from_arrays(
        children,
        fields=[pa.field(f.name, c.type) for f, c in zip(message.fields, children, strict=True)],
        mask=None if present is None or present.all() else pa.array(~present),
    )


def _field(msgs: list[Any], field: Any) -> pa.Array:
    name = field.name
    if is_map(field):
        containers = [getattr(m, name) for m in msgs]
        offsets = np.concatenate(([0], np.cumsum([len(c) for c in containers]))).astype(np.int32)
        pairs = [kv for c in containers for kv in c.items()]
        key_f, value_f = (
            field.message_type.fields_by_name["key"],
            field.message_type.fields_by_name["value"],
        )
        keys = _values([k for k, _ in pairs], key_f, None)
        items = _values([v for _, v in pairs], value_f, None)
        return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=field_arrow_type(field))
    if field.is_repeated:
        lists = [getattr(m, name) for m in msgs]
        offsets = np.concatenate(([0], np.cumsum([len(x) for x in lists]))).astype(np.int32)
        flat = [x for lst in lists for x in lst]
        return pa.ListArray.from_arrays(
            pa.array(offsets), _values(flat, field, None), type=field_arrow_type(field)
        )
    present = np.array([m.HasField(name) for m in msgs], dtype=bool) if field.has_presence else None
    return _values([getattr(m, name) for m in msgs], field, present)


def _values(values: list[Any], field: Any, present: np.ndarray | None) -> pa.Array:
    """One field's values (single, not repeated) as an Arrow array."""
    if field.type in (TYPE_MESSAGE, TYPE_GROUP):
        return _struct(values, field.message_type, present)
    target = single_arrow_type(field)
    if field.type == 14:  # an enum: its value's name
        names = {v.number: v.name for v in field.enum_type.values}
        values = [names.get(v, str(v)) for v in values]
    elif field.type in (4, 6):  # uint64, fixed64: their bits as a signed long, as Spark reads them
        values = np.array(values, dtype=np.uint64).view(np.int64)  # type: ignore[assignment]
    mask = None if present is None or present.all() else ~present
    if mask is None:
        return pa.array(values, type=target)
    return pa.array([v if p else None for v, p in zip(values, present, strict=True)], type=target)  # type: ignore[arg-type]


def column_decoder(spec: TypedColumn) -> tuple[pa.DataType, GroupDecoder]:
    """The reader message's Arrow type and the decoder of one writer id's framed values."""
    dec = _decoder(spec)

    def group(
        schema_id: int, rows: np.ndarray, taken: pa.BinaryArray
    ) -> tuple[pa.Array | None, np.ndarray] | None:
        if not dec.writer_known(schema_id):
            return None
        header = _header_lengths(taken)
        bad = np.nonzero(header == 0)[0]
        if len(bad) == 0:
            return halve(taken, lambda v: _parse(v, _header_lengths(v), dec))
        good = np.nonzero(header != 0)[0]
        if len(good) == 0:
            return None, bad
        subset = taken.take(pa.array(good))
        decoded, failed = halve(
            pa.concat_arrays([subset]), lambda v: _parse(v, _header_lengths(v), dec)
        )
        # positions in ``taken``: the decoded rows are ``good`` less ``failed``; the caller
        # takes the rows it was not told failed, in order
        return decoded, np.sort(np.concatenate((bad, good[failed])))

    return dec.target, group


def decode_column(
    values: pa.Array, spec: TypedColumn, topic: str, partition: int, offsets: pa.Array
) -> pa.Array:
    """``values`` (binary, framed Protobuf) as the reader message's Arrow column."""
    target, group = column_decoder(spec)
    return decode_framed(values, spec, target, group, topic, partition, offsets)


__all__ = ["column_decoder", "decode_column"]
