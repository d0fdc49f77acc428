"""Crash points of the translate/commit cycle, for the crash tests.

``GREGOR_TABLES_CRASH_AT=<point>:<n>`` in a broker's environment makes the process SIGKILL
itself the ``n``-th time (1-based) any translator reaches ``point``: the tests kill a real
``gregor serve`` exactly there, then restart it and compare the table with the topic. The
points, in the order one commit passes them:

* ``read``: records read and converted, not yet buffered for a commit;
* ``commit.begin``: a commit is due, nothing of it written yet;
* ``commit.staged``: its data files, manifest and manifest list are written, the catalog not
  yet told (the files are orphans if the process dies here);
* ``dead-letters.done`` (typed modes, a commit with dead letters): the dead-letter table took
  its commit, the topic table not yet (``gregor.tables.dead_letters``);
* ``commit.done``: the catalog took the commit, the translator has not yet moved on.

Unset (always, outside tests), :func:`crash_point` only counts nothing and returns.
"""

from __future__ import annotations

import os
import signal

ENV = "GREGOR_TABLES_CRASH_AT"
POINTS = ("read", "commit.begin", "commit.staged", "commit.done")
#: The points only a typed mode's translator passes (between its two tables' commits).
TYPED_POINTS = ("dead-letters.done",)


def _parse(text: str) -> tuple[str, int] | None:
    point, _, count = text.strip().rpartition(":")
    if point not in POINTS + TYPED_POINTS or not count.isdigit() or int(count) < 1:
        return None
    return point, int(count)


#: The configured point, read from the environment at the first :func:`crash_point` (not at
#: import: a broker forked from a template that imported this module reads its own).
_target: tuple[str, int] | None = None
_read = False
_seen = 0


def crash_point(point: str) -> None:
    """SIGKILL this process if it is the configured point's configured visit."""
    global _seen, _target, _read
    if not _read:
        _target, _read = _parse(os.environ.get(ENV, "")), True
    if _target is None or _target[0] != point:
        return
    _seen += 1
    if _seen == _target[1]:
        os.kill(os.getpid(), signal.SIGKILL)
