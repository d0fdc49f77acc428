"""gregor.testing.jvm_archive: the options name the archive only once its build says it is done,
and stopping a build stops its whole process group and removes its directory."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from gregor.testing import jvm_archive


def test_no_options_until_the_build_names_an_archive_that_is_there(tmp_path: Path) -> None:
    # no archive yet: the quick compiler and the log options only
    quick = "-XX:TieredStopAtLevel=1 -Xlog:disable -Xlog:all=warning:stderr"
    assert jvm_archive.java_options(tmp_path) == quick  # still building: no done file
    (tmp_path / "done").write_text("")
    assert jvm_archive.java_options(tmp_path) == quick  # the build failed
    (tmp_path / "done").write_text(jvm_archive.ARCHIVE)
    assert jvm_archive.java_options(tmp_path) == quick  # named, but not there
    (tmp_path / jvm_archive.ARCHIVE).write_bytes(b"x")
    options = jvm_archive.java_options(tmp_path).split()
    assert options[0] == f"-XX:SharedArchiveFile={tmp_path / jvm_archive.ARCHIVE}"
    # JVM warnings (a class path that does not match the archive) go to stderr, not a job's stdout
    assert options[-2:] == ["-Xlog:disable", "-Xlog:all=warning:stderr"]


def test_stop_build_kills_the_group_and_removes_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / "archive"
    directory.mkdir()
    pid_file = directory / "child.pid"
    # a stand-in builder with a child of its own, as the real one has a JVM
    code = (
        "import subprocess, sys, time; c = subprocess.Popen(['sleep', '600']); "
        f"open({str(pid_file)!r}, 'w').write(str(c.pid)); time.sleep(600)"
    )
    builder = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    while not pid_file.exists() or not pid_file.read_text():
        assert builder.poll() is None
        time.sleep(0.01)
    child = int(pid_file.read_text())
    jvm_archive.stop_build(builder, directory)
    assert builder.returncode == -9
    assert not directory.exists()

    def state() -> str:
        try:
            return Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return "gone"

    # the child got the group's SIGKILL: it goes (or is a zombie of the init process, on its
    # way out) once the kernel has torn it down, which a busy machine may not have done yet
    # when stop_build returns (it waits for the builder only, a CI run once read "R" here)
    # (a child left running makes the test's timeout fail it)
    while state() not in ("gone", "Z"):
        time.sleep(0.01)
