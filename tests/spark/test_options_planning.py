"""Option parsing and offset arithmetic, without Spark or a broker."""

from __future__ import annotations

from typing import Any

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
    parse_source,
)
from gregor.spark.planning import OffsetRange, rate_limit, split_ranges
from gregor.spark.sink_options import parse_sink

BS = {"kafka.bootstrap.servers": "h:1"}


def test_subscription_kinds_and_defaults() -> None:
    o = parse_source({**BS, "subscribe": "a, b"}, streaming=False)
    assert o.subscribe == ("a", "b") and o.pattern is None and o.assign is None
    assert o.starting == OffsetSpec("earliest") and o.ending == OffsetSpec("latest")
    assert o.fail_on_data_loss is True and o.include_headers is False and o.isolation_level == 0
    assert o.check_crcs is True
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
            "KAFKA.CHECK.CRCS": "False",
            "kafka.client.id": "me",
            "kafka.group.id": "ignored",
            "kafka.max.poll.records": "5",
        },
        streaming=True,
    )
    assert o.client == {"bootstrap.servers": "x:9", "client.id": "me"}
    assert (o.max_offsets_per_trigger, o.min_partitions, o.max_records_per_partition) == (10, 4, 7)
    assert o.fail_on_data_loss is False and o.include_headers is True and o.isolation_level == 1
    assert o.check_crcs is False
    assert (
        o.notes[1]
        == "kafka options ['max.poll.records'] are not used by Gregor's source client and have no effect"
    )


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
        ({"kafka.isolation.level": "dirty"}, "isolation"),
        ({"kafka.check.crcs": "yes"}, "'kafka.check.crcs' must be true or false"),
        ({"startingOffsetsByTimestampStrategy": "maybe"}, "error or latest"),
    ],
)
def test_bad_batch_options(opts: dict[str, str], msg: str) -> None:
    with pytest.raises(OptionError, match=msg):
        parse_source({**BS, "subscribe": "t", **opts}, streaming=False)


# KafkaRelationSuite "bad batch query options" and KafkaMicroBatchSourceSuite "bad source
# options": Spark's messages, matched case-insensitively as Spark's tests do.
@pytest.mark.parametrize(
    "streaming,opts,msgs",
    [
        (
            False,
            {"startingOffsets": "latest"},
            ["starting offset can't be latest for batch queries on Kafka"],
        ),
        (
            False,
            {"startingOffsets": '{"t":{"0":-1}}'},
            ["startingOffsets for t-0 can't be latest for batch queries on Kafka"],
        ),
        (
            False,
            {"endingOffsets": "earliest"},
            ["ending offset can't be earliest for batch queries on Kafka"],
        ),
        (
            False,
            {"endingOffsets": '{"t":{"0":-2}}'},
            ["ending offset for t-0 can't be earliest for batch queries on Kafka"],
        ),
        (True, {"endingOffsets": "latest"}, ["Ending offset not valid in streaming queries"]),
        (
            True,
            {"endingOffsetsByTimestamp": '{"t": {"0": 1000}}'},
            ["Ending timestamp not valid in streaming queries"],
        ),
        (True, {"subscribe": None}, ["options must be specified", "subscribe", "subscribePattern"]),
        (True, {"subscribePattern": "t.*"}, ["only one", "options can be specified"]),
        (True, {"assign": '{"a":[0]}'}, ["only one", "options can be specified"]),
        (True, {"subscribe": None, "assign": ""}, ["no topicpartitions to assign"]),
        (True, {"subscribe": ""}, ["no topics to subscribe"]),
        (True, {"subscribe": None, "subscribePattern": ""}, ["pattern to subscribe is empty"]),
        (
            True,
            {"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"},
            ["value of minOffsetPerTrigger(20) is higher than the maxOffsetsPerTrigger(15)"],
        ),
    ],
)
def test_sparks_bad_option_messages(streaming: bool, opts: dict, msgs: list[str]) -> None:
    given = {k: v for k, v in {**BS, "subscribe": "t", **opts}.items() if v is not None}
    with pytest.raises(OptionError) as e:
        parse_source(given, streaming=streaming)
    for m in msgs:
        assert m.lower() in str(e.value).lower()


