"""The sink's typed columns: a struct ``value`` (or ``key``) encoded as Confluent-framed Avro
with a subject's registered schema (``valueFormat avro`` on ``df.write`` / ``writeStream``).

The schema is the subject's version looked up once when the write is planned (latest, or the
pinned ``valueSchemaVersion``); each row is encoded with fastavro against it and framed with
the schema's id, as confluent-kafka's ``AvroSerializer`` frames it, so any Confluent
deserializer reads the records. A row that does not fit the schema fails the task naming the
column and the reason. (Encoding goes row by row: the registered schema, not the DataFrame's
types, decides the bytes, and a columnar Avro writer would write its own schema.) A map column
is written as the Avro map; a union column in Spark's shape (a struct of ``member<i>`` fields)
as the branch of its first non-null member (a named branch by its name, so a string is not
taken for an enum); a merged int/long or float/double union as the number it is.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import pyarrow as pa

from gregor.columns.avro_columns import AvroColumn
from gregor.columns.avro_schema import AvroNode, merged, parse
from gregor.spark.options import OptionError

_PARSED: dict[str, Any] = {}
_NODES: dict[str, AvroNode | None] = {}


def _node(schema: str) -> AvroNode | None:
    """The parsed schema when its rows need converting (it has a map or a union), else None."""
    if schema not in _NODES:
        node = parse(schema)
        _NODES[schema] = node if _needs_converting(node) else None
    return _NODES[schema]


def _needs_converting(node: AvroNode) -> bool:
    if node.kind in ("map", "union"):
        return True
    if node.items is not None:
        return _needs_converting(node.items)
    return any(_needs_converting(f.type) for f in node.fields)


def _to_avro(value: Any, node: AvroNode) -> Any:
    """A row's value (as Arrow's ``to_pylist`` gives it) as fastavro writes ``node``."""
    if value is None:
        return None
    if node.kind == "record":
        return {f.name: _to_avro(value.get(f.name), f.type) for f in node.fields}
    if node.kind == "array":
        assert node.items is not None
        return [_to_avro(v, node.items) for v in value]
    if node.kind == "map":
        assert node.items is not None
        pairs = value.items() if isinstance(value, dict) else value
        return {k: _to_avro(v, node.items) for k, v in pairs}
    if node.kind == "union" and merged(node) is None:
        for i, branch in enumerate(node.branches):
            member = value.get(f"member{i}")
            if member is not None:
                out = _to_avro(member, branch)
                return (branch.name, out) if branch.name else out
        return None
    return value


def _parsed(schema: str) -> Any:
    import fastavro

    got = _PARSED.get(schema)
    if got is None:
        got = _PARSED[schema] = fastavro.parse_schema(json.loads(schema))
    return got


def encode_column(array: pa.Array, spec: AvroColumn) -> pa.Array:
    """``array`` (the struct column) as a binary column of framed datums; nulls stay null."""
    import fastavro

    parsed = _parsed(spec.schema)
    node = _node(spec.schema)
    prefix = b"\x00" + struct.pack(">I", spec.schema_id)
    out: list[bytes | None] = []
    buf = io.BytesIO()
    for row in array.to_pylist():
        if row is None:
            out.append(None)
            continue
        buf.seek(0)
        buf.truncate()
        buf.write(prefix)
        try:
            fastavro.schemaless_writer(buf, parsed, row if node is None else _to_avro(row, node))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise OptionError(
                f"the {spec.column} column does not fit the subject {spec.subject} version "
                f"{spec.version}: {e}"
            ) from None
        out.append(buf.getvalue())
    return pa.array(out, pa.binary())


__all__ = ["encode_column"]
