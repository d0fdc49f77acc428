"""The Spark type of a typed column's Arrow type (``gregor.columns``' ``arrow_type``s).

The decoders' Arrow types are exactly what ``pyspark.sql.pandas.types.to_arrow_type`` gives for
the Spark types of Spark's ``from_avro``, ``from_json`` and ``from_protobuf``, so the Spark type
is read back from them, one to one: struct, list, map (string keys), the primitives, decimal,
date, timestamp with a time zone (timestamp) and without (timestamp_ntz). Every field,
element and map value is nullable, as Spark's Kafka columns are.
"""

from __future__ import annotations

import pyarrow as pa
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
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

_PRIMITIVES: dict[pa.DataType, DataType] = {
    pa.bool_(): BooleanType(),
    pa.int32(): IntegerType(),
    pa.int64(): LongType(),
    pa.float32(): FloatType(),
    pa.float64(): DoubleType(),
    pa.binary(): BinaryType(),
    pa.string(): StringType(),
    pa.date32(): DateType(),
}


def spark_type_of(arrow: pa.DataType) -> DataType:
    """The Spark type of a column whose Arrow type is ``arrow``."""
    if arrow in _PRIMITIVES:
        return _PRIMITIVES[arrow]
    if pa.types.is_decimal(arrow):
        return DecimalType(arrow.precision, arrow.scale)
    if pa.types.is_timestamp(arrow):
        return TimestampType() if arrow.tz is not None else TimestampNTZType()
    if pa.types.is_map(arrow):
        return MapType(spark_type_of(arrow.key_type), spark_type_of(arrow.item_type), True)
    if pa.types.is_list(arrow):
        return ArrayType(spark_type_of(arrow.value_type), True)
    if pa.types.is_struct(arrow):
        return StructType([StructField(f.name, spark_type_of(f.type), True) for f in arrow])
    raise TypeError(f"no Spark type for the Arrow type {arrow}")
