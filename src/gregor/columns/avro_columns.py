"""Confluent-framed Avro keys and values decoded into typed Arrow columns, batch at a time.

The frames are checked and grouped by writer id in :mod:`gregor.columns.framing`; each group
becomes one Avro object container in
memory, one block per datum (so each datum keeps its own bounds, as Confluent's deserializer
reads one datum per value and ignores what follows it), which polars' Avro reader (compiled)
decodes into Arrow (a map decodes as the array of key-value records it is encoded as). polars
reads no union of several types: a writer's schema with one is decoded by fastavro's compiled
reader instead, each branch as a record of one field ``member<i>`` (a record of one field is
encoded as the field), into Python values made an Arrow column at once (some fifteen times the
cost per row of the polars path). The result is resolved from the writer's schema to the
reader's (the subject's version the query planned with: :mod:`gregor.columns.avro_schema`).
Malformed records are as :mod:`gregor.columns.framing` says; decoding failures are found by
halving the group.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gregor.columns.avro_references import whole
from gregor.columns.avro_schema import (
    AvroField,
    AvroNode,
    AvroUnsupported,
    arrow_type,
    check_readable,
    conform,
    decoded_type,
    has_union,
    parse,
    resolve,
)
from gregor.columns.framing import (
    FAILFAST,
    PERMISSIVE,
    ColumnDecoders,
    GroupDecoder,
    MalformedRecord,
    TypedColumn,
    Undecodable,
    decode_framed,
    registry_client,
)

#: A column's decoding (any format's: the name is the one it had first).
AvroColumn = TypedColumn


class _Decoder:
    """The decoding state of one column in one process: parsed schemas, by writer id."""

    def __init__(self, spec: AvroColumn) -> None:
        self.spec = spec
        self.reader = parse(spec.schema)
        self.target = arrow_type(self.reader)
        self.writers: dict[int, tuple[AvroNode, bytes] | None] = {}
        self.sync = os.urandom(16)

    def writer(self, schema_id: int) -> tuple[AvroNode, bytes] | None:
        """The writer's parsed schema and container header, or None when the id is unknown or
        its schema cannot be read as the reader's."""
        if schema_id in self.writers:
            return self.writers[schema_id]
        from gregor.client.schema_registry import RegistryHTTPError

        try:
            got = registry_client(self.spec.registry_url).schema_by_id(schema_id)
        except RegistryHTTPError as e:
            if e.status != 404:
                raise
            got = None
        entry = None
        if got is not None and got.get("schemaType", "AVRO") == "AVRO":
            try:
                text = whole(
                    registry_client(self.spec.registry_url),
                    str(got["schema"]),
                    got.get("references") or (),
                )
                node = parse(text)
                check_readable(node, self.reader)
            except AvroUnsupported:
                node = None
            if node is not None:
                entry = (node, _container_header(text, self.sync))
        self.writers[schema_id] = entry
        return entry


_decoder = ColumnDecoders(_Decoder).get


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_PRIMITIVE_NAMES = frozenset(
    ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
)


