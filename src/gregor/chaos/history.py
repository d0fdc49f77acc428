"""A run's history: every operation's invocation and completion, one JSON object a line.

An entry is a dict::

    {"index": 7, "type": "invoke", "process": 3, "f": "txn", "time": 1.25,
     "value": [["send", 2, 17, null], ["poll", []]], "client": "confluent"}
    {"index": 9, "type": "ok", "process": 3, "f": "txn", "time": 1.61,
     "value": [["send", 2, 17, 45], ["poll", [[2, 44, 16], [2, 45, 17]]]],
     "commit": [[2, 46]], "group": "chaos-a1", "epoch": 2, "commit_start": 1.58}

``type`` is ``invoke`` then one of ``ok`` (it happened), ``fail`` (it certainly did not: an
aborted transaction) or ``info`` (unknown: a timeout, a crash). ``process`` is a logical client
(a crashed or replaced client gets a new number), ``time`` seconds since the run began
(``CLOCK_MONOTONIC``, shared by every process of the machine). Micro-operations of ``value``:

- ``["send", key, value, offset]``: offset is null until acknowledged;
- ``["poll", [[key, offset, value], ...], epoch]``: what one poll returned, in order, and the
  consumer's epoch once it returned (optional; else the completion's ``epoch``).

Other operations: ``assign`` (value: the keys), ``subscribe`` (value: the keys), ``crash``,
``committed`` (the group's committed offsets as fetched, value ``[[key, offset], ...]``),
``final-poll`` (the catch-up read after healing: value a poll, ``complete`` the keys read to
their end) and nemesis operations (``process`` ``"nemesis"``). Completions of consumers carry
``group``, ``epoch`` (bumped at every assignment change, rebalance, or seek) and ``commit``
(offsets the operation committed, as ``[[key, offset], ...]``); transactions carry
``commit_start`` (when the commit was asked for).

``HistoryWriter`` appends entries as they come (thread-safe; flushed per line, so a run that
dies leaves its history behind); ``read_history`` loads a file.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

__all__ = ["HistoryWriter", "Op", "read_history"]

Op = dict[str, Any]


class HistoryWriter:
    def __init__(self, path: str | Path | None, t0: float | None = None) -> None:
        self.t0 = time.monotonic() if t0 is None else t0
        self._lock = threading.Lock()
        self._file: TextIO | None = open(path, "w") if path is not None else None  # noqa: SIM115
        self.entries: list[Op] = []

    def now(self) -> float:
        return time.monotonic() - self.t0

    def append(self, entry: Op) -> Op:
        with self._lock:
            entry = {"index": len(self.entries), **entry}
            entry.setdefault("time", round(self.now(), 6))
            self.entries.append(entry)
            if self._file is not None:
                self._file.write(json.dumps(entry, separators=(",", ":")) + "\n")
                self._file.flush()
        return entry

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_history(path: str | Path) -> list[Op]:
    return list(_lines(Path(path)))


def _lines(path: Path) -> Iterator[Op]:
    with open(path) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
