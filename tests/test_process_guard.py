"""The fast run's process guard (``gregor.testing.process_guard``): every way to start a process
is refused while it is on, the refusal is recorded even when swallowed, an allowed caller goes
through, and everything is put back when it ends. No process is started here: the refusals
happen before any fork, and "put back" is checked on the functions themselves.
"""

from __future__ import annotations

import _posixsubprocess
import asyncio
import multiprocessing
import os
import subprocess
import sys
import threading

import pytest

from gregor.launch import forkserver
from gregor.testing.process_guard import ProcessStartRefused, no_processes


def current() -> dict[str, object]:
    """The functions the guard replaces, as they are now (the fast run's own guard may be on
    around this test: the guard puts back what it found)."""
    return {
        "fork_exec": _posixsubprocess.fork_exec,
        "subprocess._fork_exec": subprocess._fork_exec,  # type: ignore[attr-defined]
        "fork": os.fork,
        "posix_spawn": os.posix_spawn,
        "system": os.system,
        "create_subprocess_exec": asyncio.create_subprocess_exec,
        "request_fork": forkserver.request_fork,
    }


def test_subprocess_run_is_refused_and_recorded() -> None:
    with no_processes(hint=" (a hint)") as refused:
        with pytest.raises(ProcessStartRefused, match=r"this run starts no processes \(a hint\)"):
            subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert len(refused) == 1 and refused[0].startswith("subprocess._fork_exec(")
    assert "-c pass" in refused[0]


def test_every_way_to_start_a_process_is_refused() -> None:
    async def spawn() -> None:
        await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")

    with no_processes() as refused:
        with pytest.raises(ProcessStartRefused):
            os.fork()
        with pytest.raises(ProcessStartRefused):
            os.system("true")
        with pytest.raises(ProcessStartRefused):
            os.posix_spawn(sys.executable, [sys.executable, "-c", "pass"], os.environ)
        with pytest.raises(ProcessStartRefused):
            asyncio.run(spawn())
        with pytest.raises(ProcessStartRefused):  # Popen's own posix_spawn route
            subprocess.Popen([sys.executable, "-c", "pass"], close_fds=False)
        spawn_ctx = multiprocessing.get_context("spawn")
        with pytest.raises(ProcessStartRefused):
            spawn_ctx.Process(target=print).start()
        with pytest.raises(ProcessStartRefused):  # a broker from the fork server (none starts)
            forkserver.request_fork(
                ["-m", "gregor", "serve"], {}, ".", os.devnull, forkserver.ForkServer()
            )
    assert [line.split("(", 1)[0] for line in refused] == [
        "os.fork",
        "os.system",
        "os.posix_spawn",
        "asyncio.create_subprocess_exec",
        "os.posix_spawn",
        "_posixsubprocess.fork_exec",
        "gregor.launch.forkserver.request_fork",
    ]


def test_a_refusal_swallowed_on_another_thread_is_still_recorded() -> None:
    def start_quietly() -> None:
        try:
            subprocess.run(["true"])
        except ProcessStartRefused:
            pass

    with no_processes() as refused:
        t = threading.Thread(target=start_quietly)
        t.start()
        t.join()
    assert refused == ["subprocess._fork_exec(true)"]


def test_an_allowed_caller_goes_through() -> None:
    seen: list[tuple[object, ...]] = []

    def fake_system(*args: object) -> int:
        seen.append(args)
        return 0

    # The allowed module's call reaches the function the guard wrapped (a stand-in here, so
    # that nothing starts), anyone else's is refused.
    before = os.system
    os.system = fake_system
    try:
        with no_processes(allowed={__name__}) as refused:
            assert os.system("allowed") == 0
        with no_processes(allowed={"some.other.module"}) as refused_elsewhere:
            with pytest.raises(ProcessStartRefused):
                os.system("refused")
    finally:
        os.system = before
    assert seen == [("allowed",)] and refused == []
    assert refused_elsewhere == ["os.system(refused)"]


def test_everything_is_put_back() -> None:
    before = current()
    with no_processes():
        during = current()
    assert all(during[name] is not before[name] for name in before)
    with pytest.raises(ZeroDivisionError), no_processes():
        1 / 0  # noqa: B018
    after = current()
    assert all(after[name] is before[name] for name in before)
