"""Avro schemas as the Arrow types of the columns they decode into, and Avro's schema
resolution (a writer's schema read as a reader's) over Arrow arrays.

The type mapping is Spark's ``from_avro``'s (``SchemaConverters``; the Spark types themselves
are ``gregor.spark.avro_schema``'s): record -> struct, enum ->
string, array -> array, map -> map<string, T>, fixed and bytes -> binary, ``["null", T]`` -> a
nullable T, a union of several types -> a struct with one field per non-null branch, ``member0``,
``member1``, ... (the branch the datum took set, the others null), except ``int`` with ``long``
(long) and ``float`` with ``double`` (double); the logical types date, timestamp-millis/-micros
(timestamp), local-timestamp-* (timestamp_ntz), decimal and uuid (string). Recursive records are
refused with :class:`AvroUnsupported` (a Spark type cannot nest without end).

Resolution follows the Avro specification: a reader's record field is the writer's field of
the same name (or one of its aliases), else its default; a writer's field the reader lacks is
dropped; int -> long -> float -> double and string <-> bytes promote; a map's values resolve as
its values; a union reads as a union of the same number of branches, each readable as the
reader's. Every column is nullable (Spark's Kafka columns are).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


class AvroUnsupported(ValueError):
    """An Avro schema the typed columns cannot decode (yet)."""


@dataclass(frozen=True)
class AvroField:
    name: str
    type: AvroNode
    aliases: tuple[str, ...] = ()
    has_default: bool = False
    default: Any = None


@dataclass(frozen=True)
class AvroNode:
    """One Avro type, normalized: ``kind`` is a primitive name, ``record``, ``enum``,
    ``array``, ``map``, ``union`` (of several non-null ``branches``), ``fixed``; ``logical`` its
    logical type; ``nullable`` for a union with ``"null"``."""

    kind: str
    nullable: bool = False
    logical: str | None = None
    precision: int = 0
    scale: int = 0
    fields: tuple[AvroField, ...] = ()
    items: AvroNode | None = None  # an array's items, a map's values
    branches: tuple[AvroNode, ...] = ()
    name: str = ""
    symbols: tuple[str, ...] = field(default=())


_PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


def parse(text: str) -> AvroNode:
    """The normalized form of an Avro schema's JSON text."""
    try:
        obj = json.loads(text)
    except ValueError:
        obj = text  # a bare primitive name: "string"
    return _Parser().node(obj, "")


class _Parser:
    def __init__(self) -> None:
        self.named: dict[str, AvroNode] = {}
        self.open: set[str] = set()

    def _full(self, name: str, namespace: str) -> str:
        return name if "." in name or not namespace else f"{namespace}.{name}"

    def node(self, obj: Any, namespace: str) -> AvroNode:
        if isinstance(obj, str):
            if obj in _PRIMITIVES:
                return AvroNode(obj)
            full = self._full(obj, namespace)
            if full in self.open or obj in self.open:
                raise AvroUnsupported(
                    f"the recursive record {obj!r} (a Spark type cannot nest without end)"
                )
            found = self.named.get(full) or self.named.get(obj)
            if found is None:
                raise AvroUnsupported(
                    f"unknown type {obj!r} (schema references are not supported yet)"
                )
            return found
        if isinstance(obj, list):
            branches = [b for b in obj if b != "null"]
            if not branches:
                raise AvroUnsupported(f"the union {json.dumps(obj)} of no type but null")
            if len(branches) == 1:
                inner = self.node(branches[0], namespace)
                return _with(inner, nullable=inner.nullable or len(obj) > 1)
            nodes = tuple(self.node(b, namespace) for b in branches)
            if any(b.kind == "union" or b.nullable for b in nodes):
                raise AvroUnsupported(f"the union {json.dumps(obj)[:80]} (a union in a union)")
            return AvroNode("union", nullable=len(obj) > len(branches), branches=nodes)
        if not isinstance(obj, dict) or "type" not in obj:
            raise AvroUnsupported(f"not an Avro schema: {json.dumps(obj)[:80]}")
        kind = obj["type"]
        logical = obj.get("logicalType")
        if kind in _PRIMITIVES or isinstance(kind, (list, dict)):
            if isinstance(kind, (list, dict)):
                return self.node(kind, namespace)
            return AvroNode(
                kind,
                logical=logical if isinstance(logical, str) else None,
                precision=int(obj.get("precision", 0) or 0),
                scale=int(obj.get("scale", 0) or 0),
            )
        if kind == "array":
            return AvroNode("array", items=self.node(obj.get("items"), namespace))
        if kind == "map":
            return AvroNode("map", items=self.node(obj.get("values"), namespace))
        if kind not in ("record", "error", "enum", "fixed"):
            return self.node(kind, namespace)  # a named type's name as the type
        name = str(obj.get("name", ""))
        ns = str(obj.get("namespace", namespace) or "")
        full = self._full(name, ns)
        ns = full.rpartition(".")[0]
        if kind == "enum":
            out = AvroNode("enum", name=full, symbols=tuple(obj.get("symbols", ())))
        elif kind == "fixed":
            out = AvroNode(
                "fixed",
                name=full,
                logical=logical if isinstance(logical, str) else None,
                precision=int(obj.get("precision", 0) or 0),
                scale=int(obj.get("scale", 0) or 0),
            )
        else:
            self.open.add(full)
            fields = tuple(
                AvroField(
                    str(f["name"]),
                    self.node(f["type"], ns),
                    tuple(f.get("aliases", ())),
                    "default" in f,
                    f.get("default"),
                )
                for f in obj.get("fields", ())
            )
            self.open.discard(full)
            out = AvroNode("record", name=full, fields=fields)
        self.named[full] = out
        self.named.setdefault(name, out)
        return out


