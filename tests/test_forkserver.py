"""The fork server of broker processes (``gregor.launch.forkserver``): a child runs its module
as ``python -m`` would (arguments, environment, directory, output, exit code, a traceback for
an uncaught exception, ``random`` seeded afresh), its ``Popen`` answers ``poll``, ``wait`` and
signals as a ``subprocess`` child's does, closing the server ends the children left, and a
child whose environment differs where an interpreter or an import reads it is not forked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gregor.launch import process
from gregor.launch.forkserver import ForkedChild, ForkServer
from gregor.launch.process import BrokerProcess

pytestmark = pytest.mark.process

CHILD = """
import json, os, random, sys, time
if sys.argv[1] == "sleep":
    print("sleeping", flush=True)
    time.sleep(600)
if sys.argv[1] == "raise":
    raise LookupError("from the child")
print(json.dumps({"argv": sys.argv[1:], "x": os.environ.get("GREGOR_FORK_X"),
                  "cwd": os.getcwd(), "random": random.random(), "name": __name__}))
sys.exit(int(sys.argv[2]))
"""


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ForkServer]:
    (tmp_path / "forkchild.py").write_text(CHILD)
    # the template's sys.path comes from its own start: the module's directory is on it
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    server = ForkServer(preload=("json",))
    yield server
    server.close()


def output(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def wait_sleeping(child: subprocess.Popen[bytes], out: Path) -> None:
    """Until the child says it sleeps (waiting on its exit pipe between looks)."""
    while "sleeping" not in output(out):
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.05)


def test_a_child_runs_its_module_with_its_arguments_environment_and_directory(
    server: ForkServer, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    results = []
    for n in (1, 2):
        out = tmp_path / f"out{n}"
        env = dict(os.environ, GREGOR_FORK_X=f"x{n}")
        child = server.spawn(["-m", "forkchild", "print", "3"], env, str(work), str(out))
        assert child.wait(60) == 3 and child.returncode == 3 and child.poll() == 3
        results.append(json.loads(output(out)))
    assert [r["argv"] for r in results] == [["print", "3"], ["print", "3"]]
    assert [r["x"] for r in results] == ["x1", "x2"]
    assert {r["cwd"] for r in results} == {str(work)}
    assert {r["name"] for r in results} == {"__main__"}
    assert results[0]["random"] != results[1]["random"]  # each child seeded afresh


def test_an_uncaught_exception_exits_1_with_its_traceback(
    server: ForkServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    child = server.spawn(["-m", "forkchild", "raise"], os.environ, str(tmp_path), str(out))
    assert child.wait(60) == 1
    assert "LookupError: from the child" in output(out)


def test_signals_reach_the_child_and_its_exit_says_which(
    server: ForkServer, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    child = server.spawn(["-m", "forkchild", "sleep"], os.environ, str(tmp_path), str(out))
    assert child.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(0.05)
    wait_sleeping(child, out)
    child.send_signal(signal.SIGTERM)
    assert child.wait(60) == -signal.SIGTERM
    child.kill()  # ended: nothing is signalled (its pid may be another process's by now)
    assert child.returncode == -signal.SIGTERM


def test_closing_the_server_kills_the_children_left(server: ForkServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    child = server.spawn(["-m", "forkchild", "sleep"], os.environ, str(tmp_path), str(out))
    wait_sleeping(child, out)
    server.close()
    assert child.wait(60) == -signal.SIGKILL


def test_only_modules_are_run(server: ForkServer, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="-m <module>"):
        server.spawn(["-c", "pass"], {}, str(tmp_path), str(tmp_path / "out"))


def test_a_child_whose_start_time_environment_differs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GREGOR_FORK_X", "template")
    monkeypatch.delenv("GREGOR_FORK_IMPORT", raising=False)
    server = ForkServer(start_time_env=("GREGOR_FORK_IMPORT",))
    same = dict(os.environ, GREGOR_FORK_X="child")  # read when it runs: may differ
    assert server.differs_at_start(same) == []
    for key in ("GREGOR_FORK_IMPORT", "LD_PRELOAD", "PYTHONHASHSEED"):
        assert server.differs_at_start({**same, key: "1"}) == [key]
        with pytest.raises(ValueError, match=f"{key} differ"):
            server.spawn(["-m", "json.tool"], {**same, key: "1"}, str(tmp_path), os.devnull)
    server.close()


def test_a_broker_forks_unless_its_start_time_environment_differs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(process.BROKER_START_TIME_ENV[0], raising=False)
    server = ForkServer(process.BROKER_PRELOAD, process.BROKER_START_TIME_ENV)
    previous = process.use_fork_server(server)
    try:
        with BrokerProcess() as forked:
            assert isinstance(forked.proc, ForkedChild)
            assert "event=broker.started" in forked.read_log()
        assert forked.proc.returncode == 0
        monkeypatch.setenv(process.BROKER_START_TIME_ENV[0], "1")
        with BrokerProcess() as fresh:  # the compiled twins are chosen at import: a new one
            assert fresh.proc is not None and not isinstance(fresh.proc, ForkedChild)
    finally:
        process.use_fork_server(previous)
        server.close()


def test_a_child_that_cannot_start_says_why_and_exits_1(server: ForkServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    missing = tmp_path / "missing"
    child = server.spawn(["-m", "forkchild", "print", "0"], os.environ, str(missing), str(out))
    assert child.wait(60) == 1
    assert "FileNotFoundError" in output(out) and str(missing) in output(out)
