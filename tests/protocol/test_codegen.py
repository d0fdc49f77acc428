"""The generator: guide parsing, version merging, --check, --counts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

from codegen import generate, guide, schema  # noqa: E402

SAMPLE = """\
Some prose.
Demo Request (Version: 0) => name [parts] [ids]
name => STRING
parts => index [replicas] blob
index => INT32
replicas => INT32
blob => NULLABLE_BYTES
ids => INT64
Field |
Description |
---|
name | The name. |
parts | The parts. |
index | The index. |
replicas | The replicas. |
blob | |
ids | Ids. |
Demo Request (Version: 1) => name extra [parts] [ids] TAG_BUFFER
name => COMPACT_NULLABLE_STRING
extra => UUID
parts => index [replicas] blob TAG_BUFFER
index => INT32
replicas => INT32
blob => COMPACT_NULLABLE_BYTES
ids => INT64
Field |
Description |
---|
UNKNOWN_SERVER_ERROR | -1 | False | The server experienced an unexpected error. |
NONE | 0 | False | |
"""


def test_parse_depth_first_blocks() -> None:
    versions, errors = guide.parse_guide(SAMPLE)
    v0, v1 = versions
    assert (v0.api, v0.kind, v0.version, v0.flexible) == ("Demo", "request", 0, False)
    assert [f.name for f in v0.fields] == ["name", "parts", "ids"]
    parts = v0.fields[1]
    assert parts.is_array and [f.name for f in parts.fields] == ["index", "replicas", "blob"]
    assert parts.fields[1].is_array and parts.fields[1].type == "INT32"  # [replicas] of INT32
    assert v0.fields[2].is_array and v0.fields[2].type == "INT64"
    assert v0.fields[0].about == "The name." and parts.fields[2].about == ""
    assert v1.flexible and v1.fields[2].fields[2].type == "COMPACT_NULLABLE_BYTES"
    assert [(e.name, e.code, e.retriable) for e in errors] == [
        ("UNKNOWN_SERVER_ERROR", -1, False), ("NONE", 0, False)]


def test_merge_versions() -> None:
    versions, _ = guide.parse_guide(SAMPLE)
    merged = schema.merge_message(versions)
    assert merged["versions"] == "0-1" and merged["flexible_versions"] == "1-1"
    by_name = {f["name"]: f for f in merged["fields"]}
    assert [f["name"] for f in merged["fields"]] == ["name", "extra", "parts", "ids"]
    assert by_name["name"]["nullable_versions"] == "1-1"
    assert by_name["extra"]["versions"] == "1-1" and by_name["extra"]["type"] == "uuid"
    assert by_name["ids"] == {"name": "ids", "type": "int64", "array": True, "versions": "0-1", "about": "Ids."}
    blob = by_name["parts"]["fields"][2]
    assert blob["type"] == "bytes" and blob["nullable_versions"] == "0-1"


def test_parse_errors() -> None:
    with pytest.raises(guide.GuideError):
        guide.parse_guide("X Request (Version: 0) => a\na => WEIRD_TYPE\n")
    with pytest.raises(guide.GuideError):
        guide.parse_guide("X Request (Version: 0) => a b\na => INT8\n")  # b never defined


def test_version_ranges() -> None:
    assert schema.format_versions({0, 1, 2, 5, 6}) == "0-2,5-6"
    assert schema.parse_versions("0-2,5-6", 9) == {0, 1, 2, 5, 6}
    assert schema.parse_versions("7+", 9) == {7, 8, 9}


def test_check_passes_on_the_committed_tree() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "codegen" / "generate.py"), "--check"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok: ")


def test_check_reports_stale_files(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / "errors.py"
    stale.write_text("# hand edited\n")
    monkeypatch.setattr(generate, "ERRORS_PY", stale)
    monkeypatch.setattr(generate, "GUIDE", tmp_path / "no-guide.txt")  # committed spec only
    assert generate.main(["--check"]) == 1
    assert "stale:" in capsys.readouterr().out


def test_committed_spec_alone_regenerates_the_same_code(monkeypatch) -> None:
    with_guide = generate.generate()
    monkeypatch.setattr(generate, "GUIDE", Path("/nonexistent/guide.txt"))
    without = generate.generate()
    code = {p: t for p, t in with_guide.items() if p.suffix == ".py"}
    assert code == without


def test_counts() -> None:
    out = generate.counts()
    assert out.splitlines()[-1] == "79 APIs, 305 request versions, 305 response versions"
    assert "   0  Produce" in out and "  87  ReadShareGroupStateSummary" in out