def _with(node: AvroNode, **changes: Any) -> AvroNode:
    from dataclasses import replace

    return replace(node, **changes)


def merged(node: AvroNode) -> str | None:
    """For a union of ``int`` and ``long`` (``float`` and ``double``), the kind Spark reads it
    as, ``long`` (``double``), as ``SchemaConverters`` does; else None."""
    if node.kind != "union" or len(node.branches) != 2:
        return None
    kinds = {b.kind for b in node.branches if b.logical is None}
    return {frozenset(("int", "long")): "long", frozenset(("float", "double")): "double"}.get(
        frozenset(kinds)
    )


def arrow_type(node: AvroNode) -> pa.DataType:
    """The Arrow type of the column ``node`` decodes into (the mapping in the module's
    docstring; ``gregor.spark.avro_schema.spark_type`` is its Spark type)."""
    if node.logical == "decimal" and node.kind in ("bytes", "fixed"):
        return pa.decimal128(node.precision, node.scale)
    if node.logical == "date" and node.kind == "int":
        return pa.date32()
    if node.logical in ("timestamp-millis", "timestamp-micros") and node.kind == "long":
        return pa.timestamp("us", tz="UTC")
    if node.logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return pa.timestamp("us")
    simple = {
        "boolean": pa.bool_(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "bytes": pa.binary(),
        "fixed": pa.binary(),
        "string": pa.string(),
        "enum": pa.string(),
    }
    if node.kind in simple:
        return simple[node.kind]
    if node.kind == "array":
        assert node.items is not None
        return pa.list_(pa.field("element", arrow_type(node.items)))
    if node.kind == "map":
        assert node.items is not None
        return pa.map_(pa.string(), arrow_type(node.items))
    if node.kind == "union":
        kind = merged(node)
        if kind is not None:
            return arrow_type(AvroNode(kind))
        return pa.struct(
            [pa.field(f"member{i}", arrow_type(b)) for i, b in enumerate(node.branches)]
        )
    if node.kind == "record":
        return pa.struct([pa.field(f.name, arrow_type(f.type)) for f in node.fields])
    raise AvroUnsupported(f"the Avro type {node.kind}")


def decoded_type(node: AvroNode) -> pa.DataType:
    """The Arrow type of ``node`` as the decoders give it (:mod:`gregor.columns.avro_columns`
    decodes an enum as its index, a map as a list of key-value records, a union as a struct of
    its members), before :func:`conform`."""
    if node.kind == "enum":
        return pa.int32()
    if node.kind == "array":
        assert node.items is not None
        return pa.list_(decoded_type(node.items))
    if node.kind == "map":
        assert node.items is not None
        return pa.list_(pa.struct([("key", pa.string()), ("value", decoded_type(node.items))]))
    if node.kind == "union":
        return pa.struct(
            [pa.field(f"member{i}", decoded_type(b)) for i, b in enumerate(node.branches)]
        )
    if node.kind == "record":
        return pa.struct([pa.field(f.name, decoded_type(f.type)) for f in node.fields])
    return arrow_type(node)


def has_union(node: AvroNode) -> bool:
    """Whether ``node`` holds a union of several types (which polars' reader cannot decode)."""
    if node.kind == "union":
        return True
    if node.items is not None:
        return has_union(node.items)
    return any(has_union(f.type) for f in node.fields)


def conform(array: pa.Array, node: AvroNode) -> pa.Array:
    """``array`` (as polars' Avro reader gives it: large strings and lists, dictionary enums,
    millisecond timestamps) as :func:`arrow_type` of ``node``."""
    if node.kind == "record":
        assert isinstance(array, pa.StructArray)
        if array.offset != 0:
            array = pa.concat_arrays([array])
        children = [conform(array.field(i), f.type) for i, f in enumerate(node.fields)]
        return pa.StructArray.from_arrays(
            children,
            fields=[pa.field(f.name, c.type) for f, c in zip(node.fields, children, strict=True)],
            mask=_null_mask(array),
        )
    if node.kind == "array":
        assert node.items is not None
        lst = array if array.offset == 0 else pa.concat_arrays([array])
        return pa.ListArray.from_arrays(
            lst.offsets.cast(pa.int32()),
            conform(lst.values, node.items),
            type=arrow_type(node),
            mask=_null_mask(lst),
        )
    if node.kind == "map":
        assert node.items is not None
        lst = array if array.offset == 0 else pa.concat_arrays([array])
        entries = lst.values
        if entries.offset != 0:
            entries = pa.concat_arrays([entries])
        return pa.MapArray.from_arrays(
            lst.offsets.cast(pa.int32()),
            entries.field(0).cast(pa.string()),
            conform(entries.field(1), node.items),
            type=arrow_type(node),
            mask=_null_mask(lst),
        )
    if node.kind == "union":
        assert isinstance(array, pa.StructArray)
        if array.offset != 0:
            array = pa.concat_arrays([array])
        members = [conform(array.field(i), b) for i, b in enumerate(node.branches)]
        kind = merged(node)
        if kind is not None:
            target = arrow_type(AvroNode(kind))
            return pc.coalesce(*(m.cast(target) for m in members))
        return pa.StructArray.from_arrays(
            members,
            fields=[pa.field(f"member{i}", m.type) for i, m in enumerate(members)],
            mask=_null_mask(array),
        )
    if node.kind == "enum":
        # decoded as the symbol's index (gregor.columns.avro_columns decodes enums as ints)
        indices = array.cast(pa.int32())
        if pc.max(indices).as_py() is not None and not (
            0 <= pc.min(indices).as_py() and pc.max(indices).as_py() < len(node.symbols)
        ):
            raise ValueError(f"an index beyond the {len(node.symbols)} symbols of {node.name}")
        return pa.array(node.symbols, type=pa.string()).take(indices)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    target = arrow_type(node)
    return array if array.type == target else array.cast(target)


def _null_mask(array: pa.Array) -> pa.Array | None:
    if array.null_count == 0:
        return None
    return pc.is_null(array)


_PROMOTIONS = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("long", "float"),
    ("long", "double"),
    ("float", "double"),
    ("string", "bytes"),
    ("bytes", "string"),
}