# KafkaMicroBatchSourceSuite "unsupported kafka configs"
@pytest.mark.parametrize(
    "key",
    [
        "kafka.auto.offset.reset",
        "kafka.enable.auto.commit",
        "kafka.interceptor.classes",
        "kafka.key.deserializer",
        "kafka.value.deserializer",
    ],
)
def test_unsupported_kafka_configs(key: str) -> None:
    with pytest.raises(OptionError, match="not supported"):
        parse_source({**BS, "subscribe": "t", key: "someValue"}, streaming=True)


# KafkaMicroBatchSourceSuite "get offsets from case insensitive parameters"
def test_offsets_from_case_insensitive_values() -> None:
    o = parse_source(
        {**BS, "subscribe": "t", "startingOffsets": "earLiEst", "endingOffsets": "laTest"},
        streaming=False,
    )
    assert (o.starting, o.ending) == (OffsetSpec("earliest"), OffsetSpec("latest"))


# KafkaRelationSuite "topic-partition for start offset and end offset must match" and
# "unresolved start offset greater than end offset": errors whatever failOnDataLoss says
@pytest.mark.parametrize("fail", ["true", "false"])
def test_start_after_end_is_an_argument_error(fail: str) -> None:
    base = {**BS, "subscribe": "test", "failOnDataLoss": fail}
    with pytest.raises(
        OptionError,
        match="The specified start offset and end offset should have the same topic-partitions",
    ):
        parse_source(
            {
                **base,
                "startingOffsets": '{"test": {"0": 1, "1": 1, "2": 1}}',
                "endingOffsets": '{"test": {"0": 0, "1": 0}}',
            },
            streaming=False,
        )
    with pytest.raises(
        OptionError, match="The specified start offset 1 is greater than the end offset 0 for"
    ):
        parse_source(
            {
                **base,
                "startingOffsets": '{"test": {"0": 1, "1": 1, "2": 1}}',
                "endingOffsets": '{"test": {"0": 0, "1": 0, "2": 0}}',
            },
            streaming=False,
        )
    # -2 / -1 are not compared (Spark's checkStartOffsetNotGreaterThanEndOffset)
    parse_source(
        {**base, "startingOffsets": '{"test": {"0": 5}}', "endingOffsets": '{"test": {"0": -1}}'},
        streaming=False,
    )


# KafkaSourceProvider.validateBatchOptions: rate options are ignored in batch queries with a
# warning, not refused; no option is dropped without a word
def test_batch_ignores_trigger_options_with_a_warning() -> None:
    o = parse_source(
        {
            **BS,
            "subscribe": "t",
            "maxOffsetsPerTrigger": "5",
            "minOffsetsPerTrigger": "2",
            "maxTriggerDelay": "5s",
        },
        streaming=False,
    )
    assert o.notes == (
        "maxOffsetsPerTrigger option ignored in batch queries",
        "minOffsetsPerTrigger option ignored in batch queries",
        "maxTriggerDelay option ignored in batch queries",
    )
    o = parse_source(
        {
            **BS,
            "subscribe": "t",
            "groupIdPrefix": "g",
            "kafka.group.id": "g",
            "startingOffset": "x",
            "kafka.session.timeout.ms": "1",
        },
        streaming=True,
    )
    assert len(o.notes) == 4
    assert (
        "groupIdPrefix" in o.notes[2]
        and "kafka.group.id" in o.notes[0]
        and "session.timeout.ms" in o.notes[1]
    )
    assert "startingoffset" in o.notes[3]


def test_admission_and_consumer_options() -> None:
    o = parse_source(
        {
            **BS,
            "subscribe": "t",
            "minOffsetsPerTrigger": "15",
            "maxTriggerDelay": "5s",
            "maxOffsetsPerTrigger": "20",
            "kafkaConsumer.pollTimeoutMs": "5000",
            "fetchOffset.numRetries": "5",
            "fetchOffset.retryIntervalMs": "10",
        },
        streaming=True,
    )
    assert (o.min_offsets_per_trigger, o.max_trigger_delay_ms, o.max_offsets_per_trigger) == (
        15,
        5000,
        20,
    )
    assert (o.timeout, o.fetch_offset_retries, o.fetch_offset_retry_interval_s) == (5.0, 5, 0.01)
    assert (
        parse_source({**BS, "subscribe": "t"}, streaming=True).max_trigger_delay_ms == 15 * 60_000
    )
    with pytest.raises(OptionError, match="time like"):
        parse_source({**BS, "subscribe": "t", "maxTriggerDelay": "soon"}, streaming=True)


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
    assert parse_source(by_ts, streaming=False).starting == OffsetSpec(
        "timestamps", {TP("t", 0): 1000}
    )
    ts = {**by_ts, "startingTimestamp": "2000"}
    assert parse_source(ts, streaming=False).starting == OffsetSpec("timestamp", 2000)
    end = {**BS, "subscribe": "t", "endingOffsets": '{"t":{"0":9}}', "endingTimestamp": "3000"}
    assert parse_source(end, streaming=False).ending == OffsetSpec("timestamp", 3000)