def _for_decoding(schema: Any) -> Any:
    """The schema as polars' Avro reader takes it: without field defaults and docs (decoding
    a writer's datum never reads them; the resolution to the reader's schema uses the parsed
    schema, and polars' parser refuses some valid defaults, a double's 1.5), and with every
    reference to a named type replaced by a renamed copy of its definition (polars cannot
    follow a reference inside a union). Names do not change how a datum decodes."""
    named: dict[str, Any] = {}  # a named type's definition ("int" for an enum)
    copies = iter(range(1, 1 << 30))

    def walk(node: Any, namespace: str) -> Any:
        if isinstance(node, str):
            if node in _PRIMITIVE_NAMES:
                return node
            found = named.get(node) or named.get(f"{namespace}.{node}")
            if found is None:
                return node
            return found if isinstance(found, str) else rename(found)
        if isinstance(node, list):
            branches = [b for b in node if b != "null"]
            if len(branches) < 2:
                return [walk(n, namespace) for n in node]
            # Each branch a record of one field named as Spark names the members.
            members = iter(range(len(branches)))
            return [
                "null"
                if n == "null"
                else {
                    "type": "record",
                    "name": f"GregorMember{next(copies)}",
                    "fields": [{"name": f"member{next(members)}", "type": walk(n, namespace)}],
                }
                for n in node
            ]
        if not isinstance(node, dict):
            return node
        out = {k: v for k, v in node.items() if k not in ("default", "doc", "aliases")}
        kind = node.get("type")
        if out.get("logicalType") == "uuid" or str(out.get("logicalType")).startswith("time-"):
            del out["logicalType"]  # read as the string or number they are encoded as
        if kind == "map":
            # A map is encoded as an array of (string key, value) pairs.
            return {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": f"GregorMapEntry{next(copies)}",
                    "fields": [
                        {"name": "key", "type": "string"},
                        {"name": "value", "type": walk(node.get("values"), namespace)},
                    ],
                },
            }
        if kind == "enum" and "name" in node:
            # An enum's datum is its symbol's index, encoded as an int: decoded as one (polars
            # reads no enum inside a union), the symbols are applied after (conform).
            name = str(node["name"])
            ns = str(node.get("namespace", namespace) or "")
            full = name if "." in name or not ns else f"{ns}.{name}"
            named[full] = "int"
            named.setdefault(name, "int")
            return "int"
        if kind in ("record", "error", "fixed") and "name" in node:
            name = str(node["name"])
            ns = str(node.get("namespace", namespace) or "")
            full = name if "." in name or not ns else f"{ns}.{name}"
            ns = full.rpartition(".")[0]
            if kind in ("record", "error"):
                out["fields"] = [
                    {
                        **{k: v for k, v in f.items() if k not in ("default", "doc", "aliases")},
                        "type": walk(f.get("type"), ns),
                    }
                    for f in node.get("fields", ())
                    if isinstance(f, dict)
                ]
            named[full] = out
            named.setdefault(name, out)
            return out
        if isinstance(kind, (dict, list)) or (
            isinstance(kind, str)
            and kind
            not in (
                *_PRIMITIVE_NAMES,
                "array",
                "map",
            )
        ):
            out["type"] = walk(kind, namespace)
        if kind == "array":
            out["items"] = walk(node.get("items"), namespace)
        return out

    def rename(definition: dict[str, Any]) -> dict[str, Any]:
        copy = json.loads(json.dumps(definition))
        copy["name"] = f"{str(definition['name']).rpartition('.')[2]}_copy{next(copies)}"
        copy.pop("namespace", None)
        return copy

    return walk(schema, "")


def _container_header(schema: str, sync: bytes) -> bytes:
    """The container's header: its schema is a record of the frame (magic byte and id, a
    fixed of 5 bytes) and the writer's value, so a batch's framed values, as they lie in the
    Arrow buffer, are the block's datums without a copy to strip the frames."""
    try:
        writer = _for_decoding(json.loads(schema))
    except ValueError:
        writer = schema  # a bare primitive name
    framed = {
        "type": "record",
        "name": "GregorFramedValue",
        "fields": [
            {"name": "frame", "type": {"type": "fixed", "name": "GregorFrame", "size": 5}},
            {"name": "value", "type": writer},
        ],
    }
    meta = {b"avro.schema": json.dumps(framed).encode(), b"avro.codec": b"null"}
    out = bytearray(b"Obj\x01")
    out += _zigzag_varint(len(meta))
    for k, v in meta.items():
        out += _zigzag_varint(len(k)) + k + _zigzag_varint(len(v)) + v
    out += _zigzag_varint(0)
    return bytes(out) + sync


def _frames(values: pa.BinaryArray) -> tuple[pa.Buffer, np.ndarray]:
    """The bytes of ``values`` (frames, back to back in the Arrow buffer) and the frames'
    offsets in them."""
    n = len(values)
    offsets = np.frombuffer(
        values.buffers()[1], dtype=np.int32, count=n + 1, offset=values.offset * 4
    ).astype(np.int64)
    base = int(offsets[0])
    data = values.buffers()[2]
    return data.slice(base, int(offsets[-1]) - base), offsets - base


def _one_block(values: pa.BinaryArray, header: bytes, sync: bytes) -> tuple[bytes, np.ndarray]:
    """An object container of ``values`` in one block, and each value's datum length."""
    data, offsets = _frames(values)
    count = _zigzag_varint(len(values))
    block = b"".join((header, count, _zigzag_varint(data.size), memoryview(data), sync))
    return block, np.diff(offsets) - 5


def _container(values: pa.BinaryArray, header: bytes, sync: bytes) -> bytes:
    """An object container of ``values``, one block per value: ``0x02`` (one datum), the
    value's length (zigzag varint), the value, the sync."""
    n = len(values)
    data, offsets = _frames(values)
    body = np.frombuffer(data, dtype=np.uint8)
    starts = offsets[:-1]
    zz = np.diff(offsets) * 2
    width = 1 + (zz >= 1 << 7) + (zz >= 1 << 14) + (zz >= 1 << 21) + (zz >= 1 << 28)
    later = np.where(np.arange(n) > 0, 16, 0)  # the sync that ends the block before
    head = 1 + width + later
    head_starts = np.concatenate(([0], np.cumsum(head)[:-1]))
    fill = np.empty(int(head.sum()), dtype=np.uint8)
    sync_arr = np.frombuffer(sync, dtype=np.uint8)
    for t in range(16):
        fill[head_starts[1:] + t] = sync_arr[t]
    at = head_starts + later
    fill[at] = 2  # zigzag(1): one datum in the block
    for j in range(5):
        m = width > j
        byte = (zz[m] >> (7 * j)) & 0x7F
        byte |= np.where(width[m] > j + 1, 0x80, 0)
        fill[at[m] + 1 + j] = byte.astype(np.uint8)
    out = np.insert(body, np.repeat(starts, head), fill)
    return header + out.tobytes() + sync


