"""The broker's log lines as logfmt (default) and as JSON objects (``gregor serve --output json``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from gregor.broker.events import log_event, setup_logging


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
    assert (doc["level"], doc["logger"], doc["event"], doc["topic"], doc["partitions"], doc["ok"]) == (
        "INFO", "gregor.test", "topic.created", "a b", 3, True)
    assert doc["ts"].endswith("Z")
    assert json.loads(second)["msg"] == "plain message"
    setup_logging("INFO")
    log_event(log, "topic.created", topic="a b", partitions=3)
    line = capsys.readouterr().err.strip()
    assert line.endswith('event=topic.created topic="a b" partitions=3')
