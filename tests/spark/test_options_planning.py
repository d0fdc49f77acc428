"""Option parsing and offset arithmetic, without Spark or a broker."""

from __future__ import annotations

import pytest

from gregor.client import TopicPartition as TP
from gregor.client.bulk import next_fetch_offset
from gregor.protocol.records.batch import build_batch
from gregor.protocol.records.header import set_base_offset
from gregor.spark.options import (
    OffsetSpec,
    OptionError,
    kafka_settings,
    offsets_from_json,
    offsets_json,
    parse_sink,
    parse_source,
)
from gregor.spark.planning import OffsetRange, rate_limit, split_ranges

BS = {"kafka.bootstrap.servers": "h:1"}


def test_subscription_kinds_and_defaults() -> None:
    o = parse_source({**BS, "subscribe": "a, b"}, streaming=False)
    assert o.subscribe == ("a", "b") and o.pattern is None and o.assign is None
    assert o.starting == OffsetSpec("earliest") and o.ending == OffsetSpec("latest")
    assert o.fail_on_data_loss is True and o.include_headers is False and o.isolation_level == 0
    s = parse_source({**BS, "subscribePattern": "ev-.*"}, streaming=True)
    assert s.starting == OffsetSpec("latest")
    assert s.matches("ev-1") and not s.matches("xev-1") and not s.matches("ev")
    a = parse_source({**BS, "assign": '{"t": [1, 0], "u": [2]}'}, streaming=False)
    assert a.assign == (TP("t", 0), TP("t", 1), TP("u", 2))


@pytest.mark.parametrize(
    "opts",
    [
        {},
        {"subscribe": "a", "assign": '{"a":[0]}'},
        {"subscribe": "a", "subscribePattern": "a"},
    ],
)
def test_exactly_one_subscription(opts: dict[str, str]) -> None:
    with pytest.raises(OptionError, match="exactly one"):
        parse_source({**BS, **opts}, streaming=False)


def test_options_are_case_insensitive_and_typed() -> None:
    o = parse_source(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "x:9",
            "SUBSCRIBE": "t",
            "MaxOffsetsPerTrigger": "10",
            "minPartitions": "4",
            "maxRecordsPerPartition": "7",
            "failOnDataLoss": "FALSE",
            "includeHeaders": "true",
            "kafka.isolation.level": "read_committed",
            "kafka.client.id": "me",
            "kafka.group.id": "ignored",
            "kafka.max.poll.records": "5",
        },
        streaming=True,
    )
    assert o.client == {"bootstrap.servers": "x:9", "client.id": "me"}
    assert (o.max_offsets_per_trigger, o.min_partitions, o.max_records_per_partition) == (10, 4, 7)
    assert o.fail_on_data_loss is False and o.include_headers is True and o.isolation_level == 1


