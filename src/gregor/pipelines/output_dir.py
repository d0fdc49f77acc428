"""The job's output directory: the job removes only what it made itself.

Theory of operation. The job writes three things under ``--output-dir``: ``windows/`` (the
Parquet output), ``checkpoint/`` (Spark's) and ``broker/`` (the data of the broker it starts),
and marks the directory as its own with the file ``.gregor-pipeline``. :func:`prepare` runs
before anything else:

- a directory that does not exist, or is empty, is created and marked;
- a marked directory is the job's: a new run removes those three entries (unless ``keep``) and
  leaves anything else in it alone;
- any other directory (files of someone else's, no marker) is refused with
  :class:`OutputDirError`, before anything in it is touched.

So ``--output-dir .`` in a project directory is an error, not an empty project.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

MARKER = ".gregor-pipeline"
#: What the job writes under its output directory, and so all a new run may remove.
OWN_ENTRIES = ("windows", "checkpoint", "broker")

__all__ = ["MARKER", "OWN_ENTRIES", "OutputDirError", "prepare"]


class OutputDirError(Exception):
    """The output directory is not one the job may write to; the message says why."""


def _broker_running(out: Path) -> bool:
    """Whether a broker holds the lock (Kafka's ``.lock``) on the job's broker directory."""
    lock = out / "broker" / "logs" / ".lock"
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def prepare(path: str | Path, *, keep: bool = False) -> Path:
    """Make ``path`` ready for a run and return it (absolute); see the module docstring."""
    out = Path(path).absolute()
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"--output-dir {path} is a file, not a directory")
    if out.is_dir():
        entries = {p.name for p in out.iterdir()}
        if entries and MARKER not in entries:
            raise OutputDirError(
                f"--output-dir {path} is not empty and was not made by the pipeline (it has no {MARKER} "
                "file); give a new or empty directory, the job never deletes files it did not make"
            )
        if _broker_running(out):
            raise OutputDirError(
                f"--output-dir {path} is in use: the broker of a running job holds {out / 'broker'}"
            )
        if not keep:
            for name in OWN_ENTRIES:
                victim = out / name
                if victim.is_symlink() or victim.is_file():
                    victim.unlink()
                elif victim.is_dir():
                    shutil.rmtree(victim)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / MARKER).write_text(
            "This directory is the output of Gregor's reference pipeline; a new run replaces its "
            f"{', '.join(OWN_ENTRIES)} entries and nothing else.\n"
        )
    except OSError as e:
        raise OutputDirError(f"--output-dir {path}: {e.strerror}") from None
    return out
