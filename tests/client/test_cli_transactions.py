"""``gregor transactions`` against a real broker while a confluent-kafka transactional producer
holds a transaction open, then after it commits."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from gregor.testing import BrokerProcess
from gregor.testing.cli import run_command

pytestmark = pytest.mark.interop


def run(b: BrokerProcess, *args: str) -> tuple[int, str, str]:
    return run_command(b.bootstrap_servers, *args)


def test_list_describe_and_describe_producers_of_an_open_transaction() -> None:
    with BrokerProcess(
        config={"num.partitions": 1, "transaction.state.log.num.partitions": 2}
    ) as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "tx-cli"})
        p.init_transactions(30)
        before = Producer({"bootstrap.servers": b.bootstrap_servers})
        before.produce("tx-topic", b"plain-0")
        before.produce("tx-topic", b"plain-1")
        assert before.flush(30) == 0
        p.begin_transaction()
        p.produce("tx-topic", b"in-txn")
        assert p.flush(30) == 0

        code, out, _ = run(b, "transactions", "list")
        header, *rows = out.splitlines()
        assert code == 0 and header.split() == [
            "TransactionalId",
            "Coordinator",
            "ProducerId",
            "TransactionState",
        ]
        [row] = [r.split() for r in rows if r.startswith("tx-cli")]
        assert row[3] == "Ongoing"
        producer_id = int(row[2])
        code, out, _ = run(b, "transactions", "list", "--state", "CompleteCommit")
        assert "tx-cli" not in out

        code, out, _ = run(
            b, "transactions", "describe", "--transactional-id", "tx-cli", "--output", "json"
        )
        doc = json.loads(out)
        assert code == 0 and doc["state"] == "Ongoing" and doc["producer_id"] == producer_id
        assert doc["partitions"] == ["tx-topic-0"]

        # the open transaction starts after the two plain records
        code, out, _ = run(
            b,
            "transactions",
            "describe-producers",
            "--topic",
            "tx-topic",
            "--partition",
            "0",
            "--output",
            "json",
        )
        producers = {x["producer_id"]: x for x in json.loads(out)}
        assert producers[producer_id]["current_txn_start_offset"] == 2

        p.commit_transaction(30)
        code, out, _ = run(b, "transactions", "describe", "--transactional-id", "tx-cli")
        assert "CompleteCommit" in out.splitlines()[1]
        code, out, _ = run(
            b, "transactions", "describe-producers", "--topic", "tx-topic", "--partition", "0"
        )
        assert [
            ln.split()[-1] for ln in out.splitlines()[1:] if ln.startswith(str(producer_id))
        ] == ["None"]
        # bad input
        code, _, err = run(b, "transactions", "describe", "--transactional-id", "never-used")
        assert code == 1 and err.startswith("Error: cannot describe transactional id never-used")
        assert (
            run(
                b, "transactions", "describe-producers", "--topic", "tx-topic", "--partition", "-1"
            )[0]
            == 2
        )


def test_abort_a_hanging_transaction() -> None:
    from confluent_kafka import Consumer, TopicPartition

    with BrokerProcess(
        config={"num.partitions": 1, "transaction.state.log.num.partitions": 2}
    ) as b:
        plain = Producer({"bootstrap.servers": b.bootstrap_servers})
        plain.produce("hang", b"before")
        assert plain.flush(30) == 0
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "transactional.id": "tx-hang"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("hang", b"never-committed")
        assert p.flush(30) == 0
        plain.produce("hang", b"after")
        assert plain.flush(30) == 0

        def committed_view() -> tuple[list[bytes], int]:
            c = Consumer(
                {
                    "bootstrap.servers": b.bootstrap_servers,
                    "group.id": "hang-reader",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                }
            )
            try:
                c.assign([TopicPartition("hang", 0, 0)])
                values = [m.value() for m in c.consume(10, 2.0) if not m.error()]
                low, high = c.get_watermark_offsets(TopicPartition("hang", 0), 30)
                return values, high
            finally:
                c.close()

        # the open transaction holds read_committed readers at its start (offset 1)
        assert committed_view()[0] == [b"before"]
        code, out, _ = run(
            b,
            "transactions",
            "describe-producers",
            "--topic",
            "hang",
            "--partition",
            "0",
            "--output",
            "json",
        )
        [open_txn] = [x for x in json.loads(out) if x["current_txn_start_offset"] >= 0]
        assert open_txn["current_txn_start_offset"] == 1
        code, out, _ = run(
            b, "transactions", "abort", "--topic", "hang", "--partition", "0", "--start-offset", "1"
        )
        assert code == 0 and out.startswith(
            f"Aborted the transaction of producer {open_txn['producer_id']}"
        )
        values, _ = committed_view()
        assert values == [b"before", b"after"]  # the aborted record is skipped, the rest readable
        code, _, err = run(
            b, "transactions", "abort", "--topic", "hang", "--partition", "0", "--start-offset", "1"
        )
        assert code == 1 and "no open transaction starts at offset 1" in err