def _polars_decode(container: bytes) -> pa.Table:
    import polars as pl

    try:
        return pl.read_avro(io.BytesIO(container)).to_arrow()
    except BaseException as e:  # polars raises ComputeError, or a Rust panic, on bad data
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise Undecodable(str(e)) from None


def _fastavro_decode(container: bytes, writer: AvroNode) -> pa.Table:
    """A container of one datum a block (the writer's schema holds a union of several types)
    decoded by fastavro, as :func:`decoded_type` of the writer."""
    import fastavro

    try:
        values = [r["value"] for r in fastavro.reader(io.BytesIO(container))]  # type: ignore[call-overload,index]
    except (ValueError, TypeError, KeyError, IndexError, EOFError, OverflowError) as e:
        raise Undecodable(str(e)) from None
    return pa.table({"value": pa.array(values, type=decoded_type(writer))})


def _value_column(table: pa.Table) -> pa.Array:
    """The ``value`` field of the framed records polars decoded."""
    return table.column("value").combine_chunks()


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    """How many bytes Avro's zigzag varint of each int64 takes (canonically)."""
    z = ((values << 1) ^ (values >> 63)).view(np.uint64)
    sizes = np.ones(len(z), dtype=np.int64)
    for k in range(1, 10):
        sizes += z >= np.uint64(1 << (7 * k))
    return sizes


def _ints(array: pa.Array) -> np.ndarray:
    if pa.types.is_date32(array.type) or pa.types.is_time32(array.type):
        array = array.view(pa.int32())
    elif pa.types.is_timestamp(array.type) or pa.types.is_time64(array.type):
        array = array.view(pa.int64())
    filled = pc.fill_null(array.cast(pa.int64()), 0)
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=np.int64)


def _canonical_sizes(node: AvroNode, array: pa.Array) -> np.ndarray | None:
    """The bytes each row of ``array`` (decoded with ``node``, as polars gives it) takes in
    Avro's canonical binary encoding (shortest varints, an array in one block), or None for a
    type this does not compute (decimals)."""
    n = len(array)
    if node.nullable:
        inner = _canonical_sizes(replace(node, nullable=False), array)
        if inner is None:
            return None
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        return 1 + np.where(valid, inner, 0)  # the branch index (0 or 1) takes one byte
    if node.logical == "decimal":
        return None
    kind = node.kind
    if kind == "boolean":
        return np.ones(n, dtype=np.int64)
    if kind in ("int", "long", "enum"):
        return _varint_sizes(_ints(array))
    if kind == "float":
        return np.full(n, 4, dtype=np.int64)
    if kind == "double":
        return np.full(n, 8, dtype=np.int64)
    if kind in ("string", "bytes", "fixed"):
        lengths = np.asarray(
            pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False),
            dtype=np.int64,
        )
        return lengths if kind == "fixed" else _varint_sizes(lengths) + lengths
    if kind == "record":
        assert isinstance(array, pa.StructArray)
        if array.offset != 0:
            array = pa.concat_arrays([array])
        total = np.zeros(n, dtype=np.int64)
        for i, f in enumerate(node.fields):
            part = _canonical_sizes(f.type, array.field(i))
            if part is None:
                return None
            total += part
        return total
    if kind == "array":
        assert node.items is not None
        if array.offset != 0:
            array = pa.concat_arrays([array])
        offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
        first, last = int(offsets[0]), int(offsets[-1])
        items = _canonical_sizes(node.items, array.values.slice(first, last - first))
        if items is None:
            return None
        cumulative = np.concatenate(([0], np.cumsum(items)))
        within = cumulative[offsets[1:] - first] - cumulative[offsets[:-1] - first]
        counts = np.diff(offsets)
        return np.where(counts > 0, _varint_sizes(counts) + within + 1, 1)
    if kind == "map":  # decoded as the array of key-value records it is encoded as
        assert node.items is not None
        entry = AvroNode(
            "record",
            fields=(AvroField("key", AvroNode("string")), AvroField("value", node.items)),
        )
        return _canonical_sizes(AvroNode("array", items=entry), array)
    return None


def _resolved(decoded: pa.Table, writer: AvroNode, dec: _Decoder) -> tuple[pa.Array, pa.Array]:
    raw = _value_column(decoded)
    # An enum index beyond its symbols: malformed, like bytes that do not decode.
    return raw, resolve(conform(raw, writer), writer, dec.reader)


