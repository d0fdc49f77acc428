"""confluent-kafka helpers shared by the SASL tests: a round trip, and the error of a login
the broker refuses."""

from __future__ import annotations

import threading
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer


def produce_then_consume(
    settings: dict[str, Any], topic: str, count: int = 3
) -> list[bytes | None]:
    """Produce ``v0``..``v<count-1>`` with ``settings`` and read them back (a consumer of the
    group named after the topic); the values read, in order."""
    p = Producer(settings)
    for i in range(count):
        p.produce(topic, b"v%d" % i)
    assert p.flush(60) == 0
    c = Consumer({**settings, "group.id": topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes | None] = []
    try:
        while len(got) < count:
            m = c.poll(1.0)
            if m is not None:
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        c.close()
    return got


def authentication_error(settings: dict[str, Any]) -> KafkaError:
    """The error a confluent-kafka client reports when its login is refused."""
    seen: list[KafkaError] = []
    done = threading.Event()

    def on_error(err: KafkaError) -> None:
        seen.append(err)
        if err.code() == KafkaError._AUTHENTICATION:
            done.set()

    p = Producer({**settings, "error_cb": on_error})
    while not done.is_set():
        p.poll(0.2)
    p.flush(0)
    return next(e for e in seen if e.code() == KafkaError._AUTHENTICATION)
