"""The sink's typed columns: a struct ``value`` (or ``key``) encoded as Confluent-framed Avro
with a subject's registered schema (``valueFormat avro`` on ``df.write`` / ``writeStream``).

The schema is the subject's version looked up once when the write is planned (latest, or the
pinned ``valueSchemaVersion``); each row is encoded with fastavro against it and framed with
the schema's id, as confluent-kafka's ``AvroSerializer`` frames it, so any Confluent
deserializer reads the records. A row that does not fit the schema fails the task naming the
column and the reason. (Encoding goes row by row: the registered schema, not the DataFrame's
types, decides the bytes, and a columnar Avro writer would write its own schema.)
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from gregor.spark.avro_columns import AvroColumn
from gregor.spark.options import OptionError

_PARSED: dict[str, Any] = {}


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
            fastavro.schemaless_writer(buf, parsed, row)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise OptionError(
                f"the {spec.column} column does not fit the subject {spec.subject} version "
                f"{spec.version}: {e}"
            ) from None
        out.append(buf.getvalue())
    return pa.array(out, pa.binary())


def encode_batches(batches: Iterator[Any], columns: tuple[AvroColumn, ...]) -> Iterator[Any]:
    """The Arrow batches with their ``columns`` encoded."""
    for batch in batches:
        arrays = list(batch.columns)
        fields = list(batch.schema)
        for spec in columns:
            i = batch.schema.get_field_index(spec.column)
            arrays[i] = encode_column(batch.column(i), spec)
            fields[i] = pa.field(spec.column, pa.binary())
        yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


__all__ = ["encode_batches", "encode_column"]
