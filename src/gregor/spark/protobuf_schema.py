"""The Spark type of a Protobuf column (Spark's ``from_protobuf``'s mapping): that of its
Arrow type (``gregor.columns.protobuf_schema``, where the descriptors are built and mapped)."""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import DataType

from gregor.columns.protobuf_schema import arrow_type
from gregor.spark.column_types import spark_type_of


def spark_type(message: Any) -> DataType:
    return spark_type_of(arrow_type(message))


__all__ = ["spark_type"]
