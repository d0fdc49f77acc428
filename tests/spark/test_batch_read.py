"""Batch reads through the data source against Gregor and Tansu, option by option."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from spark_helpers import BASE_TS, Broker, create_topic, produce

from gregor.client import AdminClient, Producer, TopicPartition
from gregor.spark.schema import kafka_schema


def read(spark: Any, b: Broker, **opts: str) -> Any:
    r = spark.read.format("gregor")
    for k, v in b.options(**opts).items():
        r = r.option(k, v)
    return r.load()


def rows(df: Any) -> list[tuple]:
    out = []
    for r in df.collect():
        ts = int(r.timestamp.replace(tzinfo=dt.UTC).timestamp() * 1000)
        out.append((r.topic, r.partition, r.offset, r.key, r.value, ts, r.timestampType))
    return sorted(out)


def expected(name: str, produced: list[tuple], keep: Any = lambda p, i: True) -> list[tuple]:
    # offsets equal i when each partition was written from i = 0
    return sorted((name, p, i, k, v, ts, 0) for p, i, k, v, ts in produced if keep(p, i))


def test_read_everything_in_kafka_schema(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 3)
    produced = produce(broker, topic, {0: 25, 1: 17, 2: 0})
    df = read(spark, broker, subscribe=topic)
    assert df.schema == kafka_schema(False)
    assert rows(df) == expected(topic, produced)


def test_check_crcs(spark: Any, gregor: Broker, topic: str) -> None:
    # One byte of a stored record is changed under the broker (which serves fetches from the
    # file as it is): Spark's consumer checks every batch's CRC by default, and
    # kafka.check.crcs=false reads the batch as it is.
    create_topic(gregor, topic, 1)
    produce(gregor, topic, {0: 5})
    segment = next(gregor.process.data_dir.glob(f"**/{topic}-0/*.log"))
    at = segment.read_bytes().index(b"v0-3")
    with open(segment, "r+b") as f:
        f.seek(at)
        f.write(b"V")
    with pytest.raises(Exception, match="fails its CRC32C check"):
        read(spark, gregor, subscribe=topic).collect()
    df = read(spark, gregor, subscribe=topic, **{"kafka.check.crcs": "false"})
    assert sorted((r.offset, r.value) for r in df.collect()) == [
        (0, b"v0-0"),
        (1, b"v0-1"),
        (2, b"v0-2"),
        (3, b"V0-3"),
        (4, b"v0-4"),
    ]


def test_headers(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 1)
    produce(broker, topic, {0: 3}, headers=True)
    df = read(spark, broker, subscribe=topic, includeHeaders="true")
    assert df.schema == kafka_schema(True)
    got = sorted((r.offset, [(h.key, h.value) for h in r.headers]) for r in df.collect())
    assert got == [(i, [("n", str(i).encode()), ("empty", None)]) for i in range(3)]


def test_starting_and_ending_offsets_json(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 3)
    produced = produce(broker, topic, {0: 10, 1: 10, 2: 10})
    df = read(
        spark,
        broker,
        subscribe=topic,
        startingOffsets=f'{{"{topic}": {{"0": 3, "1": -2, "2": 9}}}}',
        endingOffsets=f'{{"{topic}": {{"0": 5, "1": 2, "2": -1}}}}',
    )
    keep = {0: range(3, 5), 1: range(0, 2), 2: range(9, 10)}
    assert rows(df) == expected(topic, produced, lambda p, i: i in keep[p])


def test_offsets_json_must_cover_the_subscription(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 2)
    df = read(spark, broker, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 0}}}}')
    with pytest.raises(Exception, match="must name every partition"):
        df.collect()


def test_assign(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 3)
    produced = produce(broker, topic, {0: 4, 1: 5, 2: 6})
    df = read(spark, broker, assign=f'{{"{topic}": [0, 2]}}')
    assert rows(df) == expected(topic, produced, lambda p, i: p != 1)


def test_subscribe_pattern_and_list(spark: Any, broker: Broker, topic: str) -> None:
    names = [f"{topic}-a", f"{topic}-b", f"x{topic}"]
    produced = {}
    for n in names:
        create_topic(broker, n, 1)
        produced[n] = produce(broker, n, {0: 3})
    df = read(spark, broker, subscribePattern=f"{topic}-.*")
    assert rows(df) == sorted(
        expected(names[0], produced[names[0]]) + expected(names[1], produced[names[1]])
    )
    df = read(spark, broker, subscribe=f"{names[1]},{names[2]}")
    assert rows(df) == sorted(
        expected(names[1], produced[names[1]]) + expected(names[2], produced[names[2]])
    )


def test_min_partitions_and_max_records_per_partition(
    spark: Any, broker: Broker, topic: str
) -> None:
    create_topic(broker, topic, 2)
    produced = produce(broker, topic, {0: 30, 1: 10})
    df = read(spark, broker, subscribe=topic, minPartitions="4")
    assert df.rdd.getNumPartitions() == 4  # 30 -> 3 tasks, 10 -> 1
    assert rows(df) == expected(topic, produced)
    df = read(spark, broker, subscribe=topic, maxRecordsPerPartition="7")
    assert df.rdd.getNumPartitions() == 5 + 2
    assert rows(df) == expected(topic, produced)


def test_timestamps(spark: Any, gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 2)
    produced = produce(gregor, topic, {0: 10, 1: 10})
    # record i has timestamp BASE_TS + i s
    df = read(spark, gregor, subscribe=topic, startingTimestamp=str(BASE_TS + 7000))
    assert rows(df) == expected(topic, produced, lambda p, i: i >= 7)
    df = read(
        spark,
        gregor,
        subscribe=topic,
        startingOffsetsByTimestamp=f'{{"{topic}": {{"0": {BASE_TS + 2500}, "1": {BASE_TS + 8000}}}}}',
        endingOffsetsByTimestamp=f'{{"{topic}": {{"0": {BASE_TS + 4000}, "1": {BASE_TS + 99000}}}}}',
    )
    assert rows(df) == expected(topic, produced, lambda p, i: (3 <= i < 4) if p == 0 else i >= 8)
    df = read(
        spark,
        gregor,
        subscribe=topic,
        startingTimestamp=str(BASE_TS + 3000),
        endingTimestamp=str(BASE_TS + 5000),
    )
    assert rows(df) == expected(topic, produced, lambda p, i: 3 <= i < 5)
    # no record at or after the timestamp: an error by default, the end with strategy latest
    late = str(BASE_TS + 60_000)
    with pytest.raises(Exception, match="startingOffsetsByTimestampStrategy"):
        read(spark, gregor, subscribe=topic, startingTimestamp=late).collect()
    df = read(
        spark,
        gregor,
        subscribe=topic,
        startingTimestamp=late,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert rows(df) == []


def test_fail_on_data_loss(spark: Any, gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 1)
    produced = produce(gregor, topic, {0: 10})
    with AdminClient({"bootstrap.servers": gregor.bootstrap_servers}) as admin:
        assert admin.delete_records({TopicPartition(topic, 0): 4}) == {TopicPartition(topic, 0): 4}
    start = f'{{"{topic}": {{"0": 1}}}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        read(spark, gregor, subscribe=topic, startingOffsets=start).collect()
    df = read(spark, gregor, subscribe=topic, startingOffsets=start, failOnDataLoss="false")
    assert rows(df) == expected(topic, produced, lambda p, i: i >= 4)
    # earliest is the log start offset, not 0
    assert rows(read(spark, gregor, subscribe=topic)) == expected(
        topic, produced, lambda p, i: i >= 4
    )


def test_isolation_level(spark: Any, gregor: Broker, topic: str) -> None:
    create_topic(gregor, topic, 1)
    bs = gregor.bootstrap_servers
    committed, aborted = [], []
    with Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{topic}"}) as p:
        p.init_transactions()
        for kind, n in (("committed", 3), ("aborted", 2), ("committed", 1)):
            p.begin_transaction()
            futures = [p.send(topic, f"{kind}-{i}".encode(), partition=0) for i in range(n)]
            p.flush()  # on the broker before the transaction ends
            written = [(f.result(30).offset, f"{kind}-{i}".encode()) for i, f in enumerate(futures)]
            if kind == "committed":
                p.commit_transaction()
                committed += written
            else:
                p.abort_transaction()
                aborted += written
    # three transactions, each closed by a marker: 3 + 1 + 2 + 1 + 1 + 1 offsets
    assert [o for o, _v in committed] == [0, 1, 2, 7] and [o for o, _v in aborted] == [4, 5]
    read_committed = read(
        spark, gregor, subscribe=topic, **{"kafka.isolation.level": "read_committed"}
    )
    assert sorted((r.offset, r.value) for r in read_committed.collect()) == committed
    everything = read(spark, gregor, subscribe=topic)
    assert sorted((r.offset, r.value) for r in everything.collect()) == sorted(committed + aborted)


def test_sql_and_dataframe_api_on_top(spark: Any, broker: Broker, topic: str) -> None:
    create_topic(broker, topic, 2)
    produce(broker, topic, {0: 6, 1: 4})
    df = read(spark, broker, subscribe=topic)
    df.createOrReplaceTempView("src")
    got = spark.sql(
        "SELECT partition, count(*) AS n, max(offset) AS last FROM src GROUP BY partition ORDER BY partition"
    ).collect()
    assert [tuple(r) for r in got] == [(0, 6, 5), (1, 4, 3)]


def test_earliest_and_latest_bind_when_the_dataframe_runs(
    spark: Any, gregor: Broker, topic: str
) -> None:
    # KafkaRelationSuite "explicit earliest to latest offsets", "test late binding start
    # offsets" and "SPARK-30656: minPartitions" (a DataFrame run again reads what arrived since)
    create_topic(gregor, topic, 3)
    produced = produce(gregor, topic, {0: 10, 1: 10, 2: 1})
    df = read(spark, gregor, subscribe=topic, startingOffsets="earliest", endingOffsets="latest")
    split = read(spark, gregor, subscribe=topic, minPartitions="6")
    assert rows(df) == expected(topic, produced)
    assert split.rdd.getNumPartitions() >= 6 and rows(split) == expected(topic, produced)
    more = produce(gregor, topic, {2: 9}, first={2: 1})
    assert rows(df) == expected(topic, produced + more)
    assert rows(split) == expected(topic, produced + more)
    with AdminClient({"bootstrap.servers": gregor.bootstrap_servers}) as admin:
        admin.delete_records({TopicPartition(topic, p): 10 for p in range(3)})
    assert rows(df) == expected(topic, produced + more, lambda p, i: i >= 10)


def test_headers_are_null_when_a_record_has_none(spark: Any, gregor: Broker, topic: str) -> None:
    # KafkaRelationSuite "default starting and ending offsets with headers": no headers -> null
    create_topic(gregor, topic, 1)
    with Producer({"bootstrap.servers": gregor.bootstrap_servers}) as p:
        p.send(topic, b"1", partition=0, headers=[]).result(30)
        p.send(topic, b"2", partition=0, headers=[("a", b"b"), ("c", b"d")]).result(30)
        p.send(topic, b"3", partition=0).result(30)
    df = read(spark, gregor, subscribe=topic, includeHeaders="true")
    got = sorted(
        (r.value, None if r.headers is None else [(h.key, h.value) for h in r.headers])
        for r in df.collect()
    )
    assert got == [(b"1", None), (b"2", [("a", b"b"), ("c", b"d")]), (b"3", None)]


@pytest.mark.parametrize("fail", ["true", "false"])
def test_resolved_start_after_end_fails_whatever_fail_on_data_loss(
    spark: Any, gregor: Broker, topic: str, fail: str
) -> None:
    # KafkaRelationSuite "resolved start offset greater than end offset (with latest)"
    create_topic(gregor, topic, 3)
    df = read(
        spark,
        gregor,
        subscribe=topic,
        failOnDataLoss=fail,
        startingOffsets=f'{{"{topic}": {{"0": 1, "1": 1, "2": 1}}}}',
    )
    with pytest.raises(
        Exception, match="The resolved start offset 1 is greater than the resolved end offset 0 for"
    ):
        df.collect()


def _add_partitions(b: Broker, topic: str, count: int) -> None:
    """CreatePartitions up to ``count``, then wait until every partition has a leader."""
    with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
        assert admin.create_partitions({topic: count}) == {topic: None}
        while True:
            d = admin.describe_topics([topic])[topic]
            if (
                not isinstance(d, Exception)
                and len(d.partitions) == count
                and all(p.leader >= 0 for p in d.partitions)
            ):
                return


def test_a_dataframe_run_again_reads_partitions_created_since(
    spark: Any, gregor: Broker, topic: str
) -> None:
    # KafkaRelationSuite "test late binding start offsets" carried to partitions: Spark lists
    # the subscription's partitions each time a DataFrame runs (KafkaRelation.buildScan), so a
    # partition added by CreatePartitions after the DataFrame was made is read on the next run
    create_topic(gregor, topic, 2)
    produced = produce(gregor, topic, {0: 5, 1: 3})
    df = read(spark, gregor, subscribe=topic)
    split = read(spark, gregor, subscribe=topic, minPartitions="4")
    assert split.rdd.getNumPartitions() == 4
    assert rows(df) == expected(topic, produced) and rows(split) == expected(topic, produced)
    _add_partitions(gregor, topic, 4)
    more = produce(gregor, topic, {2: 4, 3: 1})
    assert rows(df) == expected(topic, produced + more)
    assert rows(split) == expected(topic, produced + more)
    # a pattern subscription also finds a topic created since
    pattern = read(spark, gregor, subscribePattern=f"{topic}.*")
    assert rows(pattern) == expected(topic, produced + more)
    create_topic(gregor, f"{topic}-b", 1)
    other = produce(gregor, f"{topic}-b", {0: 2})
    assert rows(pattern) == sorted(expected(topic, produced + more) + expected(f"{topic}-b", other))


def test_a_new_partition_follows_the_offsets_options_as_a_fresh_plan_would(
    spark: Any, gregor: Broker, topic: str
) -> None:
    # Spark plans again on each run: a per-partition JSON that does not name a new partition
    # fails as it would at planning (KafkaRelationSuite "bad batch query options": the JSON
    # must name every partition), a topic-level "earliest" (SPARK-58774) covers it
    create_topic(gregor, topic, 1)
    produced = produce(gregor, topic, {0: 4})
    listed = read(spark, gregor, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 1}}}}')
    by_topic = read(spark, gregor, subscribe=topic, startingOffsets=f'{{"{topic}": "earliest"}}')
    assert rows(listed) == expected(topic, produced, lambda p, i: i >= 1)
    _add_partitions(gregor, topic, 2)
    more = produce(gregor, topic, {1: 3})
    assert rows(by_topic) == expected(topic, produced + more)
    with pytest.raises(
        Exception, match="startingOffsets must name every partition of the subscription"
    ):
        listed.collect()


def test_topic_level_earliest_and_latest_in_offsets_json(
    spark: Any, broker: Broker, topic: str
) -> None:
    # SPARK-58774: a topic maps to "earliest" or "latest" (any case) in place of its partition
    # object, mixed with per-partition offsets of other topics, for every partition of it
    a, b = f"{topic}-a", f"{topic}-b"
    create_topic(broker, a, 2)
    create_topic(broker, b, 2)
    pa = produce(broker, a, {0: 4, 1: 6})
    pb = produce(broker, b, {0: 5, 1: 5})
    df = read(
        spark,
        broker,
        subscribe=f"{a},{b}",
        startingOffsets=f'{{"{a}": "EARLIEST", "{b}": {{"0": 2, "1": -2}}}}',
        endingOffsets=f'{{"{a}": {{"0": 3, "1": -1}}, "{b}": "latest"}}',
    )
    keep_a = {0: range(0, 3), 1: range(0, 6)}
    keep_b = {0: range(2, 5), 1: range(0, 5)}
    assert rows(df) == sorted(
        expected(a, pa, lambda p, i: i in keep_a[p]) + expected(b, pb, lambda p, i: i in keep_b[p])
    )


def test_topic_level_offsets_must_name_a_subscribed_topic(
    spark: Any, gregor: Broker, topic: str
) -> None:
    # SPARK-58774: a topic-level value for a topic the query is not assigned is an error
    create_topic(gregor, topic, 1)
    with pytest.raises(Exception, match=r"topic-level offsets for topics \['nope'\]"):
        read(
            spark,
            gregor,
            subscribe=topic,
            startingOffsets=f'{{"{topic}": "earliest", "nope": "earliest"}}',
        ).collect()
