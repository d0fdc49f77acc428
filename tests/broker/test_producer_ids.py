"""InitProducerId for idempotent producers, against a real broker (a process of its own where it
is killed)."""

from __future__ import annotations

import socket
import struct

import pytest

from gregor.protocol.framing import RequestHeader, decode_response_header, encode_request
from gregor.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from gregor.testing import BrokerProcess, InProcessBroker


def _init_producer_id(port: int, transactional_id: str | None = None) -> InitProducerIdResponse:
    version = 4
    req = InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout_ms=60000,
        producer_id=-1,
        producer_epoch=-1,
    )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(encode_request(RequestHeader(22, version, 7, "test"), req))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        frame = s.recv(size, socket.MSG_WAITALL)
    corr, _tags, pos = decode_response_header(frame, 1)
    assert corr == 7
    return InitProducerIdResponse.decode(memoryview(frame)[pos:], version)


@pytest.mark.slow
def test_producer_ids_are_unique_and_never_reused_after_restart() -> None:
    with BrokerProcess() as broker:
        first = [_init_producer_id(broker.port) for _ in range(3)]
        assert [r.error_code for r in first] == [0, 0, 0]
        assert [r.producer_epoch for r in first] == [0, 0, 0]
        ids = [r.producer_id for r in first]
        assert len(set(ids)) == 3 and ids == sorted(ids)
        broker.restart(hard=True)
        after = _init_producer_id(broker.port)
        assert after.error_code == 0
        assert after.producer_id > max(ids)


def test_kafka_python_default_idempotent_producer_round_trip() -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    with InProcessBroker() as broker:
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap_servers
        )  # idempotent by default
        futures = [producer.send("idem", key=b"k%d" % i, value=b"v%d" % i) for i in range(50)]
        producer.flush()
        assert [f.get().offset for f in futures] == list(range(50))
        producer.close()
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap_servers,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        consumer.assign([TopicPartition("idem", 0)])
        got = []
        while len(got) < 50:  # no deadline: the test's timeout ends a wait that never ends
            for records in consumer.poll(timeout_ms=500).values():
                got.extend((m.offset, m.key, m.value) for m in records)
        consumer.close()
        assert got == [(i, b"k%d" % i, b"v%d" % i) for i in range(50)]
