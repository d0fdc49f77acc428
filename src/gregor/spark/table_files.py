"""A table's data files that Spark's Hadoop cannot open, read by Spark tasks with Arrow.

Spark's own Parquet reader opens local files; an object store needs a JVM package (S3:
hadoop-aws and the AWS SDK), which pip does not install and Gregor does not fetch. For a table
whose warehouse is on S3 (``iceberg.warehouse=s3://...``), ``gregor.spark.tables`` therefore
hands the files pyiceberg planned to this Python data source, ``gregor_table_files``: one
input partition per data file; each task opens its file with pyiceberg's FileIO (the table's
own IO properties: ``s3.endpoint``, ``s3.region``, ``s3.path-style-access`` and, when the
catalog properties carry them, the credentials; else the AWS SDK's chain of the executor: its
``AWS_*`` environment, ``~/.aws``) and yields its row groups as Arrow record batches in the
frame's schema (no Python per row). Options: ``files`` (a JSON list of paths) and one option
``io.<property>`` per FileIO property, so that Spark's redaction (``spark.redaction.regex``:
names saying ``secret``, ``token``, ``access.key``...) hides a secret's value in plans and in
its UI, as it would not inside one JSON option. No state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

NAME = "gregor_table_files"
#: Each FileIO property is the option ``io.<property>``.
IO_PREFIX = "io."


class FilePartition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class TableFilesDataSource(DataSource):
    """Parquet data files of a table, read with pyiceberg's FileIO (see the module)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        raise ValueError(f"{NAME} reads with the schema it is given (DataFrameReader.schema)")

    def reader(self, schema: StructType) -> DataSourceReader:
        files = json.loads(self.options.get("files", "[]"))
        io = {
            k[len(IO_PREFIX) :]: str(v) for k, v in self.options.items() if k.startswith(IO_PREFIX)
        }
        return TableFilesReader([str(f) for f in files], io, schema)


class TableFilesReader(DataSourceReader):
    def __init__(self, files: list[str], io: dict[str, str], schema: StructType) -> None:
        self.files = files
        self.io = io
        self.names = [f.name for f in schema.fields]
        self.schema = schema

    def partitions(self) -> list[InputPartition]:  # type: ignore[override]
        return [FilePartition(path) for path in self.files]

    def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
        import pyarrow.parquet as pq
        from pyiceberg.io import load_file_io
        from pyspark.sql.pandas.types import to_arrow_schema

        # the frame's Arrow schema exactly (nullability, no Parquet field ids), as Spark checks
        target = to_arrow_schema(self.schema, timezone="UTC")
        path = str(partition.value)
        io = load_file_io(self.io, path)
        with io.new_input(path).open() as stream:
            parquet = pq.ParquetFile(stream)
            for batch in parquet.iter_batches(columns=self.names):
                yield pa.RecordBatch.from_arrays(
                    [batch.column(f.name).cast(f.type) for f in target], schema=target
                )


def read_files(spark: Any, schema: StructType, files: list[str], io: dict[str, str]) -> Any:
    """The DataFrame of ``files`` in ``schema``, read by this source's tasks."""
    spark.dataSource.register(TableFilesDataSource)
    reader = spark.read.format(NAME).schema(schema).option("files", json.dumps(files))
    for k, v in io.items():
        reader = reader.option(IO_PREFIX + k, v)
    return reader.load()


__all__ = ["IO_PREFIX", "NAME", "TableFilesDataSource", "read_files"]
