"""Confluent-framed Avro keys and values decoded into typed Arrow columns, batch at a time.

A framed value is a magic byte 0, the writer's schema id (4 bytes, big-endian) and one Avro
datum. For a batch the frames are checked with numpy over the Arrow buffers (no per-row Python
object); the rows are grouped by writer id; each group becomes one Avro object container in
memory, one block per datum (so each datum keeps its own bounds, as Confluent's deserializer
reads one datum per value and ignores what follows it), which polars' Avro reader (compiled)
decodes into Arrow; the result is resolved from the writer's schema to the reader's (the
subject's version the query planned with: :mod:`gregor.spark.avro_schema`) and the rows are put
back in order. A null value stays null.

A value that is not a frame, names an id the registry does not have, or does not decode, is a
*malformed record*: with ``mode`` FAILFAST (the default, as Spark's ``from_avro``) the task
fails naming its topic, partition and offset; with PERMISSIVE it reads as null. Decoding
failures are found by halving the group (one bad datum costs log2(n) decodes, not n).
"""

from __future__ import annotations

import io
import json
import os
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from gregor.client.schema_registry import RegistryClient
from gregor.spark.avro_schema import (
    AvroNode,
    AvroUnsupported,
    arrow_type,
    check_readable,
    conform,
    parse,
    resolve,
)

FAILFAST = "FAILFAST"
PERMISSIVE = "PERMISSIVE"


class MalformedRecord(ValueError):
    """FAILFAST met a record it cannot decode."""


@dataclass(frozen=True)
class AvroColumn:
    """How one column (``key`` or ``value``) is decoded: the reader's schema (the subject's
    version resolved when the query was planned) and where the writers' schemas are."""

    column: str
    registry_url: str
    subject: str
    version: int
    schema_id: int
    schema: str
    mode: str = FAILFAST


_CLIENTS: dict[str, RegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def registry_client(url: str) -> RegistryClient:
    """One client (and its id cache) per registry per process: a Spark worker reuses it."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(url)
        if client is None:
            client = _CLIENTS[url] = RegistryClient(url)
        return client


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
            text = str(got["schema"])
            try:
                node = parse(text)
                check_readable(node, self.reader)
            except AvroUnsupported:
                node = None
            if node is not None:
                entry = (node, _container_header(text, self.sync))
        self.writers[schema_id] = entry
        return entry


_DECODERS: dict[AvroColumn, _Decoder] = {}


def _decoder(spec: AvroColumn) -> _Decoder:
    with _CLIENTS_LOCK:
        d = _DECODERS.get(spec)
        if d is None:
            d = _DECODERS[spec] = _Decoder(spec)
        return d


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
            return [walk(n, namespace) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: v for k, v in node.items() if k not in ("default", "doc", "aliases")}
        kind = node.get("type")
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
    try:
        schema = json.dumps(_for_decoding(json.loads(schema)))
    except ValueError:
        pass  # a bare primitive name
    meta = {b"avro.schema": schema.encode(), b"avro.codec": b"null"}
    out = bytearray(b"Obj\x01")
    out += _zigzag_varint(len(meta))
    for k, v in meta.items():
        out += _zigzag_varint(len(k)) + k + _zigzag_varint(len(v)) + v
    out += _zigzag_varint(0)
    return bytes(out) + sync


def _container(values: pa.BinaryArray, header: bytes, sync: bytes) -> bytes:
    """An object container of ``values`` (each a frame, 5 bytes before its datum), one block
    per datum: ``0x02`` (one datum), the datum's length (zigzag varint), the datum, the sync."""
    n = len(values)
    offsets = np.frombuffer(
        values.buffers()[1], dtype=np.int32, count=n + 1, offset=values.offset * 4
    )
    base = int(offsets[0])
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)[base : int(offsets[-1])]
    starts = offsets[:-1] - base
    keep = np.ones(len(data), dtype=bool)
    for j in range(5):
        keep[starts + j] = False
    body = data[keep]
    lengths = np.diff(offsets).astype(np.int64) - 5
    datum_starts = starts - 5 * np.arange(n, dtype=np.int64)
    zz = lengths * 2
    width = 1 + (zz >= 1 << 7) + (zz >= 1 << 14) + (zz >= 1 << 21) + (zz >= 1 << 28)
    head = 1 + width + np.where(np.arange(n) > 0, 16, 0)  # sync of the block before, count, size
    head_starts = np.concatenate(([0], np.cumsum(head)[:-1]))
    fill = np.empty(int(head.sum()), dtype=np.uint8)
    sync_arr = np.frombuffer(sync, dtype=np.uint8)
    later = head_starts[1:]
    for t in range(16):
        fill[later + t] = sync_arr[t]
    at = head_starts + np.where(np.arange(n) > 0, 16, 0)
    fill[at] = 2  # zigzag(1): one datum in the block
    for j in range(5):
        m = width > j
        byte = (zz[m] >> (7 * j)) & 0x7F
        byte |= np.where(width[m] > j + 1, 0x80, 0)
        fill[at[m] + 1 + j] = byte.astype(np.uint8)
    out = np.insert(body, np.repeat(datum_starts, head), fill)
    return header + out.tobytes() + sync


