"""The log's produce fast path, compiled (``storage._append``) and pure Python
(``storage._append_py``), must agree: the same LogAppendInfo or error for every batch, the same
stamped buffers, the same segments and indexes byte for byte."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.storage import fast_append

NOW = 1_700_000_000_000

CHILD = Path(__file__).with_name("fast_append_child.py")


def run_child(log_dir: Path, pure_python: bool) -> dict:
    env = dict(os.environ)
    env.pop("GREGOR_NO_EXTENSIONS", None)
    if pure_python:
        env["GREGOR_NO_EXTENSIONS"] = "1"
    out = subprocess.run(
        [sys.executable, str(CHILD), str(log_dir)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
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
    # Issue 35: the records are checked on both paths, with Kafka's errors.
    assert labels["count-1-holds-3"] == [
        "InvalidRecordError",
        "Incorrect declared batch size, records still remaining in file",
    ]
    assert labels["count-5-holds-3"] == [
        "InvalidRecordError",
        "Incorrect declared batch size, premature EOF reached",
    ]
    assert labels["deltas-0-2-1"][0] == "InvalidRecordError"
    assert labels["record-too-old"][0] == "InvalidTimestampError"
    assert labels["max-ts-lies"][0][4] == NOW + 760  # the records' max timestamp, not the header's
    assert (
        labels["log-append-time-bit"][0][2] == -1
        and labels["log-append-time-bit"][0][4] == NOW + 770
    )
    assert labels["gzip"][0][6] == 1 and labels["zstd"][0][6] == 2
    assert labels["lz4-count-1-holds-3"] == [
        "InvalidRecordError",
        "Incorrect declared batch size, records still remaining in file",
    ]
    assert labels["zstd-junk"][0] == "CorruptRecordError"
    assert labels["after-errors"][0][0] == labels["late-0"][0][0] - 1
    assert labels["late-29"][0][0] == reference["state"]["log_end_offset"] - 1
    assert len(reference["state"]["segments"]) >= 3
    # Full indexes rolled segments; the time index skipped the timestamps that did not grow.
    assert any(
        entries == 12 or t_entries == 7
        for entries, _, t_entries, *_ in reference["state"]["indexes"][:-1]
    )
    # Each new leader epoch starts at the first offset appended in it; the producer state's
    # map end offset follows the log end offset.
    state = reference["state"]
    firsts = [
        labels[f"plain-{('bytes', 'bytearray', 'memoryview')[i % 3]}-{i}"][0][0]
        for i in (0, 10, 20, 30)
    ]
    firsts += [labels["big-bytes"][0][0], labels["after-errors"][0][0]]
    assert state["epochs"] == [[epoch, first] for epoch, first in enumerate(firsts)]
    assert state["latest_epoch"] == 5
    assert state["map_end_offset"] == state["log_end_offset"]
    lookups = labels["late-5-lookups"][0]
    assert lookups[0] == lookups[1] and lookups[-1][0] > lookups[0][0]
    assert files(tmp_path / "c" / "t-0") == files(tmp_path / "p" / "t-0")


@pytest.mark.skipif(
    fast_append.implementation() != "cython", reason="the compiled fast path is not built here"
)
@settings(max_examples=examples(400), deadline=None)
@given(data=st.binary(max_size=5000), start=st.integers(0, 15))
def test_compiled_crc_matches_the_crc32c_package(data: bytes, start: int) -> None:
    """The fast path's CRC32C (the CPU's instruction in three interleaved streams where there
    is one) against the crc32c package, at every length and alignment."""
    from gregor.storage import _append  # type: ignore[attr-defined]

    view = memoryview(data)[min(start, len(data)) :]
    assert _append.batch_crc(view) == crc32c(view)


@pytest.mark.skipif(
    fast_append.implementation() != "cython", reason="the compiled fast path is not built here"
)
def test_compiled_crc_at_block_boundaries() -> None:
    from gregor.storage import _append  # type: ignore[attr-defined]

    rnd = random.Random(11)
    blob = rnd.randbytes(3 * 512 * 4 + 64)
    for n in sorted(
        {k * m + d for k in (128, 384, 512, 1536) for m in range(5) for d in (-1, 0, 1, 8)}
    ):
        if 0 <= n <= len(blob):
            assert _append.batch_crc(blob[:n]) == crc32c(blob[:n]), n
    assert _append.batch_crc(b"") == 0
    assert _append.batch_crc(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_an_append_info_the_caller_keeps_does_not_change(tmp_path: Path) -> None:
    """The compiled append refills its last LogAppendInfo only when no one else holds it: an
    info the caller kept stays as it was, one it dropped may be reused."""
    from gregor.protocol.records import build_batch
    from gregor.storage import Log, LogConfig

    now = 1_700_000_000_000
    log = Log(
        str(tmp_path / "t-0"), LogConfig.from_props({}), clock=lambda: now, sync_metadata=False
    )
    try:
        kept = log.append(build_batch([(now, b"k", b"a"), (now, b"k", b"b")]))
        snapshot = tuple(kept)
        second = log.append(build_batch([(now + 1, b"k", b"c")]))
        assert tuple(kept) == snapshot and snapshot[:2] == (0, 1)
        assert tuple(second)[:2] == (2, 2) and second is not kept
        del kept, second
        infos = [tuple(log.append(build_batch([(now + 2 + i, None, b"x" * i)]))) for i in range(5)]
        assert [info[:2] for info in infos] == [(3 + i, 3 + i) for i in range(5)]
        assert [info[7] for info in infos] == sorted({info[7] for info in infos})  # sizes grew
    finally:
        log.close()
