"""The Spark type of a JSON Schema column: that of its Arrow type
(``gregor.columns.json_schema``, where the schemas are parsed and mapped)."""

from __future__ import annotations

from pyspark.sql.types import DataType

from gregor.columns.json_schema import JsonNode, arrow_type
from gregor.spark.column_types import spark_type_of


def spark_type(node: JsonNode) -> DataType:
    return spark_type_of(arrow_type(node))


__all__ = ["spark_type"]
