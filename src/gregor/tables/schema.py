"""The ``key_value`` table: its Iceberg schema, partition spec and Arrow shape.

Columns: ``key`` and ``value`` (binary), ``headers`` (list<struct<key string, value binary>>,
null for a record without headers), ``timestamp`` (timestamptz, microseconds, from the
record's millisecond timestamp), ``partition`` (int) and ``offset`` (long). The table is
partitioned by the hour of ``timestamp``. The typed modes' tables have these columns but a
struct ``value`` (:func:`typed_iceberg_schema`, ``gregor.tables.typed``), their dead-letter
tables these and ``error`` (:func:`dead_letter_iceberg_schema`).

:func:`key_value_rows` turns one fetched record set of a partition into these columns with
the consumer's own bulk reader (``gregor.client.consumer.arrow``): control batches are
dropped, and so are the records of aborted transactions (the read is read_committed: the
caller hands in the Fetch path's aborted-transaction list and carries the aborted producer
ids from one read to the next).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from gregor.client.consumer.arrow import ArrowBatchBuilder

KEY_ID, VALUE_ID, HEADERS_ID, HEADER_ELEMENT_ID = 1, 2, 3, 4
HEADER_KEY_ID, HEADER_VALUE_ID = 5, 6
TIMESTAMP_ID, PARTITION_ID, OFFSET_ID = 7, 8, 9
ERROR_ID = 10
HOUR_FIELD_ID = 1000

HEADER_TYPE = pa.list_(
    pa.field(
        "element",
        pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]),
    )
)
ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
    ]
)

#: The typed modes' rows before a value is typed (``key_value``'s without ``value``).
TYPED_ARROW_SCHEMA = ARROW_SCHEMA.remove(ARROW_SCHEMA.get_field_index("value"))
#: The dead-letter table's rows: ``key_value``'s and why the record did not convert.
DEAD_LETTER_ARROW_SCHEMA = ARROW_SCHEMA.append(pa.field("error", pa.string()))


def iceberg_schema() -> Any:
    """The ``key_value`` Iceberg schema (pyiceberg's ``Schema``)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import (
        BinaryType,
        IntegerType,
        ListType,
        LongType,
        NestedField,
        StringType,
        StructType,
        TimestamptzType,
    )

    header = StructType(
        NestedField(HEADER_KEY_ID, "key", StringType(), required=False),
        NestedField(HEADER_VALUE_ID, "value", BinaryType(), required=False),
    )
    return Schema(
        NestedField(KEY_ID, "key", BinaryType(), required=False),
        NestedField(VALUE_ID, "value", BinaryType(), required=False),
        NestedField(
            HEADERS_ID,
            "headers",
            ListType(HEADER_ELEMENT_ID, header, element_required=False),
            required=False,
        ),
        NestedField(TIMESTAMP_ID, "timestamp", TimestamptzType(), required=False),
        NestedField(PARTITION_ID, "partition", IntegerType(), required=True),
        NestedField(OFFSET_ID, "offset", LongType(), required=True),
    )


def typed_iceberg_schema() -> Any:
    """The typed modes' schema before any value is typed: ``key_value``'s without ``value``
    (the struct ``value`` column is added by the first commit that has one)."""
    from pyiceberg.schema import Schema

    fields = [f for f in iceberg_schema().fields if f.field_id != VALUE_ID]
    return Schema(*fields)


def dead_letter_iceberg_schema() -> Any:
    """The dead-letter table's: ``key_value``'s and ``error`` (why the record did not convert)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, StringType

    return Schema(
        *iceberg_schema().fields, NestedField(ERROR_ID, "error", StringType(), required=False)
    )


def partition_spec() -> Any:
    """By hour of the record timestamp (pyiceberg's ``PartitionSpec``)."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import HourTransform

    return PartitionSpec(
        PartitionField(
            source_id=TIMESTAMP_ID,
            field_id=HOUR_FIELD_ID,
            transform=HourTransform(),
            name="timestamp_hour",
        )
    )


class RowConverter:
    """Record sets of one partition, in offset order, to ``key_value`` rows."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        #: producers whose transaction is aborting (an abort may span two reads)
        self.aborted_pids: set[int] = set()

    def rows(
        self, records: bytes | memoryview, aborted: Sequence[tuple[int, int]], start: int
    ) -> tuple[pa.Table, int]:
        """The kept records at or after ``start`` and the offset after the last whole batch
        (``start`` when there is none)."""
        builder = ArrowBatchBuilder(
            self.topic,
            self.partition,
            include_headers=True,
            timestamp_unit="us",
            read_committed=True,
            aborted_pids=self.aborted_pids,
        )
        nxt = builder.add_record_set(records, aborted)
        self.aborted_pids = builder.aborted_pids or set()
        batch = builder.build(start)
        table = pa.Table.from_arrays(
            [
                batch.column("key"),
                batch.column("value"),
                batch.column("headers").cast(HEADER_TYPE),
                batch.column("timestamp"),
                batch.column("partition"),
                batch.column("offset"),
            ],
            schema=ARROW_SCHEMA,
        )
        return table, max(nxt, start)
