"""The crash test of topics as tables: a real ``gregor serve`` is SIGKILLed at seeded random
points of the translate/commit cycle (``gregor.tables.faults``: after a read, before a commit,
with the commit's files written but the catalog not told, right after the commit), restarted,
and each time the table holds exactly a prefix of every partition, record by record; after
the last restart it catches up with the whole topic. Records are produced with confluent-kafka
while the broker runs (and dies).

Each round is one start: the broker starts armed with the round's crash point, dies there,
and the table it left is read from the catalog while no broker runs. The topic only grows
(its committed records stay, at their offsets), so each of those tables is checked against the
topic read at the end, by the last broker, started unarmed: a table that was not a prefix of
the topic of its time is not a prefix of the final topic either."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from tables_support import (
    CommittedOffsets,
    Row,
    assert_prefix,
    create_table_topic,
    end_offsets,
    table_rows,
    topic_rows,
    wait_until,
)

from gregor.tables.faults import ENV, POINTS
from gregor.testing import BrokerProcess, BrokerStartError

TOPIC = "crashing"
PARTITIONS = 2
#: Chunks a round produces at most while waiting for its crash point.
MAX_CHUNKS = 10


def produce_until_dead(
    broker: BrokerProcess, table: CommittedOffsets, rng: random.Random, tag: str
) -> None:
    """Chunks of records until the broker has died at its crash point: each chunk is flushed
    and then read and committed by the translator (or the broker dies on the way), so every
    point of the cycle comes round once a chunk."""
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "enable.idempotence": True,
            "linger.ms": 2,
            "message.timeout.ms": 3000,
            "reconnect.backoff.max.ms": 100,
        }
    )
    assert broker.proc is not None
    for chunk in range(MAX_CHUNKS):
        for i in range(rng.randint(5, 60)):
            key = f"{tag}-{chunk}-{i}".encode() if i % 5 else None
            headers = [("round", tag.encode())] if i % 2 else None
            p.produce(TOPIC, f"{tag}:{chunk}:{i}".encode(), key, headers=headers)
        p.flush(10)
        wait_until(lambda: died_or_caught_up(broker, table))
        if broker.proc.poll() is not None:
            break
    p.purge()
    p.flush(0)


#: How long one probe of a round's wait asks for the end offsets: the broker may die while it
#: is asked (then the next probe sees it dead instead of a 30 s client timeout running out);
#: a probe that gets no answer in time is only repeated.
PROBE_TIMEOUT_S = 3.0


def caught_up(broker: BrokerProcess, table: CommittedOffsets, timeout: float = 30.0) -> bool:
    ends = end_offsets(broker.bootstrap_servers, TOPIC, PARTITIONS, timeout=timeout)
    committed = table()
    return all(committed.get(p) == end for p, end in ends.items() if end > 0)


def died_or_caught_up(broker: BrokerProcess, table: CommittedOffsets) -> bool:
    assert broker.proc is not None
    if broker.proc.poll() is not None:
        return True
    try:
        return caught_up(broker, table, PROBE_TIMEOUT_S)
    except KafkaException:  # it died while we asked, or did not answer in time: ask again
        return False


@pytest.mark.slow
@pytest.mark.timeout(600)  # 7 broker starts with pyiceberg, a commit or two each, both cores busy
@pytest.mark.parametrize("seed", [39])
def test_sigkill_anywhere_in_the_cycle_keeps_the_table_a_prefix_of_the_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    data_dir = tmp_path / "logs"
    broker = BrokerProcess(data_dir=tmp_path)
    committed = CommittedOffsets(data_dir, TOPIC)  # one catalog for all the waits
    # every point at least once, then two more anywhere, in a seeded order
    points = [*POINTS, rng.choice(POINTS), rng.choice(POINTS)]
    rng.shuffle(points)
    try:
        died_at: list[str] = []
        tables_after_a_kill: list[list[Row]] = []
        for rnd, point in enumerate(points):
            monkeypatch.setenv(ENV, f"{point}:{rng.randint(1, 2)}")
            try:
                broker.start()
            except BrokerStartError:
                # the tail the last round left came to its crash point before the broker said
                # it listens: it died there, as it should (never in round 0: no table yet)
                assert rnd > 0 and broker.proc is not None
                assert broker.proc.poll() == -signal.SIGKILL
            if rnd == 0:  # no record yet: no translator reaches a crash point before this
                create_table_topic(broker.bootstrap_servers, TOPIC, PARTITIONS, lag_ms=20)
            produce_until_dead(broker, committed, rng, f"r{rnd}")
            assert broker.proc is not None
            if broker.proc.poll() == -signal.SIGKILL:
                died_at.append(point)
            broker.kill()
            tables_after_a_kill.append(table_rows(data_dir, TOPIC))  # no broker runs
        assert set(died_at) == set(POINTS)  # the broker died at every point of the cycle
        monkeypatch.delenv(ENV)
        broker.start()
        topic = topic_rows(broker.bootstrap_servers, TOPIC, PARTITIONS)
        for table in tables_after_a_kill:
            assert_prefix(table, topic, PARTITIONS)
        assert len(tables_after_a_kill[-1]) > 0  # the rounds' commits reached the table
        wait_until(lambda: caught_up(broker, committed))
        expected = topic_rows(broker.bootstrap_servers, TOPIC, PARTITIONS)
        assert table_rows(data_dir, TOPIC) == expected
        assert len(expected) > 0
    finally:
        broker.stop()
