"""Streaming admission control and offset checks of the stream reader, against a real broker.

Spark's connector tests these with a manual clock; here the reader is driven directly (the
calls Spark's micro-batch engine makes: initialOffset, getDefaultReadLimit, latestOffset,
partitions), so each case is exact and needs no timing. Each test names the Spark test it
mirrors.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_helpers import Broker, create_topic, produce

from gregor.client import AdminClient, TopicPartition
from gregor.client.bulk import DataLossError
from gregor.spark.options import parse_source
from gregor.spark.reader import KafkaStreamReader


def reader(b: Broker, topic: str, **opts: str) -> KafkaStreamReader:
    return KafkaStreamReader(
        parse_source(b.options(subscribe=topic, startingOffsets="earliest", **opts), streaming=True)
    )


def sizes(start: dict, end: dict, topic: str) -> list[int]:
    return [end[topic][p] - start[topic].get(p, 0) for p in sorted(end[topic], key=int)]


def test_max_offsets_per_trigger_shares_like_spark(gregor: Broker, topic: str) -> None:
    # KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger": 101 / 11 / 1 records, limit 10
    create_topic(gregor, topic, 3)
    produce(gregor, topic, {0: 101, 1: 11, 2: 1})
    r = reader(gregor, topic, maxOffsetsPerTrigger="10")
    try:
        start = r.initialOffset()
        limit = r.getDefaultReadLimit()
        first = r.latestOffset(start, limit)
        assert sizes(start, first, topic) == [
            8,
            1,
            1,
        ]  # "1 from smallest, 1 from middle, 8 from biggest"
        second = r.latestOffset(first, limit)
        assert sizes(first, second, topic) == [
            9,
            1,
            0,
        ]  # "smallest now empty, 1 more from middle, 9 more from biggest"
        # Trigger.Once: the engine passes ReadAllAvailable and the limit is ignored
        assert r.latestOffset(second, ReadAllAvailable()) == {topic: {"0": 101, "1": 11, "2": 1}}
        assert r.reportLatestOffset() == {topic: {"0": 101, "1": 11, "2": 1}}
    finally:
        r.stop()


def test_min_offsets_per_trigger_and_max_trigger_delay(gregor: Broker, topic: str) -> None:
    # KafkaMicroBatchSourceSuite "minOffsetsPerTrigger" (the manual clock replaced by delays of
    # an hour, which never pass, and of 0 ms, which always have)
    create_topic(gregor, topic, 3)
    produce(gregor, topic, {0: 10, 1: 5, 2: 1})
    r = reader(gregor, topic, minOffsetsPerTrigger="15", maxTriggerDelay="1h")
    try:
        start = r.initialOffset()
        limit = r.getDefaultReadLimit()
        first = r.latestOffset(start, limit)  # the first batch always runs
        assert sizes(start, first, topic) == [10, 5, 1]
        produce(gregor, topic, {1: 6}, first={1: 5})  # fewer than 15 new records: no batch
        assert r.latestOffset(first, limit) == first
        produce(gregor, topic, {0: 11, 2: 1}, first={0: 10, 2: 1})  # 18 waiting: the batch runs
        second = r.latestOffset(first, limit)
        assert sizes(first, second, topic) == [11, 6, 1]
        produce(gregor, topic, {0: 5, 1: 5}, first={0: 21, 1: 11})
        assert r.latestOffset(second, limit) == second
        assert r.latestOffset(second, ReadAllAvailable()) != second  # Trigger.Once ignores it
    finally:
        r.stop()
    # maxTriggerDelay passed: the batch runs with fewer records
    r = reader(gregor, topic, minOffsetsPerTrigger="15", maxTriggerDelay="0ms")
    try:
        start = r.initialOffset()
        first = r.latestOffset(start, r.getDefaultReadLimit())
        produce(gregor, topic, {2: 1}, first={2: 2})
        assert sizes(first, r.latestOffset(first, r.getDefaultReadLimit()), topic) == [0, 0, 1]
    finally:
        r.stop()


def test_composite_read_limit(gregor: Broker, topic: str) -> None:
    # KafkaMicroBatchSourceSuite "compositeReadLimit": min 15, max 20, maxTriggerDelay 5s
    create_topic(gregor, topic, 3)
    produce(gregor, topic, {0: 21, 1: 11, 2: 1})
    r = reader(
        gregor, topic, minOffsetsPerTrigger="15", maxOffsetsPerTrigger="20", maxTriggerDelay="1h"
    )
    try:
        start = r.initialOffset()
        limit = r.getDefaultReadLimit()
        first = r.latestOffset(start, limit)
        # "First Batch is always processed but it will process only 20": 12 + 6 + 1 by Spark's prorate
        assert sizes(start, first, topic) == [12, 6, 1]
        assert r.latestOffset(first, limit) == first  # 14 left: fewer than 15
        produce(gregor, topic, {0: 8, 1: 10, 2: 1}, first={0: 21, 1: 11, 2: 1})
        second = r.latestOffset(first, limit)  # 33 waiting, at most 20 read
        assert sizes(first, second, topic) == [10, 9, 1]  # 112..121, 16..24 and "2" in Spark's test
    finally:
        r.stop()


def test_added_partition_must_start_at_zero(gregor: Broker, topic: str) -> None:
    # KafkaOffsetReaderAdmin.getOffsetRangesFromResolvedOffsets: "Added partition ... starts
    # from ... instead of 0" is data loss (an error unless failOnDataLoss is false)
    create_topic(gregor, topic, 1)
    produce(gregor, topic, {0: 2})
    with AdminClient({"bootstrap.servers": gregor.bootstrap_servers}) as admin:
        admin.create_partitions({topic: 2})
        produce(gregor, topic, {1: 3})
        admin.delete_records({TopicPartition(topic, 1): 2})
    for fail, outcome in (("true", DataLossError), ("false", None)):
        r = reader(gregor, topic, failOnDataLoss=fail)
        try:
            start = {topic: {"0": 0}}
            end = {topic: {"0": 2, "1": 3}}
            if outcome is None:
                got: Any = r.partitions(start, end)
                assert sorted((p.partition, p.start, p.end) for p in got) == [(0, 0, 2), (1, 2, 3)]
            else:
                with pytest.raises(
                    outcome, match="Added partition .*-1 starts from 2 instead of 0"
                ):
                    r.partitions(start, end)
        finally:
            r.stop()


def test_no_partition_left_records_no_empty_offset(gregor: Broker, topic: str) -> None:
    # KafkaMicroBatchSourceSuite "SPARK-41375: empty partitions should not record to latest
    # offset": every subscribed topic deleted (failOnDataLoss false) -> no new offset
    create_topic(gregor, f"{topic}-good", 2)
    produce(gregor, f"{topic}-good", {0: 1})
    r = KafkaStreamReader(
        parse_source(
            gregor.options(subscribePattern=f"{topic}-.*", failOnDataLoss="false"), streaming=True
        )
    )
    try:
        start = r.initialOffset()
        assert start == {f"{topic}-good": {"0": 1, "1": 0}}
        with AdminClient({"bootstrap.servers": gregor.bootstrap_servers}) as admin:
            admin.delete_topics([f"{topic}-good"])
        assert r.latestOffset(start, r.getDefaultReadLimit()) == start
    finally:
        r.stop()
