"""The sink's typed columns, whatever their format: the struct ``key`` / ``value`` columns of the
Arrow batches a write task gets encoded as Confluent-framed Avro (:mod:`gregor.spark.avro_encode`),
JSON Schema (:mod:`gregor.spark.json_encode`) or Protobuf (:mod:`gregor.spark.protobuf_encode`),
and, when the write is planned, the JSON and Protobuf columns' Spark types checked against their
schemas (the Avro ones are checked in :func:`gregor.spark.avro_options.check_sink_columns`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.types import DataType, StructType

from gregor.columns.framing import TypedColumn
from gregor.spark.options import OptionError


def encode_column(array: pa.Array, spec: TypedColumn) -> pa.Array:
    """``array`` (the struct column) as a binary column of framed values of ``spec.format``."""
    if spec.format == "json":
        from gregor.spark import json_encode

        return json_encode.encode_column(array, spec)
    if spec.format == "protobuf":
        from gregor.spark import protobuf_encode

        return protobuf_encode.encode_column(array, spec)
    from gregor.spark import avro_encode

    return avro_encode.encode_column(array, spec)


def encode_batches(batches: Iterator[Any], columns: tuple[TypedColumn, ...]) -> Iterator[Any]:
    """The Arrow batches with their ``columns`` encoded."""
    for batch in batches:
        arrays = list(batch.columns)
        fields = list(batch.schema)
        for spec in columns:
            i = batch.schema.get_field_index(spec.column)
            arrays[i] = encode_column(batch.column(i), spec)
            fields[i] = pa.field(spec.column, pa.binary())
        yield pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def check_column(t: DataType, c: TypedColumn) -> None:
    """A JSON or Protobuf column's Spark type ``t`` checked against its schema at planning: a
    struct, with every ``required`` property of the JSON Schema, or only fields the Protobuf
    message has (the rest would be lost)."""
    what = "object" if c.format == "json" else "message"
    if not isinstance(t, StructType):
        raise OptionError(
            f"{c.column}Format {c.format!r} writes a struct column as the {what} of subject "
            f"{c.subject}; the {c.column} column is {t.simpleString()}"
        )
    if c.format == "json":
        from gregor.spark.json_encode import required

        missing = [n for n in required(c.schema) if n not in t.fieldNames()]
        if missing:
            raise OptionError(
                f"the {c.column} column lacks {missing} of subject {c.subject} version {c.version}"
            )
        return
    from gregor.spark.protobuf_encode import unknown_fields

    extra = unknown_fields(c.schema, t.fieldNames())
    if extra:
        raise OptionError(
            f"the {c.column} column has {extra}, which the message of subject {c.subject} "
            f"version {c.version} lacks"
        )


__all__ = ["check_column", "encode_batches", "encode_column"]