def check_readable(writer: AvroNode, reader: AvroNode, where: str = "") -> None:
    """Raise :class:`AvroUnsupported` unless ``writer``'s data can be read as ``reader``."""
    if reader.kind == "record":
        if writer.kind != "record":
            raise AvroUnsupported(f"{where or 'the value'}: a {writer.kind} is not a record")
        by_name = {f.name: f for f in writer.fields}
        for f in reader.fields:
            w = by_name.get(f.name) or next((by_name[a] for a in f.aliases if a in by_name), None)
            if w is None:
                if not f.has_default:
                    raise AvroUnsupported(
                        f"field {where + f.name!r} is not in the writer's schema and has no default"
                    )
            else:
                check_readable(w.type, f.type, where + f.name + ".")
        return
    if reader.kind in ("array", "map"):
        if writer.kind != reader.kind:
            raise AvroUnsupported(f"{where or 'the value'}: a {writer.kind} is not a {reader.kind}")
        assert writer.items is not None and reader.items is not None
        check_readable(writer.items, reader.items, where)
        return
    if reader.kind == "union" or writer.kind == "union":
        if (
            writer.kind != reader.kind
            or len(writer.branches) != len(reader.branches)
            or merged(writer) != merged(reader)
        ):
            raise AvroUnsupported(
                f"{where.rstrip('.') or 'the value'}: a {_shape(writer)} cannot be read as a "
                f"{_shape(reader)} (a union reads as a union of as many branches)"
            )
        for i, pair in enumerate(zip(writer.branches, reader.branches, strict=True)):
            check_readable(pair[0], pair[1], f"{where}member{i}.")
        return
    if writer.kind != reader.kind and (writer.kind, reader.kind) not in _PROMOTIONS:
        raise AvroUnsupported(
            f"{where.rstrip('.') or 'the value'}: a {writer.kind} cannot be read as a {reader.kind}"
        )


