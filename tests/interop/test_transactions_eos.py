"""Exactly-once end to end: consume-transform-produce through a SIGKILL of the worker, and
transactions across a restart of the broker.

The worker (``test_transactions_support.py ctp``) is a separate process running one of the
three clients. It is killed with SIGKILL in the middle of a transaction whose records and
offsets are already written; a new incarnation fences the dead one (its transaction is
aborted), resumes from the group's committed offsets and finishes. The output topic must
then hold every input record exactly once for a read_committed consumer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from conftest import INTEROP_BROKER
from interop_helpers import create_topic
from test_transactions_support import CLIENTS, end_offsets, producer, read, settled_end_offsets

from gregor.testing import BrokerProcess

HERE = os.path.dirname(os.path.abspath(__file__))
N_PER_PARTITION = 60


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config={"transaction.state.log.num.partitions": 5}) as b:
        yield b
        assert b.running
        assert "event=request.failed" not in b.read_log(), b.read_log()[-4000:]


def start_worker(
    client: str, bootstrap: str, src: str, dst: str, group: str, txn_id: str, pause_at: int
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            os.path.join(HERE, "test_transactions_support.py"),
            "ctp",
            client,
            bootstrap,
            src,
            dst,
            group,
            txn_id,
            str(pause_at),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def wait_for_line(proc: subprocess.Popen[str], word: str) -> list[str]:
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.strip())
        if line.startswith(word):
            return lines
    raise AssertionError(f"worker exited ({proc.wait()}) without {word}: {lines}")


@pytest.mark.parametrize("client", CLIENTS)
def test_consume_transform_produce_survives_sigkill(broker: BrokerProcess, client: str) -> None:
    bs = broker.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    src, dst, group, txn_id = f"in-{tag}", f"out-{tag}", f"ctp-{tag}", f"ctp-{client}-{tag}"
    create_topic(bs, src, 2)
    create_topic(bs, dst, 2)
    inputs = [(p, b"%d-%03d" % (p, i)) for p in range(2) for i in range(N_PER_PARTITION)]
    plain = producer("confluent", bs)
    for p, v in inputs:
        plain.send(src, p, v)
    plain.flush()

    first = start_worker(client, bs, src, dst, group, txn_id, pause_at=3)
    try:
        lines = wait_for_line(first, "PAUSED")
        # Two transactions committed, the third's records and offsets written, not committed.
        assert [ln.split()[0] for ln in lines[1:]] == ["COMMITTED", "COMMITTED", "PAUSED"]
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    second = start_worker(client, bs, src, dst, group, txn_id, pause_at=0)
    try:
        lines = wait_for_line(second, "DONE")
        assert second.wait() == 0
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert lines[0].startswith("STARTED")

    want = Counter(b"out-" + v for _, v in inputs)
    got = read(client, bs, [(dst, 0), (dst, 1)], "read_committed", len(want))
    assert Counter(v for _, _, v in got) == want
    # Output keeps each partition's input order.
    for part in (0, 1):
        assert [v for q, _, v in got if q == part] == [b"out-" + v for q, v in inputs if q == part]
    # The dead worker's third transaction did reach the log (and was aborted).
    everything = read(
        "confluent", bs, [(dst, 0), (dst, 1)], "read_uncommitted", len(want) + 1, linger=0.5
    )
    assert len(everything) > len(want)
    if INTEROP_BROKER == "gregor":  # Gregor's own log line (Kafka's differ)
        assert "event=txn.fencing" in broker.read_log()


@pytest.mark.parametrize("client", CLIENTS)
def test_broker_restart_mid_transaction(client: str) -> None:
    """SIGKILL the broker while a transaction is open; the producer carries on and commits:
    all of it becomes visible at once, none of it before."""
    with BrokerProcess(config={"transaction.state.log.num.partitions": 3}) as b:
        bs = b.bootstrap_servers
        topic = f"r-{uuid.uuid4().hex[:8]}"
        create_topic(bs, topic, 2)
        p = producer(client, bs, f"restart-{client}")
        try:
            p.init()
            p.begin()
            for i in range(20):
                p.send(topic, i % 2, b"before-%02d" % i)
            p.flush()
            b.restart(hard=True)
            # After the restart the transaction is still open: the LSO holds at its start.
            assert [end_offsets(bs, topic, q) for q in (0, 1)] == [(10, 0), (10, 0)]
            for i in range(20):
                p.send(topic, i % 2, b"after-%02d" % i)
            p.flush()
            p.commit()
        finally:
            p.close()
        assert [settled_end_offsets(bs, topic, q) for q in (0, 1)] == [(21, 21), (21, 21)]
        want = sorted(
            [b"before-%02d" % i for i in range(20)] + [b"after-%02d" % i for i in range(20)]
        )
        got = read(client, bs, [(topic, 0), (topic, 1)], "read_committed", 40)
        assert sorted(v for _, _, v in got) == want


def test_abandoned_transaction_is_aborted_after_broker_restart() -> None:
    """A producer dies with its transaction open and the broker restarts before the timeout:
    the reloaded coordinator aborts the transaction when the timeout passes, and the partition
    becomes readable again past it."""
    with BrokerProcess(config={"transaction.state.log.num.partitions": 3}) as b:
        bs = b.bootstrap_servers
        topic = f"a-{uuid.uuid4().hex[:8]}"
        create_topic(bs, topic, 1)
        dead = producer("confluent", bs, "abandoned", **{"transaction.timeout.ms": 4000})
        dead.init()
        dead.begin()
        for i in range(10):
            dead.send(topic, 0, b"lost-%d" % i)
        dead.flush()
        b.restart(hard=True)
        plain = producer("confluent", bs)
        plain.send(topic, 0, b"later")
        plain.flush()
        got = read("confluent", bs, [(topic, 0)], "read_committed", 1, linger=0)
        assert [v for _, _, v in got] == [b"later"]
        if INTEROP_BROKER == "gregor":  # Gregor's own log line (Kafka's differ)
            assert "event=txn.timed_out transactional_id=abandoned" in b.read_log()
        everything = read("confluent", bs, [(topic, 0)], "read_uncommitted", 11, linger=0)
        assert [v for _, _, v in everything] == [b"lost-%d" % i for i in range(10)] + [b"later"]
        del dead