def test_offsets_json_is_sparks_kafka_form() -> None:
    offs = {TP("b", 1): 7, TP("a", 10): 3, TP("a", 2): 4}
    assert offsets_json(offs) == {"a": {"2": 4, "10": 3}, "b": {"1": 7}}
    assert offsets_from_json(offsets_json(offs)) == offs


def test_sink_options() -> None:
    s = parse_sink(
        {
            **BS,
            "topic": "out",
            "kafka.acks": "1",
            "kafka.linger.ms": "5",
            "kafka.fetch.min.bytes": "1",
        }
    )
    assert s.topic == "out" and s.client == {
        "bootstrap.servers": "h:1",
        "acks": "1",
        "linger.ms": "5",
    }


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
    assert split_ranges(ranges, min_partitions=2) == [
        OffsetRange("t", 0, 0, 90),
        OffsetRange("t", 1, 10, 40),
    ]


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


# KafkaMicroBatchSourceSuite "maxOffsetsPerTrigger": backlogs 101 / 11 / 1 with limit 10 give
# 8 / 1 / 1 (a share below one is rounded up, so no small partition starves)
def test_rate_limit_is_sparks_prorate() -> None:
    start = {TP("t", 0): 0, TP("t", 1): 0, TP("t", 2): 0}
    latest = {TP("t", 0): 101, TP("t", 1): 11, TP("t", 2): 1}
    assert rate_limit(start, latest, 10) == {TP("t", 0): 8, TP("t", 1): 1, TP("t", 2): 1}
    second = {TP("t", 0): 8, TP("t", 1): 1, TP("t", 2): 1}
    assert rate_limit(second, latest, 10) == {TP("t", 0): 17, TP("t", 1): 2, TP("t", 2): 1}
    # a 1-record partition beside a 1,000-record one is read in the first batch
    assert rate_limit({TP("t", 0): 0, TP("t", 1): 0}, {TP("t", 0): 1000, TP("t", 1): 1}, 10) == {
        TP("t", 0): 9,
        TP("t", 1): 1,
    }
    # SPARK-26718: a limit of Long.MaxValue does not overflow
    assert rate_limit({TP("t", 0): 5}, {TP("t", 0): 10}, 2**63 - 1) == {TP("t", 0): 10}


# KafkaMicroBatchSourceSuite "test custom metrics - corner cases"
def test_offsets_behind_latest_metrics() -> None:
    from gregor.spark import offsets_behind_latest

    latest = {"a": {"0": 3}, "b": {"0": 6}}
    assert offsets_behind_latest({"endOffset": None, "latestOffset": latest}) == {}
    assert offsets_behind_latest(
        {"endOffset": '{"a": {"0": 1}, "b": {"0": 2}}', "latestOffset": latest}
    ) == {
        "minOffsetsBehindLatest": "2",
        "maxOffsetsBehindLatest": "4",
        "avgOffsetsBehindLatest": "3.0",
    }
    assert offsets_behind_latest({"endOffset": {"a": {"0": 1}}, "latestOffset": None}) == {}


def test_rate_limit_shares_by_backlog_exactly() -> None:
    start = {TP("t", 0): 0, TP("t", 1): 100, TP("t", 2): 50}
    latest = {TP("t", 0): 60, TP("t", 1): 130, TP("t", 2): 60}
    # backlog 60, 30, 10 = 100; limit 50 -> 30, 15, 5
    assert rate_limit(start, latest, 50) == {TP("t", 0): 30, TP("t", 1): 115, TP("t", 2): 55}
    # limit 7 -> 4.2, 2.1, 0.7 -> 4 and 2 rounded down, 0.7 rounded up to 1
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


