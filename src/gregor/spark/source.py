"""The data source classes Spark instantiates: ``gregor`` (and its ``kafka`` twin)."""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from gregor.columns.avro_columns import AvroColumn
from gregor.spark.avro_options import check_sink_columns, parse_columns, typed_schema
from gregor.spark.options import OptionError, SourceOptions, parse_source
from gregor.spark.reader import KafkaBatchReader, KafkaStreamReader
from gregor.spark.schema import kafka_schema
from gregor.spark.sink_options import SinkOptions, parse_sink
from gregor.spark.txsink import TransactionalStreamWriter
from gregor.spark.writer import KafkaBatchWriter, KafkaStreamWriter, check_sink_schema


class GregorDataSource(DataSource):
    """Topics of any Kafka-compatible broker, with the options and schema of Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "gregor"

    def _columns(self) -> tuple[AvroColumn, ...]:
        """The typed columns, their schemas looked up once per instance."""
        cols: tuple[AvroColumn, ...] | None = getattr(self, "_typed_columns", None)
        if cols is None:
            cols = parse_columns(self.options)
            self._typed_columns = cols
        return cols

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return typed_schema(kafka_schema(include), self._columns())

    def _source(self, streaming: bool) -> SourceOptions:
        return replace(parse_source(self.options, streaming=streaming), columns=self._columns())

    def _sink(self, streaming: bool) -> SinkOptions:
        sink = parse_sink(self.options, streaming=streaming)
        return replace(sink, columns=parse_columns(self.options, sink_topic=sink.topic, sink=True))

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(self._source(False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self._source(True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError(
                'Kafka topics cannot be written in the "Overwrite" mode (the sink does not support '
                "truncate): a topic can only be appended to, use mode('append')"
            )
        sink = self._sink(streaming=False)
        check_sink_schema(check_sink_columns(schema, sink.columns), sink)
        return KafkaBatchWriter(sink)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        sink = self._sink(streaming=True)
        check_sink_schema(check_sink_columns(schema, sink.columns), sink)
        if sink.exactly_once:
            return TransactionalStreamWriter(sink)  # type: ignore[return-value]
        return KafkaStreamWriter(sink)  # type: ignore[return-value]


class KafkaDataSource(GregorDataSource):
    """The same source under the name ``kafka``, for :func:`gregor.spark.register` to try."""

    @classmethod
    def name(cls) -> str:
        return "kafka"


__all__ = ["GregorDataSource", "KafkaDataSource"]
