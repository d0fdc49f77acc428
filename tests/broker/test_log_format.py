"""The broker's log lines as logfmt (default) and as JSON objects (``gregor serve --output json``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from gregor.broker.common.events import log_event, setup_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_and_logfmt_lines(restore_logging: None, capsys: pytest.CaptureFixture[str]) -> None:
    log = logging.getLogger("gregor.test")
    setup_logging("INFO", "json")
    log_event(log, "topic.created", topic="a b", partitions=3, ok=True)
    log.warning("plain %s", "message")
    first, second = capsys.readouterr().err.splitlines()
    doc = json.loads(first)
    assert (
        doc["level"],
        doc["logger"],
        doc["event"],
        doc["topic"],
        doc["partitions"],
        doc["ok"],
    ) == ("INFO", "gregor.test", "topic.created", "a b", 3, True)
    assert doc["ts"].endswith("Z")
    assert json.loads(second)["msg"] == "plain message"
    setup_logging("INFO")
    log_event(log, "topic.created", topic="a b", partitions=3)
    line = capsys.readouterr().err.strip()
    assert line.endswith('event=topic.created topic="a b" partitions=3')


HOSTILE = 'evil\r\x1b[2J\x1b[31mlevel=ERROR\u2028\u2029\x00\x7f\x85\u202e\ttab\\ "q" end\nnext'


def test_every_control_character_of_a_value_is_escaped(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    from gregor.broker.common.events import escape_log_text

    escaped = escape_log_text(HOSTILE)
    assert escaped == (
        'evil\\r\\x1b[2J\\x1b[31mlevel=ERROR\\u2028\\u2029\\x00\\x7f\\x85\\u202e\\ttab\\\\ "q" end\\nnext'
    )
    assert escape_log_text("plain ünïcode ok") == "plain ünïcode ok"
    log = logging.getLogger("gregor.test")
    setup_logging("INFO")
    log_event(log, "group.rebalance", group=HOSTILE)
    log.warning("client said %s", HOSTILE)
    try:
        raise ValueError(HOSTILE)
    except ValueError:
        log.exception("failed")
    setup_logging("INFO", "json")
    log_event(log, "group.rebalance", group=HOSTILE)
    out = capsys.readouterr().err
    lines = out.split("\n")[:-1]
    assert len(lines) == 4  # one line each, whatever the values hold
    for line in lines:
        assert line.isprintable(), repr(line)
    assert 'group="evil\\r\\x1b[2J\\x1b[31mlevel=ERROR\\u2028' in lines[0]
    assert json.loads(lines[3])["group"] == escaped


@pytest.mark.interop
def test_client_supplied_names_reach_the_broker_log_escaped() -> None:
    from confluent_kafka import Consumer, Producer

    from gregor.testing import InProcessBroker

    hostile = "grp\r\x1b[31m ts=forged level=ERROR\u2028x"
    with InProcessBroker() as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "client.id": "cli\r\x1b[2Jent"})
        p.produce("esc-topic", b"v")
        assert p.flush(30) == 0
        del p  # its connections end with the broker's test, not after
        c = Consumer(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "group.id": hostile,
                "client.id": "cli\x1b]0;title\x07",
                "auto.offset.reset": "earliest",
            }
        )
        c.subscribe(["esc-topic"])
        try:
            while True:
                m = c.poll(1.0)
                if m is not None and m.error() is None:
                    break
        finally:
            c.close()
        text = b.read_log()
    assert 'group="grp\\r\\x1b[31m ts=forged level=ERROR\\u2028x"' in text
    for line in text.splitlines():
        assert line.isprintable(), repr(line)
    assert "\r" not in text and "\x1b" not in text and "\u2028" not in text


def test_log_rate_limit_counts_what_it_leaves_out() -> None:
    from gregor.broker.common.events import LogRateLimit

    now = [0.0]
    limit = LogRateLimit(limit=3, window_s=10.0, clock=lambda: now[0])
    assert [limit.allow() for _ in range(5)] == [True, True, True, False, False]
    assert limit.take_suppressed() == 2 and limit.take_suppressed() == 0
    now[0] = 9.9
    assert not limit.allow()
    now[0] = 10.0  # a new window
    assert limit.allow() and limit.take_suppressed() == 1