@pytest.mark.parametrize(
    "opts,msg",
    [
        ({"kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({"kafka.value.deserializer": "x"}, "bytes"),
        ({"minPartitions": "0"}, "positive"),
        ({"failOnDataLoss": "maybe"}, "true or false"),
        ({"startingOffsets": "latest"}, "not valid for batch"),
        ({"endingOffsets": "earliest"}, "not valid for batch"),
        ({"startingOffsets": '{"t":{"0":-1}}'}, "-1"),
        ({"endingOffsets": '{"t":{"0":-2}}'}, "-2"),
        ({"startingOffsets": '{"t":[0]}'}, "JSON object"),
        ({"startingOffsets": "nope"}, "expected JSON"),
        ({"maxOffsetsPerTrigger": "5"}, "streaming"),
        ({"kafka.isolation.level": "dirty"}, "isolation"),
        ({"startingOffsetsByTimestampStrategy": "maybe"}, "error or latest"),
    ],
)
def test_bad_batch_options(opts: dict[str, str], msg: str) -> None:
    with pytest.raises(OptionError, match=msg):
        parse_source({**BS, "subscribe": "t", **opts}, streaming=False)


def test_streaming_refuses_ending_offsets() -> None:
    with pytest.raises(OptionError, match="streaming"):
        parse_source({**BS, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(OptionError, match="bootstrap"):
        parse_source({"subscribe": "t"}, streaming=False)
    with pytest.raises(OptionError, match="bootstrap"):
        kafka_settings({"topic": "t"}, "producer")


def test_offset_precedence_timestamp_over_by_timestamp_over_offsets() -> None:
    base = {**BS, "subscribe": "t", "startingOffsets": '{"t":{"0":5}}'}
    assert parse_source(base, streaming=False).starting == OffsetSpec("offsets", {TP("t", 0): 5})
    by_ts = {**base, "startingOffsetsByTimestamp": '{"t":{"0":1000}}'}
    assert parse_source(by_ts, streaming=False).starting == OffsetSpec("timestamps", {TP("t", 0): 1000})
    ts = {**by_ts, "startingTimestamp": "2000"}
    assert parse_source(ts, streaming=False).starting == OffsetSpec("timestamp", 2000)
    end = {**BS, "subscribe": "t", "endingOffsets": '{"t":{"0":9}}', "endingTimestamp": "3000"}
    assert parse_source(end, streaming=False).ending == OffsetSpec("timestamp", 3000)


def test_offsets_json_is_sparks_kafka_form() -> None:
    offs = {TP("b", 1): 7, TP("a", 10): 3, TP("a", 2): 4}
    assert offsets_json(offs) == {"a": {"2": 4, "10": 3}, "b": {"1": 7}}
    assert offsets_from_json(offsets_json(offs)) == offs


def test_sink_options() -> None:
    s = parse_sink({**BS, "topic": "out", "kafka.acks": "1", "kafka.linger.ms": "5", "kafka.fetch.min.bytes": "1"})
    assert s.topic == "out" and s.client == {"bootstrap.servers": "h:1", "acks": "1", "linger.ms": "5"}


def test_split_ranges_min_partitions_by_size() -> None:
    ranges = [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 10, 40), OffsetRange("t", 2, 5, 5)]
    out = split_ranges(ranges, min_partitions=4)
    # 120 offsets over 4 tasks: 90 -> 3 pieces, 30 -> 1; the empty range is dropped
    assert out == [
        OffsetRange("t", 0, 0, 30),
        OffsetRange("t", 0, 30, 60),
        OffsetRange("t", 0, 60, 90),
        OffsetRange("t", 1, 10, 40),
    ]
    assert split_ranges(ranges, min_partitions=2) == [OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 10, 40)]


def test_split_ranges_max_records_and_tiny_ranges() -> None:
    assert split_ranges([OffsetRange("t", 0, 0, 10)], max_records=4) == [
        OffsetRange("t", 0, 0, 3),
        OffsetRange("t", 0, 3, 6),
        OffsetRange("t", 0, 6, 10),
    ]
    # a range is never cut into more pieces than it has offsets
    assert split_ranges([OffsetRange("t", 0, 0, 2)], min_partitions=5) == [
        OffsetRange("t", 0, 0, 1),
        OffsetRange("t", 0, 1, 2),
    ]


def test_rate_limit_shares_by_backlog_exactly() -> None:
    start = {TP("t", 0): 0, TP("t", 1): 100, TP("t", 2): 50}
    latest = {TP("t", 0): 60, TP("t", 1): 130, TP("t", 2): 60}
    # backlog 60, 30, 10 = 100; limit 50 -> 30, 15, 5
    assert rate_limit(start, latest, 50) == {TP("t", 0): 30, TP("t", 1): 115, TP("t", 2): 55}
    # limit 7 -> 4.2, 2.1, 0.7 -> floors 4, 2, 0 and the remaining 1 goes to the largest remainder
    assert rate_limit(start, latest, 7) == {TP("t", 0): 4, TP("t", 1): 102, TP("t", 2): 51}
    assert rate_limit(start, latest, 1000) == latest


def test_next_fetch_offset_reads_headers_only() -> None:
    a = bytearray(build_batch([(1, b"k", b"v")] * 3))
    b = bytearray(build_batch([(1, None, b"v")] * 2))
    set_base_offset(a, 0, 10)
    set_base_offset(b, 0, 13)
    data = bytes(a + b)
    assert next_fetch_offset(data) == 15
    assert next_fetch_offset(data[: len(a) + 20]) == 13  # partial trailing batch ignored
    assert next_fetch_offset(data[:30]) is None
