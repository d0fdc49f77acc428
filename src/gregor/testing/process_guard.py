"""A guard that refuses to start a child process: the fast test run starts none.

    with no_processes() as started:
        ...                  # subprocess.run(...) raises ProcessStartRefused
    started                  # what was refused, one line each

Theory of operation. While the guard is on, every way this process has to start another one is
replaced by a function that records the attempt and raises ``ProcessStartRefused``: the fork
and exec primitive under ``subprocess.Popen`` and ``multiprocessing`` (``_posixsubprocess.
fork_exec``, and ``subprocess``'s own name for it), ``os.fork``, ``os.forkpty``, ``os.posix_spawn``, ``os.posix_spawnp``,
``os.system``, ``asyncio.create_subprocess_exec``/``_shell`` (uvloop spawns through libuv,
not through ``subprocess``), and a request to the fork server of broker processes
(``gregor.launch.forkserver.request_fork``). The record is kept even when the caller swallows the exception
(a broker started from a thread, a ``try``), so the test can still be failed for it
(``tests/conftest.py`` does).

An attempt made from a module named in ``allowed`` (any frame of the caller's stack) goes
through: for a library that runs a helper program as part of an answer that needs no process
of ours (``ctypes.util.find_library`` runs ``ldconfig``). Each such entry says why, where the
guard is switched on.

The guard patches module attributes, so it holds for every thread of the process; it is not
re-entrant across threads (one test at a time, as pytest runs them).
"""

from __future__ import annotations

import _posixsubprocess
import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any

from gregor.launch import forkserver

__all__ = ["ProcessStartRefused", "no_processes"]


class ProcessStartRefused(RuntimeError):
    """A child process was about to start while the guard was on."""


#: (module, attribute) of every process-starting function the guard replaces.
_TARGETS: tuple[tuple[Any, str], ...] = (
    (_posixsubprocess, "fork_exec"),
    (subprocess, "_fork_exec"),  # subprocess's own name for it
    (os, "fork"),
    (os, "forkpty"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
    (os, "system"),
    (asyncio, "create_subprocess_exec"),
    (asyncio, "create_subprocess_shell"),
    (asyncio.subprocess, "create_subprocess_exec"),
    (asyncio.subprocess, "create_subprocess_shell"),
    (forkserver, "request_fork"),  # a broker forked by the test run's fork server
)


def _called_from(modules: Collection[str]) -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name in modules:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


@contextmanager
def no_processes(allowed: Collection[str] = (), hint: str = "") -> Iterator[list[str]]:
    """Refuse every process start until the block ends; yields the list of refused starts
    (``"<function>: <first argument>"``), which grows as they happen."""
    refused: list[str] = []
    saved: list[tuple[Any, str, Callable[..., Any]]] = []

    def guard(owner: Any, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        what = f"{getattr(owner, '__name__', owner)}.{name}"

        def refuse(*args: Any, **kwargs: Any) -> Any:
            if allowed and _called_from(allowed):
                return original(*args, **kwargs)
            argv = args[0] if args else ""
            if isinstance(argv, (list, tuple)):
                argv = " ".join(os.fsdecode(a) for a in argv[:4])
            line = f"{what}({argv!s:.120})"
            refused.append(line)
            raise ProcessStartRefused(f"{line}: this run starts no processes{hint}")

        return refuse

    for owner, name in _TARGETS:
        original = getattr(owner, name, None)
        if original is None:
            continue
        saved.append((owner, name, original))
        setattr(owner, name, guard(owner, name, original))
    try:
        yield refused
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)
