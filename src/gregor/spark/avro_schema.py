"""Avro schemas as the Spark and Arrow types of the columns they decode into, and Avro's schema
resolution (a writer's schema read as a reader's) over Arrow arrays.

The type mapping is Spark's ``from_avro``'s (``SchemaConverters``): record -> struct, enum ->
string, array -> array, fixed and bytes -> binary, ``["null", T]`` -> a nullable T, the logical
types date, timestamp-millis/-micros (timestamp), local-timestamp-* (timestamp_ntz), decimal and
uuid (string). Maps, unions of several types and recursive records are refused with
:class:`AvroUnsupported` (the decoder underneath, polars', reads neither maps nor such unions).

Resolution follows the Avro specification: a reader's record field is the writer's field of
the same name (or one of its aliases), else its default; a writer's field the reader lacks is
dropped; int -> long -> float -> double and string <-> bytes promote. Every column is nullable
(Spark's Kafka columns are).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)


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
    ``array``, ``fixed``; ``logical`` its logical type; ``nullable`` for ``["null", T]``."""

    kind: str
    nullable: bool = False
    logical: str | None = None
    precision: int = 0
    scale: int = 0
    fields: tuple[AvroField, ...] = ()
    items: AvroNode | None = None
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
                raise AvroUnsupported(f"recursive type {obj!r}")
            found = self.named.get(full) or self.named.get(obj)
            if found is None:
                raise AvroUnsupported(
                    f"unknown type {obj!r} (schema references are not supported yet)"
                )
            return found
        if isinstance(obj, list):
            branches = [b for b in obj if b != "null"]
            if len(branches) != 1 or len(obj) > 2:
                raise AvroUnsupported(
                    f"a union of {json.dumps(obj)} (only a type with null is supported)"
                )
            inner = self.node(branches[0], namespace)
            return _with(inner, nullable=True)
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
            raise AvroUnsupported("Avro maps")
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


def spark_type(node: AvroNode) -> DataType:
    if node.logical == "decimal" and node.kind in ("bytes", "fixed"):
        return DecimalType(node.precision, node.scale)
    if node.logical == "date" and node.kind == "int":
        return DateType()
    if node.logical in ("timestamp-millis", "timestamp-micros") and node.kind == "long":
        return TimestampType()
    if node.logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return TimestampNTZType()
    simple: dict[str, DataType] = {
        "boolean": BooleanType(),
        "int": IntegerType(),
        "long": LongType(),
        "float": FloatType(),
        "double": DoubleType(),
        "bytes": BinaryType(),
        "fixed": BinaryType(),
        "string": StringType(),
        "enum": StringType(),
    }
    if node.kind in simple:
        return simple[node.kind]
    if node.kind == "array":
        assert node.items is not None
        return ArrayType(spark_type(node.items), True)
    if node.kind == "record":
        return StructType([StructField(f.name, spark_type(f.type), True) for f in node.fields])
    raise AvroUnsupported(f"the Avro type {node.kind}")


def arrow_type(node: AvroNode) -> pa.DataType:
    """The Arrow type Spark expects for :func:`spark_type` (``to_arrow_schema``'s)."""
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
    if node.kind == "record":
        return pa.struct([pa.field(f.name, arrow_type(f.type)) for f in node.fields])
    raise AvroUnsupported(f"the Avro type {node.kind}")


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
    if node.kind == "enum":
        # decoded as the symbol's index (gregor.spark.avro_columns decodes enums as ints)
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
    if reader.kind == "array":
        if writer.kind != "array":
            raise AvroUnsupported(f"{where or 'the value'}: a {writer.kind} is not an array")
        assert writer.items is not None and reader.items is not None
        check_readable(writer.items, reader.items, where)
        return
    if writer.kind != reader.kind and (writer.kind, reader.kind) not in _PROMOTIONS:
        raise AvroUnsupported(
            f"{where.rstrip('.') or 'the value'}: a {writer.kind} cannot be read as a {reader.kind}"
        )


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
    "parse",
    "resolve",
    "spark_type",
]