def _polars_decode(container: bytes) -> pa.Table:
    import polars as pl

    try:
        return pl.read_avro(io.BytesIO(container)).to_arrow()
    except BaseException as e:  # polars raises ComputeError, or a Rust panic, on bad data
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        raise _Undecodable(str(e)) from None


class _Undecodable(Exception):
    pass


def _as_struct(table: pa.Table) -> pa.StructArray:
    table = table.combine_chunks()
    return pa.StructArray.from_arrays(
        [c.chunk(0) if c.num_chunks else pa.array([], c.type) for c in table.columns],
        names=table.column_names,
    )


def _decode_group(
    values: pa.BinaryArray, writer: AvroNode, header: bytes, dec: _Decoder
) -> tuple[pa.Array | None, np.ndarray]:
    """The group decoded and resolved to the reader (None when nothing decoded), and the
    positions (in ``values``) of the datums that did not decode."""
    try:
        decoded = _polars_decode(_container(values, header, dec.sync))
        if decoded.num_rows != len(values):
            raise _Undecodable("row count")
        if writer.kind == "record":
            array: pa.Array = _as_struct(decoded)
        else:
            array = decoded.column(0).combine_chunks()
        # An enum index beyond its symbols, a decimal too wide: malformed, like bytes that do
        # not decode.
        return resolve(conform(array, writer), writer, dec.reader), np.array([], dtype=np.int64)
    except (_Undecodable, ValueError, IndexError, pa.ArrowException):
        if len(values) == 1:
            return None, np.array([0], dtype=np.int64)
        half = len(values) // 2
        a, bad_a = _decode_group(values.slice(0, half), writer, header, dec)
        b, bad_b = _decode_group(values.slice(half), writer, header, dec)
        parts = [x for x in (a, b) if x is not None]
        bad = np.concatenate((bad_a, bad_b + half))
        return (pa.concat_arrays(parts) if parts else None), bad


def decode_column(
    values: pa.Array, spec: AvroColumn, topic: str, partition: int, offsets: pa.Array
) -> pa.Array:
    """``values`` (binary, framed Avro) as the reader schema's Arrow column."""
    dec = _decoder(spec)
    n = len(values)
    if n == 0:
        return pa.array([], type=dec.target)
    if values.offset != 0 or not isinstance(values, pa.BinaryArray):
        values = pa.concat_arrays([values.cast(pa.binary())])
    offs = np.frombuffer(values.buffers()[1], dtype=np.int32, count=n + 1)
    data_buf = values.buffers()[2]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    )
    lengths = np.diff(offs)
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    framed = valid & (lengths >= 5)
    starts = np.where(framed, offs[:-1], 0)
    if len(data):
        framed &= data[np.minimum(starts, len(data) - 1)] == 0
    ids = np.zeros(n, dtype=np.int64)
    for j in range(1, 5):
        ids = (ids << 8) | np.where(framed, data[np.minimum(starts + j, max(len(data) - 1, 0))], 0)
    bad: list[np.ndarray] = [np.nonzero(valid & ~framed)[0]]
    pieces: list[pa.Array] = []
    order: list[np.ndarray] = []
    rows = np.nonzero(framed)[0]
    for schema_id in np.unique(ids[rows]):
        group = rows[ids[rows] == schema_id]
        writer = dec.writer(int(schema_id))
        if writer is None:
            bad.append(group)
            continue
        taken = values.take(pa.array(group)) if len(group) != n else values
        decoded, failed = _decode_group(taken, writer[0], writer[1], dec)
        if len(failed):
            bad.append(group[failed])
            group = np.delete(group, failed)
        if decoded is not None and len(group):
            pieces.append(decoded)
            order.append(group)
    wrong = np.sort(np.concatenate(bad))
    if len(wrong) and spec.mode == FAILFAST:
        first = int(wrong[0])
        raise MalformedRecord(
            f"Malformed records are detected in record parsing of {spec.column} at "
            f"{topic}-{partition} offset {offsets[first].as_py()} (the subject {spec.subject}, "
            f"version {spec.version}). Current parse Mode: FAILFAST. To process malformed "
            "records as null result, try setting the option 'mode' as 'PERMISSIVE'."
        )
    nulls = np.setdiff1d(np.arange(n), np.concatenate(order) if order else np.zeros(0, np.int64))
    if len(nulls):
        pieces.append(pa.nulls(len(nulls), dec.target))
        order.append(nulls)
    combined = pa.concat_arrays(pieces) if len(pieces) != 1 else pieces[0]
    position = np.concatenate(order)
    if len(order) == 1 and np.array_equal(position, np.arange(n)):
        return combined
    inverse = np.empty(n, dtype=np.int64)
    inverse[position] = np.arange(n)
    return combined.take(pa.array(inverse))


def decode_batch(batch: pa.RecordBatch, columns: tuple[AvroColumn, ...]) -> pa.RecordBatch:
    """Spark's Kafka batch with its ``key`` and/or ``value`` decoded as ``columns`` say."""
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
        arrays[i] = decode_column(batch.column(i), spec, t, p, offsets)
        fields[i] = pa.field(spec.column, arrays[i].type)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


__all__ = [
    "FAILFAST",
    "PERMISSIVE",
    "AvroColumn",
    "MalformedRecord",
    "decode_batch",
    "decode_column",
    "registry_client",
]
