"""``gregor features`` (kafka-features) and the admin client's ``describe_features`` /
``update_features`` against a real broker process: levels survive a restart, and librdkafka's
KIP-848 consumer (confluent-kafka, ``group.protocol=consumer``) is refused while
``group.version`` is 0 and consumes once it is 1 again."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from gregor.client import AdminClient
from gregor.testing import BrokerProcess
from gregor.testing.cli import run_command

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]


def kip848_consumer(b: BrokerProcess, topic: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap_servers,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    return c


def first_event(c: Consumer) -> tuple[bytes | None, KafkaError | None]:
    """The first record's value, or the first error librdkafka reports."""
    while True:
        msg = c.poll(1.0)
        if msg is not None:
            return (None, msg.error()) if msg.error() else (msg.value(), None)


def test_features_describe_disable_restart_upgrade() -> None:
    with BrokerProcess(config={"num.partitions": 1}) as b:

        def gregor(*args: str) -> tuple[int, str, str]:
            return run_command(b.bootstrap_servers, "features", *args)

        code, out, _ = gregor("describe")
        assert code == 0
        lines = sorted(out.splitlines())
        assert lines[0].startswith(
            "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
            "FinalizedVersionLevel: 1\tEpoch: "
        )
        assert lines[1].startswith(
            "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\t"
            "SupportedMaxVersion: 4.2-IV1\tFinalizedVersionLevel: 4.2-IV1\t"
        )
        assert [ln.split("\t")[0] for ln in lines] == [
            "Feature: group.version",
            "Feature: metadata.version",
            "Feature: share.version",
            "Feature: transaction.version",
        ]

        # A dry run changes nothing; a refusal exits 1 with the broker's reason.
        assert gregor("disable", "--feature", "group.version", "--dry-run")[:2] == (
            0,
            "group.version can be disabled.\n",
        )
        code, out, _ = gregor("upgrade", "--feature", "share.version=2")
        assert code == 1 and out.startswith(
            "Could not upgrade share.version to 2. INVALID_UPDATE_VERSION: "
        )
        code, out, _ = gregor("downgrade", "--metadata", "4.0", "--unsafe", "--output", "json")
        doc = json.loads(out)
        assert code == 1 and doc["result"] == "error"
        assert doc["features"] == [
            {
                "feature": "metadata.version",
                "level": 25,
                "error": "INVALID_UPDATE_VERSION",
                "message": "unsafe metadata.version downgrades are not supported",
            }
        ]
        with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
            assert admin.describe_features().finalized == {
                "group.version": (1, 1),
                "metadata.version": (29, 29),
                "share.version": (1, 1),
                "transaction.version": (2, 2),
            }

        assert gregor("downgrade", "--metadata", "4.0")[:2] == (
            0,
            "metadata.version was downgraded to 4.0-IV3.\n",
        )
        assert gregor("disable", "--feature", "group.version")[:2] == (
            0,
            "group.version was disabled.\n",
        )
        b.stop()
        b.start()
        with AdminClient({"bootstrap.servers": b.bootstrap_servers}) as admin:
            meta = admin.describe_features()
        assert meta.finalized == {  # kept across the restart
            "metadata.version": (25, 25),
            "share.version": (1, 1),
            "transaction.version": (2, 2),
        }

        topic = f"features-{uuid.uuid4().hex[:6]}"
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        p.produce(topic, b"hello")
        assert p.flush(30) == 0
        c = kip848_consumer(b, topic)
        try:
            value, err = first_event(c)
        finally:
            c.close()
        assert value is None and err is not None and err.code() == KafkaError._FATAL
        assert "ConsumerGroupHeartbeat" in err.str() and "not supported" in err.str()

        code, out, _ = gregor("upgrade", "--feature", "group.version=1", "--metadata", "4.2-IV1")
        assert (code, sorted(out.splitlines())) == (
            0,
            ["group.version was upgraded to 1.", "metadata.version was upgraded to 4.2-IV1."],
        )
        c = kip848_consumer(b, topic)
        try:
            assert first_event(c) == (b"hello", None)
        finally:
            c.close()


def test_features_bad_input_is_a_one_line_error() -> None:
    with BrokerProcess(config={"num.partitions": 1}) as b:
        for args, message in [
            (("upgrade", "--feature", "group.version"), "is not NAME=LEVEL"),
            (("upgrade", "--feature", "group.version=one"), "the level must be an integer"),
            (("upgrade", "--metadata", "9.9"), "is not a known metadata.version"),
            (("upgrade",), "name at least one feature"),
            (("upgrade", "--metadata", "4.0", "--feature", "metadata.version=25"), "not both"),
        ]:
            code, out, err = run_command(b.bootstrap_servers, "features", *args)
            assert code == 2 and out == "", args
            assert message in err, (args, err)