def _decode_group(
    values: pa.BinaryArray, writer: AvroNode, header: bytes, dec: _Decoder, exact: bool = False
) -> tuple[pa.Array | None, np.ndarray]:
    """The group decoded and resolved to the reader (None when nothing decoded), and the
    positions (in ``values``) of the datums that did not decode.

    First the datums go back to back in one block (fast: polars pays per block). That is only
    right if each datum was read from exactly its own bytes: every row's canonical size equal
    to its datum's length proves it (a datum reads at least its canonical size, and the block
    holds exactly the lengths' sum). Otherwise (a writer that encodes longer than canonical, a
    decimal) the group is decoded ``exact``ly: one block per datum."""
    try:
        if has_union(writer):
            decoded = _fastavro_decode(_container(values, header, dec.sync), writer)
            if decoded.num_rows != len(values):
                raise Undecodable("row count")
            return _resolved(decoded, writer, dec)[1], np.array([], dtype=np.int64)
        if exact:
            decoded = _polars_decode(_container(values, header, dec.sync))
            if decoded.num_rows != len(values):
                raise Undecodable("row count")
            return _resolved(decoded, writer, dec)[1], np.array([], dtype=np.int64)
        container, lengths = _one_block(values, header, dec.sync)
        decoded = _polars_decode(container)
        if decoded.num_rows != len(values):
            raise Undecodable("row count")
        raw, out = _resolved(decoded, writer, dec)
        sizes = _canonical_sizes(writer, raw)
    except (Undecodable, ValueError, IndexError, pa.ArrowException):
        if len(values) == 1:
            if not exact:
                return _decode_group(values, writer, header, dec, exact=True)
            return None, np.array([0], dtype=np.int64)
        half = len(values) // 2
        a, bad_a = _decode_group(values.slice(0, half), writer, header, dec, exact)
        b, bad_b = _decode_group(values.slice(half), writer, header, dec, exact)
        parts = [x for x in (a, b) if x is not None]
        bad = np.concatenate((bad_a, bad_b + half))
        return (pa.concat_arrays(parts) if parts else None), bad
    if sizes is None or not np.array_equal(sizes, lengths):
        return _decode_group(values, writer, header, dec, exact=True)
    return out, np.array([], dtype=np.int64)


def column_decoder(spec: AvroColumn) -> tuple[pa.DataType, GroupDecoder]:
    """The reader schema's Arrow type and the decoder of one writer id's framed values."""
    dec = _decoder(spec)

    def group(
        schema_id: int, rows: np.ndarray, taken: pa.BinaryArray
    ) -> tuple[pa.Array | None, np.ndarray] | None:
        writer = dec.writer(schema_id)
        if writer is None:
            return None
        return _decode_group(taken, writer[0], writer[1], dec)

    return dec.target, group


def decode_column(
    values: pa.Array, spec: AvroColumn, topic: str, partition: int, offsets: pa.Array
) -> pa.Array:
    """``values`` (binary, framed Avro) as the reader schema's Arrow column."""
    target, group = column_decoder(spec)
    return decode_framed(values, spec, target, group, topic, partition, offsets)


def decode_batch(batch: pa.RecordBatch, columns: tuple[AvroColumn, ...]) -> pa.RecordBatch:
    """Spark's Kafka batch with its ``key`` and/or ``value`` decoded as ``columns`` say (each
    in its format: JSON Schema by :mod:`gregor.columns.json_columns`, Protobuf by
    :mod:`gregor.columns.protobuf_columns`)."""
    if not columns:
        return batch
    arrays = list(batch.columns)
    fields = list(batch.schema)
    topic = batch.column(batch.schema.get_field_index("topic"))
    part = batch.column(batch.schema.get_field_index("partition"))
    offsets = batch.column(batch.schema.get_field_index("offset"))
    t = topic[0].as_py() if batch.num_rows else ""
    p = part[0].as_py() if batch.num_rows else -1
    for spec in columns:
        i = batch.schema.get_field_index(spec.column)
        if spec.format == "json":
            from gregor.columns.json_columns import decode_column as decode_json

            arrays[i] = decode_json(batch.column(i), spec, t, p, offsets)
        elif spec.format == "protobuf":
            from gregor.columns.protobuf_columns import decode_column as decode_protobuf

            arrays[i] = decode_protobuf(batch.column(i), spec, t, p, offsets)
        else:
            arrays[i] = decode_column(batch.column(i), spec, t, p, offsets)
        fields[i] = pa.field(spec.column, arrays[i].type)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


__all__ = [
    "FAILFAST",
    "PERMISSIVE",
    "AvroColumn",
    "MalformedRecord",
    "TypedColumn",
    "column_decoder",
    "decode_batch",
    "decode_column",
    "registry_client",
]
