"""The Spark type of an Avro column (Spark's ``from_avro``'s mapping, ``SchemaConverters``):
that of its Arrow type (``gregor.columns.avro_schema``, where the schemas are parsed,
mapped and resolved)."""

from __future__ import annotations

from pyspark.sql.types import DataType

from gregor.columns.avro_schema import AvroNode, arrow_type
from gregor.spark.column_types import spark_type_of


def spark_type(node: AvroNode) -> DataType:
    return spark_type_of(arrow_type(node))


__all__ = ["spark_type"]
