"""The processes of a process group, read from ``/proc``, for tests of what a launcher leaves
behind when a terminal's Ctrl-C (SIGINT to the whole foreground process group) stops it.

A test starts the launcher in a group of its own (``subprocess.Popen(..., process_group=0)``:
its pid is the group id), sends ``os.killpg(pgid, signal.SIGINT)``, waits for the launcher and
then expects :func:`members` to be empty. A process that has exited but was not reaped by its
parent (a zombie, state ``Z``) keeps its group, so it is counted too. Linux only.
"""

from __future__ import annotations

import os

__all__ = ["members"]


def members(pgid: int) -> dict[int, str]:
    """pid -> state (``R``, ``S``, ``D``, ``Z`` for a zombie, ...) of every process in process
    group ``pgid``."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                stat = f.read()
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after the command, which may hold spaces
        if int(fields[2]) == pgid:
            found[int(entry.name)] = fields[0]
    return found
