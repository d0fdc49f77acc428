"""Kafka's text checkpoint files, written atomically.

Every checkpoint file is a version line (``0``), a count line, then one entry per line::

    0
    2
    orders 0 1200          <- recovery-point-offset-checkpoint, log-start-offset-checkpoint,
    orders 1 877              replication-offset-checkpoint, cleaner-offset-checkpoint
                              (topic partition offset)
    0
    2
    3 0                    <- leader-epoch-checkpoint (epoch start_offset)
    5 1744

A write goes to ``<name>.tmp``, is fsynced, renamed over the file and the directory is fsynced,
so a crash leaves either the old or the new contents. A file that does not parse is reported as
``CheckpointError`` so callers can fall back (full recovery) and say so in the log.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

VERSION = 0

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class CheckpointError(ValueError):
    """A checkpoint file exists but does not parse."""


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes, *, sync: bool = True) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(path) or ".")


def _format(lines: list[str]) -> bytes:
    return ("\n".join([str(VERSION), str(len(lines)), *lines]) + "\n").encode()


def _parse(path: str, fields: int) -> list[list[str]] | None:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    try:
        if not lines or int(lines[0]) != VERSION:
            raise CheckpointError(f"{path}: unknown checkpoint version")
        count = int(lines[1])
        entries = [line.split() for line in lines[2 : 2 + count]]
        if len(entries) != count or any(len(e) != fields for e in entries):
            raise CheckpointError(f"{path}: expected {count} entries of {fields} fields")
        return entries
    except (IndexError, ValueError) as e:
        if isinstance(e, CheckpointError):
            raise
        raise CheckpointError(f"{path}: malformed checkpoint ({e})") from None


def format_offsets(offsets: Iterable[tuple[str, int, int]]) -> bytes:
    """The file contents for (topic, partition, offset) entries."""
    return _format([f"{t} {p} {o}" for t, p, o in sorted(offsets)])


def write_offsets(path: str, offsets: Iterable[tuple[str, int, int]], *, sync: bool = True) -> None:
    """Write (topic, partition, offset) entries."""
    write_atomically(path, format_offsets(offsets), sync=sync)


def read_offsets(path: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset; empty when the file is missing. Raises CheckpointError."""
    entries = _parse(path, 3)
    if entries is None:
        return {}
    try:
        return {(t, int(p)): int(o) for t, p, o in entries}
    except ValueError as e:
        raise CheckpointError(f"{path}: malformed entry ({e})") from None


def write_epochs(path: str, entries: Iterable[tuple[int, int]], *, sync: bool = True) -> None:
    """Write (epoch, start_offset) entries in order."""
    write_atomically(path, _format([f"{e} {o}" for e, o in entries]), sync=sync)


def read_epochs(path: str) -> list[tuple[int, int]] | None:
    """(epoch, start_offset) entries; None when the file is missing. Raises CheckpointError."""
    entries = _parse(path, 2)
    if entries is None:
        return None
    try:
        return [(int(e), int(o)) for e, o in entries]
    except ValueError as e:
        raise CheckpointError(f"{path}: malformed entry ({e})") from None