# KafkaSourceProviderSuite "batch mode - / micro-batch mode - options should be handled as
# case-insensitive": each option in upper and in lower case reaches the reader
@pytest.mark.parametrize("case", [str.upper, str.lower])
def test_reader_options_are_case_insensitive(case: Any) -> None:
    def one(key: str, streaming: bool = True) -> Any:
        return parse_source({**BS, "subscribe": "dummy", case(key): "1111"}, streaming=streaming)

    assert one("kafkaConsumer.pollTimeoutMs", streaming=False).timeout == 1.111
    assert one("kafkaConsumer.pollTimeoutMs").timeout == 1.111
    assert one("maxOffsetsPerTrigger").max_offsets_per_trigger == 1111
    assert one("minOffsetsPerTrigger").min_offsets_per_trigger == 1111
    assert one("maxTriggerDelay").max_trigger_delay_ms == 1111
    assert one("fetchOffset.numRetries").fetch_offset_retries == 1111
    assert one("fetchOffset.retryIntervalMs").fetch_offset_retry_interval_s == 1.111


# JsonUtilsSuite "parsing specificOffsets", "... with topic-level earliest/latest", "... mixing
# topic-level and partition-level values", "... rejects a topic given in both forms" and
# "... rejects malformed json" (SPARK-58774)
def test_offsets_json_with_topic_level_values() -> None:
    def starting(text: str) -> OffsetSpec:
        return parse_source(
            {**BS, "subscribe": "topicA", "startingOffsets": text}, streaming=True
        ).starting

    assert starting('{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}') == OffsetSpec(
        "offsets", {TP("topicA", 0): 23, TP("topicA", 1): -1, TP("topicB", 0): -2}
    )
    assert starting('{"topicA":"earliest","topicB":"latest"}') == OffsetSpec(
        "offsets", {}, (("topicA", -2), ("topicB", -1))
    )
    mixed = starting('{"topicA":"earliest","topicB":{"0":23,"1":-1},"topicC":"LATEST"}')
    assert mixed == OffsetSpec(
        "offsets", {TP("topicB", 0): 23, TP("topicB", 1): -1}, (("topicA", -2), ("topicC", -1))
    )
    with pytest.raises(OptionError, match="topicA.*both a topic-level offset"):
        starting('{"topicA":"earliest","topicA":{"0":23}}')
    for bad in [
        '{"topicA":"first"}',
        '{"topicA":[0,1]}',
        '{"topicA":{"0":"earliest"}}',
        '"earliest"',
        "not json",
    ]:
        with pytest.raises(OptionError) as e:
            starting(bad)
        assert bad in str(e.value)


# SpecificOffsetRangeLimit.resolve (SPARK-58774): topic-level values expand to the partitions
# the query is assigned; explicit partitions stay; a topic with no assigned partition fails
def test_topic_level_offsets_expand_to_the_assigned_partitions() -> None:
    spec = OffsetSpec("offsets", {TP("b", 0): 7}, (("a", -2),))
    tps = [TP("a", 0), TP("a", 1), TP("b", 0)]
    assert spec.expand(tps, "startingOffsets") == {TP("a", 0): -2, TP("a", 1): -2, TP("b", 0): 7}
    with pytest.raises(OptionError, match=r"topic-level offsets for topics \['a'\]"):
        spec.expand([TP("b", 0)], "startingOffsets")


# KafkaRelationSuite "bad batch query options" with the topic-level forms: latest cannot start
# and earliest cannot end a batch query
@pytest.mark.parametrize(
    "opts,msg",
    [
        (
            {"startingOffsets": '{"t":"latest"}'},
            "startingOffsets for topic t can't be latest for batch queries on Kafka",
        ),
        (
            {"endingOffsets": '{"t":"earliest"}'},
            "ending offset for topic t can't be earliest for batch queries on Kafka",
        ),
    ],
)
def test_topic_level_bad_batch_offsets(opts: dict[str, str], msg: str) -> None:
    with pytest.raises(OptionError, match=msg):
        parse_source({**BS, "subscribe": "t", **opts}, streaming=False)


def test_topic_level_latest_starts_a_stream() -> None:
    o = parse_source({**BS, "subscribe": "t", "startingOffsets": '{"t":"latest"}'}, streaming=True)
    assert o.starting == OffsetSpec("offsets", {}, (("t", -1),))
