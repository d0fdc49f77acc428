"""Spark's Kafka source schema, as a Spark ``StructType`` and as the Arrow schema Spark expects.

Spark's built-in Kafka source reads key, value (binary), topic (string), partition (int),
offset (long), timestamp (timestamp), timestampType (int) and, with ``includeHeaders``,
headers (array of struct key string, value binary); every field is nullable. A Python data
source that returns Arrow batches must match ``to_arrow_schema`` of that type exactly, so
:func:`to_spark_arrow` rewraps the client's bulk-read batches (whose topic, partition and
offset columns are declared non-null) without copying any buffer. A record without headers
reads back with ``headers`` null, as in Spark (the client's batches hold an empty list).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def kafka_schema(include_headers: bool = False) -> StructType:
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


_ARROW_HEADERS = pa.list_(
    pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
)


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    """What ``pyspark.sql.pandas.types.to_arrow_schema(kafka_schema(h), timezone="UTC")`` gives."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _ARROW_HEADERS))
    return pa.schema(fields)


_SCHEMAS = {False: arrow_schema(False), True: arrow_schema(True)}


def to_spark_arrow(batch: pa.RecordBatch, include_headers: bool) -> pa.RecordBatch:
    """The same columns under Spark's Arrow schema (nullable fields, ``element`` list items)."""
    schema = _SCHEMAS[include_headers]
    columns = list(batch.columns)
    if include_headers:
        columns[7] = _null_when_empty(columns[7].cast(_ARROW_HEADERS))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _null_when_empty(headers: pa.ListArray) -> pa.ListArray:
    # "not a nonzero length" rather than ``equal(lengths, 0)``: a Python 0 becomes an Arrow
    # scalar through pa.scalar, which imports pandas (see gregor.client.arrow._scalar)
    empty = pc.invert(pc.cast(pc.list_value_length(headers), pa.bool_()))
    if not pc.any(empty).as_py():
        return headers
    mask = pc.or_kleene(empty, headers.is_null())
    offsets = pc.subtract(headers.offsets, headers.offsets[0])  # a slice's offsets start at 0
    values = headers.values.slice(headers.offsets[0].as_py())
    return pa.ListArray.from_arrays(offsets, values, type=_ARROW_HEADERS, mask=mask)
