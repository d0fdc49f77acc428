"""The main job never deletes a directory it did not make (issue 42: ``--output-dir .`` emptied
a project), and ``--rows`` means the same in its two command lines.

The job runs for real (``python -m gregor.pipelines``, ``gregor pipeline run``,
``scripts/run.sh``) against a broker port nothing listens on: what the output directory looks
like when the job stops at its first connection is what it decided about the directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gregor.pipelines.output_dir import MARKER
from gregor.testing import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def closed() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def a_project(path: Path) -> Path:
    """Somebody's directory: files the job must never touch."""
    (path / "src").mkdir(parents=True)
    (path / "src" / "app.py").write_text("print('mine')\n")
    (path / "notes.txt").write_text("do not delete\n")
    return path


def untouched(path: Path) -> bool:
    return (
        sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))
        == ["notes.txt", "src", "src/app.py"]
        and (path / "notes.txt").read_text() == "do not delete\n"
    )


def job(
    *args: str, cwd: Path | None = None, module: bool = True
) -> subprocess.CompletedProcess[str]:
    argv = ["-m", "gregor.pipelines"] if module else ["-m", "gregor", "pipeline", "run"]
    return subprocess.run(
        # JSON page views: the Avro default would need the (closed) cluster's registry
        [sys.executable, *argv, "--events", "10", "--value-format", "json", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=240,
    )


def test_python_m_pipelines_refuses_a_foreign_directory(tmp_path: Path, closed: str) -> None:
    project = a_project(tmp_path / "project")
    r = job("--output-dir", str(project), "--bootstrap-servers", closed)
    assert r.returncode == 1
    assert r.stderr == (
        f"Error: --output-dir {project} is not empty and was not made by the pipeline (it has no "
        f"{MARKER} file); give a new or empty directory, the job never deletes files it did not make\n"
    )
    assert untouched(project)


def test_gregor_pipeline_run_refuses_the_current_directory(tmp_path: Path, closed: str) -> None:
    project = a_project(tmp_path / "project")
    r = job("--output-dir", ".", "--bootstrap-servers", closed, cwd=project, module=False)
    assert r.returncode == 1
    assert r.stderr.startswith(
        "Error: --output-dir . is not empty and was not made by the pipeline"
    )
    assert r.stderr.count("\n") == 1
    assert untouched(project)


@pytest.mark.skipif(
    shutil.which("java") is None, reason="scripts/run.sh needs Java before it runs the job"
)
def test_run_sh_refuses_a_foreign_gregor_pipeline_dir(tmp_path: Path, closed: str) -> None:
    project = a_project(tmp_path / "project")
    r = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "run.sh"),
            "--events",
            "10",
            "--value-format",
            "json",
            "--bootstrap-servers",
            closed,
        ],
        capture_output=True,
        text=True,
        timeout=280,
        env={**os.environ, "GREGOR_PIPELINE_DIR": str(project)},
    )
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1].startswith(
        f"Error: --output-dir {project} is not empty and was not made by"
    )
    assert untouched(project)


def test_a_new_or_empty_directory_is_made_the_jobs(tmp_path: Path, closed: str) -> None:
    for out in (tmp_path / "new" / "deep", tmp_path / "empty"):
        if out.name == "empty":
            out.mkdir()
        r = job("--output-dir", str(out), "--bootstrap-servers", closed)
        assert (
            r.returncode == 1 and f"cannot connect to {closed}" in r.stderr
        )  # past the directory, at the broker
        assert [p.name for p in out.iterdir()] == [MARKER]


def test_a_directory_of_an_earlier_run_loses_only_the_jobs_own_entries(
    tmp_path: Path, closed: str
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER).write_text("")
    for own in ("windows/batch_id=0", "checkpoint/offsets", "broker/logs"):
        (out / own).mkdir(parents=True)
        (out / own / "data").write_text("old")
    (out / "my-report.md").write_text("kept\n")
    r = job("--output-dir", str(out), "--bootstrap-servers", closed, "--keep")
    assert r.returncode == 1 and f"cannot connect to {closed}" in r.stderr
    assert (out / "windows" / "batch_id=0" / "data").read_text() == "old"  # --keep keeps them
    r = job("--output-dir", str(out), "--bootstrap-servers", closed, module=False)
    assert r.returncode == 1 and f"cannot connect to {closed}" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, "my-report.md"])
    assert (out / "my-report.md").read_text() == "kept\n"


def test_a_directory_whose_broker_still_runs_is_refused(tmp_path: Path, closed: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / MARKER).write_text("")
    with BrokerProcess(data_dir=out / "broker"):
        r = job("--output-dir", str(out), "--bootstrap-servers", closed)
        assert r.returncode == 1
        assert (
            r.stderr
            == f"Error: --output-dir {out} is in use: the broker of a running job holds {out / 'broker'}\n"
        )
        assert (out / "broker" / "logs" / "meta.properties").exists()


def test_help_says_what_the_job_deletes_and_what_rows_means() -> None:
    for module in (True, False):
        argv = (
            ["-m", "gregor.pipelines", "--help"]
            if module
            else ["-m", "gregor", "pipeline", "run", "--help"]
        )
        text = " ".join(
            subprocess.run(
                [sys.executable, *argv],
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "COLUMNS": "200"},
            ).stdout.split()
        )
        assert (
            "a new run replaces only the job's own windows/, checkpoint/ and broker/ in it" in text
        )
        assert "nothing the job did not make is ever deleted" in text
        assert "Result rows to print: a number (0: no table) or 'all'" in text


@pytest.mark.parametrize("module", [True, False])
def test_rows_takes_the_same_values_in_both_command_lines(
    tmp_path: Path, closed: str, module: bool
) -> None:
    for bad in ("-1", "many"):
        r = job(
            "--rows",
            bad,
            "--output-dir",
            str(tmp_path / "o"),
            "--bootstrap-servers",
            closed,
            module=module,
        )
        assert r.returncode == 2 and "rows" in r.stderr
        assert not (tmp_path / "o").exists()  # refused before the directory was touched
    for good in ("0", "5", "all"):
        r = job(
            "--rows",
            good,
            "--output-dir",
            str(tmp_path / "o"),
            "--bootstrap-servers",
            closed,
            module=module,
        )
        assert r.returncode == 1 and f"cannot connect to {closed}" in r.stderr
