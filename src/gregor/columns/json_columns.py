"""Confluent-framed JSON Schema keys and values (a magic byte 0, the schema id, UTF-8 JSON)
decoded into typed Arrow columns, batch at a time, by pyarrow's JSON reader.

The frames are checked and grouped by writer id in :mod:`gregor.columns.framing`; a writer id must
name a JSON schema. Every value is read with the reader's schema (the subject's version the
query planned with: JSON needs no writer's schema to read, and what the reader's schema lacks
is left out, what the value lacks is null). A group's payloads become one newline-delimited
buffer without a per-row copy: the batch's data buffer copied once, each 5-byte frame header
overwritten by a newline and four spaces (whitespace before a JSON value), and every newline
or carriage return inside a payload made a space (in valid JSON they can only be whitespace:
inside strings they must be escaped). pyarrow reads the buffer with an explicit schema
(:func:`gregor.columns.json_schema.read_type`), one row per line; a payload must start with
``{`` (as every serializer writes an object), and a group that does not give exactly one row a
payload is halved to find the malformed ones. A map (``additionalProperties``) is read as an
object whose keys pyarrow infers as fields and made a map here; its null values read as absent.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

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
from gregor.columns.json_schema import JsonNode, arrow_type, has_map, parse, read_type


class _Decoder:
    """The decoding state of one column in one process: the reader's schema, and which writer
    ids are JSON schemas."""

    def __init__(self, spec: TypedColumn) -> None:
        self.spec = spec
        self.node = parse(spec.schema)
        self.target = arrow_type(self.node)
        self.options = pj.ParseOptions(
            explicit_schema=pa.schema(list(read_type(self.node))),
            unexpected_field_behavior="infer" if has_map(self.node) else "ignore",
            newlines_in_values=False,
        )
        self.writer_known = WriterFormats(spec, "JSON")
        self.writers = self.writer_known.known


_decoder = ColumnDecoders(_Decoder).get


def _lines(values: pa.BinaryArray) -> bytes:
    """The payloads of ``values`` (framed, offset 0) as newline-delimited JSON."""
    offs, data = buffers(values)
    starts = offs[:-1]
    if np.any(np.diff(offs) < 6):
        raise Undecodable("an empty payload")
    if np.any(data[starts + 5] != ord("{")):
        raise Undecodable("a payload that does not start with '{'")
    base = int(offs[0])
    buf = data[base : int(offs[-1])].copy()
    buf[(buf == 10) | (buf == 13)] = 32
    rel = starts - base
    buf[rel] = 10
    for j in range(1, 5):
        buf[rel + j] = 32
    return buf.tobytes()


def _read(values: pa.BinaryArray, dec: _Decoder) -> pa.Array:
    text = _lines(values)
    table = pj.read_json(
        pa.BufferReader(text),
        read_options=pj.ReadOptions(use_threads=False, block_size=max(len(text) + 1, 1 << 16)),
        parse_options=dec.options,
    )
    if table.num_rows != len(values):
        raise Undecodable("row count")
    struct = pa.StructArray.from_arrays(
        [c.combine_chunks() for c in table.columns], names=table.column_names
    )
    return conform(struct, dec.node)


def conform(array: pa.Array, node: JsonNode) -> pa.Array:
    """``array`` (as pyarrow's reader gives it for :func:`read_type`) as :func:`arrow_type`."""
    if array.offset != 0 and node.kind in ("object", "array", "map"):
        array = pa.concat_arrays([array])
    n = len(array)
    mask = pc.is_null(array) if array.null_count else None
    if node.kind == "object":
        assert isinstance(array, pa.StructArray)
        names = [array.type.field(i).name for i in range(array.type.num_fields)]
        children = [
            conform(array.field(names.index(k)), v) if k in names else pa.nulls(n, arrow_type(v))
            for k, v in node.fields
        ]
        return pa.StructArray.from_arrays(
            children,
            fields=[pa.field(k, c.type) for (k, _), c in zip(node.fields, children, strict=True)],
            mask=mask,
        )
    if node.kind == "array":
        assert node.items is not None and isinstance(array, pa.ListArray)
        return pa.ListArray.from_arrays(
            array.offsets,
            conform(array.values, node.items),
            type=arrow_type(node),
            mask=mask,
        )
    if node.kind == "map":
        assert node.items is not None and isinstance(array, pa.StructArray)
        k = array.type.num_fields
        keys = np.array([array.type.field(i).name for i in range(k)], dtype=object)
        children = [conform(array.field(i), node.items) for i in range(k)]
        present = np.zeros((n, k), dtype=bool)
        for i, c in enumerate(children):
            present[:, i] = np.asarray(c.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        row, col = np.nonzero(present)  # row-major: each row's entries in field order
        counts = present.sum(axis=1)
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
        items = (
            pa.concat_arrays(children).take(pa.array(col * n + row))
            if k
            else pa.nulls(0, arrow_type(node.items))
        )
        return pa.MapArray.from_arrays(
            pa.array(offsets),
            pa.array(keys[col].tolist(), pa.string()),
            items,
            type=arrow_type(node),
            mask=mask,
        )
    target = arrow_type(node)
    return array if array.type == target else array.cast(target)


def column_decoder(spec: TypedColumn) -> tuple[pa.DataType, GroupDecoder]:
    """The reader schema's Arrow type and the decoder of one writer id's framed values."""
    dec = _decoder(spec)

    def group(
        schema_id: int, rows: np.ndarray, taken: pa.BinaryArray
    ) -> tuple[pa.Array | None, np.ndarray] | None:
        if not dec.writer_known(schema_id):
            return None
        return halve(taken, lambda v: _read(v, dec))

    return dec.target, group


def decode_column(
    values: pa.Array, spec: TypedColumn, topic: str, partition: int, offsets: pa.Array
) -> pa.Array:
    """``values`` (binary, framed JSON) as the reader schema's Arrow column."""
    target, group = column_decoder(spec)
    return decode_framed(values, spec, target, group, topic, partition, offsets)


__all__ = ["column_decoder", "conform", "decode_column"]
