"""Copying a partition's log directory to another log directory while the log keeps taking
writes (AlterReplicaLogDirs), in two steps.

Theory of operation. ``copy_all`` (any thread, while the owner keeps appending) copies every
file of the source directory into the future directory (``<topic>-<partition>.<uuid>-future``
in the target log directory), noting for each file the inode and the size it copied, and
fsyncs them. ``catch_up`` (on the log's owner, with no write in between it and the swap that
follows) makes the copy equal to the source as it is now: a segment file (``.log``) that is
the same inode and only grew gets just the bytes appended since (segments are append-only);
any other file that changed (indexes, which are memory-mapped, snapshots, checkpoints, a
segment compaction replaced or truncation shortened) is copied again whole, and files the
source no longer has (retention) are removed. The caller then renames the future directory
into place and opens it as the partition's log. A partial record read while it was being
written is completed by the tail copy, because bytes are only ever added after it.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

FUTURE_DIR_SUFFIX = "-future"
_CHUNK = 1 << 20


@dataclass
class LogCopy:
    source_dir: str
    future_dir: str
    #: file name -> (inode, bytes copied) of what ``copy_all`` copied
    copied: dict[str, tuple[int, int]] = field(default_factory=dict)


def _files(directory: str) -> dict[str, os.stat_result]:
    """The regular files of ``directory`` with their stat (one stat each)."""
    with os.scandir(directory) as entries:
        return {e.name: e.stat() for e in entries if e.is_file()}


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_all(job: LogCopy) -> None:
    os.makedirs(job.future_dir, exist_ok=True)
    for name, st in _files(job.source_dir).items():
        dst = os.path.join(job.future_dir, name)
        try:
            shutil.copyfile(os.path.join(job.source_dir, name), dst)
        except FileNotFoundError:  # deleted meanwhile (retention): catch_up settles it
            continue
        job.copied[name] = (st.st_ino, os.path.getsize(dst))
        _fsync(dst)
    _fsync(job.future_dir)


def _append_tail(src: str, dst: str, start: int) -> None:
    with open(src, "rb") as fin, open(dst, "r+b") as fout:
        fin.seek(start)
        fout.seek(start)
        fout.truncate()
        while chunk := fin.read(_CHUNK):
            fout.write(chunk)
        fout.flush()
        os.fsync(fout.fileno())


def catch_up(job: LogCopy) -> int:
    """Bring the copy level with the source; the bytes copied in this step."""
    moved = 0
    now = _files(job.source_dir)
    for name, st in now.items():
        src, dst = os.path.join(job.source_dir, name), os.path.join(job.future_dir, name)
        before = job.copied.get(name)
        if (
            name.endswith(".log")
            and before is not None
            and before[0] == st.st_ino
            and st.st_size >= before[1]
        ):
            if st.st_size > before[1]:
                _append_tail(src, dst, before[1])
                moved += st.st_size - before[1]
            continue
        shutil.copyfile(src, dst)
        _fsync(dst)
        moved += st.st_size
    for name in set(job.copied) - set(now):
        os.unlink(os.path.join(job.future_dir, name))
    _fsync(job.future_dir)
    return moved
