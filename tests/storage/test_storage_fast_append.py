"""The log's produce fast path, compiled (``storage._append``) and pure Python
(``storage._append_py``), must agree: the same LogAppendInfo or error for every batch, the same
stamped buffers, the same segments and indexes byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gregor.storage import fast_append

CHILD = Path(__file__).with_name("fast_append_child.py")


def run_child(log_dir: Path, pure_python: bool) -> dict:
    env = dict(os.environ)
    env.pop("GREGOR_NO_EXTENSIONS", None)
    if pure_python:
        env["GREGOR_NO_EXTENSIONS"] = "1"
    out = subprocess.run(
        [sys.executable, str(CHILD), str(log_dir)], env=env, check=True, capture_output=True, text=True
    )
    result: dict = json.loads(out.stdout)
    return result


def files(log_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log_dir.iterdir()) if p.is_file()}


@pytest.mark.skipif(
    fast_append.implementation() != "cython", reason="the compiled fast path is not built here"
)
def test_compiled_and_reference_fast_paths_agree(tmp_path: Path) -> None:
    compiled = run_child(tmp_path / "c" / "t-0", pure_python=False)
    reference = run_child(tmp_path / "p" / "t-0", pure_python=True)
    assert compiled["implementation"] == "cython"
    assert reference["implementation"] == "python"
    assert compiled["results"] == reference["results"]
    assert compiled["state"] == reference["state"]
    # What the run must have covered: appends on the fast path, rolls, and each error.
    labels = {r[0]: r[1:] for r in reference["results"]}
    assert labels["plain-bytes-0"][0][:2] == [0, 0]
    assert labels["big-bytes"][0][6:8] == [1, 17075]
    assert labels["bad-crc"][0] == "CorruptRecordError"
    assert labels["too-old"][0] == labels["future"][0] == "InvalidTimestampError"
    assert labels["after-errors"][0][0] == reference["state"]["log_end_offset"] - 1
    assert len(reference["state"]["segments"]) >= 3
    assert files(tmp_path / "c" / "t-0") == files(tmp_path / "p" / "t-0")