def _shape(node: AvroNode) -> str:
    if node.kind == "union":
        return "union of " + ", ".join(b.kind for b in node.branches)
    return node.kind


def resolve(array: pa.Array, writer: AvroNode, reader: AvroNode) -> pa.Array:
    """``array`` (conformed to ``writer``) read as ``reader``: Avro's schema resolution.
    :func:`check_readable` has accepted the pair."""
    if reader.kind == "record":
        assert isinstance(array, pa.StructArray)
        index = {f.name: i for i, f in enumerate(writer.fields)}
        children = []
        for f in reader.fields:
            i = index.get(f.name)
            if i is None:
                i = next((index[a] for a in f.aliases if a in index), None)
            if i is None:
                children.append(_constant(f.default, f.type, len(array)))
            else:
                children.append(resolve(array.field(i), writer.fields[i].type, f.type))
        return pa.StructArray.from_arrays(
            children,
            fields=[pa.field(f.name, arrow_type(f.type)) for f in reader.fields],
            mask=_null_mask(array),
        )
    if reader.kind == "array":
        assert isinstance(array, pa.ListArray)
        assert writer.items is not None and reader.items is not None
        flat = array if array.offset == 0 else pa.concat_arrays([array])
        values = resolve(flat.values, writer.items, reader.items)
        return pa.ListArray.from_arrays(
            flat.offsets, values, type=arrow_type(reader), mask=_null_mask(flat)
        )
    if reader.kind == "map":
        assert isinstance(array, pa.MapArray)
        assert writer.items is not None and reader.items is not None
        flat = array if array.offset == 0 else pa.concat_arrays([array])
        items = resolve(flat.items, writer.items, reader.items)
        return pa.MapArray.from_arrays(
            flat.offsets, flat.keys, items, type=arrow_type(reader), mask=_null_mask(flat)
        )
    if reader.kind == "union" and merged(reader) is None:
        assert isinstance(array, pa.StructArray)
        members = [
            resolve(array.field(i), pair[0], pair[1])
            for i, pair in enumerate(zip(writer.branches, reader.branches, strict=True))
        ]
        return pa.StructArray.from_arrays(
            members,
            fields=[pa.field(f"member{i}", m.type) for i, m in enumerate(members)],
            mask=_null_mask(array),
        )
    target = arrow_type(reader)
    return array if array.type == target else array.cast(target)


def _constant(default: Any, node: AvroNode, n: int) -> pa.Array:
    target = arrow_type(node)
    if default is None:
        return pa.nulls(n, target)
    if node.kind in ("bytes", "fixed") and isinstance(default, str):
        default = default.encode("latin-1")  # Avro's JSON form of bytes: code points 0-255
    one = pa.array([default], type=target)
    return one.take(pa.array(np.zeros(n, dtype=np.int32)))


__all__ = [
    "AvroNode",
    "AvroUnsupported",
    "arrow_type",
    "check_readable",
    "conform",
    "decoded_type",
    "has_union",
    "merged",
    "parse",
    "resolve",
]
