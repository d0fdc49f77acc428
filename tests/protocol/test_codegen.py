"""The generator: guide parsing, version merging, --check, --counts."""

from __future__ import annotations

import json
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
        ("UNKNOWN_SERVER_ERROR", -1, False),
        ("NONE", 0, False),
    ]


def test_merge_versions() -> None:
    versions, _ = guide.parse_guide(SAMPLE)
    merged = schema.merge_message(versions)
    assert merged["versions"] == "0-1" and merged["flexible_versions"] == "1-1"
    by_name = {f["name"]: f for f in merged["fields"]}
    assert [f["name"] for f in merged["fields"]] == ["name", "extra", "parts", "ids"]
    assert by_name["name"]["nullable_versions"] == "1-1"
    assert by_name["extra"]["versions"] == "1-1" and by_name["extra"]["type"] == "uuid"
    assert by_name["ids"] == {
        "name": "ids",
        "type": "int64",
        "array": True,
        "versions": "0-1",
        "about": "Ids.",
    }
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


@pytest.mark.slow
def test_check_passes_on_the_committed_tree() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "codegen" / "generate.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
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


@pytest.mark.slow
def test_committed_spec_alone_regenerates_the_same_code(monkeypatch) -> None:
    with_guide = generate.generate()
    monkeypatch.setattr(generate, "GUIDE", Path("/nonexistent/guide.txt"))
    without = generate.generate()
    code = {p: t for p, t in with_guide.items() if p.suffix == ".py"}
    assert code == without


TOTALS = [
    "79 APIs, 305 request versions, 305 response versions in the guide",
    "+13 request versions, +13 response versions from the supplement: "
    "Produce v12; EndTxn v5; TxnOffsetCommit v5; ConsumerGroupHeartbeat v1; ConsumerGroupDescribe v1; ShareGroupHeartbeat v1; ShareGroupDescribe v1; "
    "ShareFetch v1; ShareAcknowledge v1; DescribeShareGroupOffsets v0, v1; AlterShareGroupOffsets v0; "
    "DeleteShareGroupOffsets v0",
    "82 APIs, 318 request versions, 318 response versions in all",
]


def test_counts() -> None:
    # The guide's own figures, then the supplement's additions, then both.
    out = generate.counts()
    assert out.splitlines()[-3:] == TOTALS
    assert "  68  ConsumerGroupHeartbeat           2   2  (supplement: v1)" in out.splitlines()
    assert "   8  OffsetCommit                    10  10" in out.splitlines()
    assert "   0  Produce" in out and "  87  ReadShareGroupStateSummary" in out


def test_counts_of_the_registry_match_the_generator() -> None:
    from gregor.protocol import messages

    assert messages.counts().splitlines()[-3:] == TOTALS
    assert messages.SUPPLEMENT_VERSIONS == {
        0: (12,),
        26: (5,),
        28: (5,),
        68: (1,),
        69: (1,),
        76: (1,),
        77: (1,),
        78: (1,),
        79: (1,),
        90: (0, 1),
        91: (0,),
        92: (0,),
    }


# --- the supplement (versions the guide lacks) ----------------------------------------------

SUPPLEMENT = """\
# A header comment is allowed anywhere outside a block.

# source: the test's own imagination,
# continued here.
Demo Request (Version: 2) => name extra [parts] [ids] more TAG_BUFFER
name => COMPACT_NULLABLE_STRING
extra => UUID
parts => index [replicas] blob TAG_BUFFER
index => INT32
replicas => INT32
blob => COMPACT_NULLABLE_BYTES
ids => INT64
more => INT8
Field |
Description |
---|
more | One more byte. |
"""


def test_supplement_blocks_carry_their_source_and_partial_descriptions() -> None:
    (v2,) = guide.parse_supplement(SUPPLEMENT)
    assert (v2.api, v2.kind, v2.version, v2.flexible) == ("Demo", "request", 2, True)
    assert v2.source == "the test's own imagination, continued here."
    assert [(f.name, f.about) for f in v2.fields] == [
        ("name", ""),
        ("extra", ""),
        ("parts", ""),
        ("ids", ""),
        ("more", "One more byte."),
    ]


@pytest.mark.parametrize(
    "text,message",
    [
        (
            SUPPLEMENT.replace("# source: the test's own imagination,\n", ""),
            "without a '# source:'",
        ),
        (SUPPLEMENT.replace("# A header", "A header"), "line 1: not a block"),
        (SUPPLEMENT + "stray text\n", "not a block, blank or # comment"),
        (
            SUPPLEMENT.replace("more | One more byte.", "nothing | No such field."),
            "'nothing' matches no field",
        ),
        (SUPPLEMENT + "index | Named once in the block. |\n", None),
        (
            SUPPLEMENT + "# source: x\nDemo Request (Version: 3) => a\na => INT8\n"
            "Field |\nDescription |\n---|\nb | B. |\n",
            "'b' matches no field",
        ),
        (SUPPLEMENT + "\nNONE | 0 | False | |\n", "line 19: not a block"),
    ],
)
def test_supplement_is_parsed_strictly(text: str, message: str | None) -> None:
    if message is None:  # accepted: rows naming fields that occur once
        assert len(guide.parse_supplement(text)) == 1
        return
    with pytest.raises(guide.GuideError, match=message):
        guide.parse_supplement(text)


def test_supplement_rejects_a_field_named_twice_in_a_description() -> None:
    text = SUPPLEMENT.replace("ids => INT64\n", "ids => index\nindex => INT64\n").replace(
        "more | One", "index | Which one? |\nmore | One"
    )
    with pytest.raises(guide.GuideError, match="'index' matches more than one field"):
        guide.parse_supplement(text)


def test_build_spec_merges_the_supplement_after_the_guide(monkeypatch) -> None:
    monkeypatch.setitem(generate.API_KEYS, "Demo", 1000)
    response = "Demo Response (Version: {v}) => x TAG_BUFFER\nx => INT8\n"
    text = SAMPLE + response.format(v=0).replace(" TAG_BUFFER", "") + response.format(v=1)
    extra = SUPPLEMENT + "# source: here\n" + response.format(v=2)
    files = generate.build_spec(text, extra)
    doc = json.loads(files[generate.SPEC_DIR / "demo.json"])
    assert doc["_note"] == generate.SUPPLEMENT_JSON_NOTE
    assert (doc["request"]["versions"], doc["request"]["supplement_versions"]) == ("0-2", "2-2")
    assert (doc["response"]["versions"], doc["response"]["supplement_versions"]) == ("0-2", "2-2")
    by_name = {f["name"]: f for f in doc["request"]["fields"]}
    assert by_name["more"] == {
        "name": "more",
        "type": "int8",
        "versions": "2-2",
        "about": "One more byte.",
    }
    assert by_name["name"]["about"] == "The name."  # the guide's description stays
    # Without a supplement nothing is marked.
    plain = json.loads(generate.build_spec(text)[generate.SPEC_DIR / "demo.json"])
    assert (
        plain["_note"] == generate.HEADER_JSON_NOTE
        and "supplement_versions" not in plain["request"]
    )
    # A version the guide already documents must be deleted from the supplement.
    with pytest.raises(SystemExit, match="the guide now documents Demo response v1"):
        generate.build_spec(text, extra + "# source: here\n" + response.format(v=1))


def test_supplement_error_rows_add_codes_the_guide_lacks(monkeypatch) -> None:
    monkeypatch.setitem(generate.API_KEYS, "Demo", 1000)
    rows = "# source: here\nNEWER_ERROR | 1000 | True | Newer than the guide. |\n"
    (row,) = guide.parse_supplement_errors(SUPPLEMENT + rows)
    assert (row.name, row.code, row.retriable, row.description) == (
        "NEWER_ERROR",
        1000,
        True,
        "Newer than the guide.",
    )
    text = (
        SAMPLE
        + "Demo Response (Version: 0) => x\nx => INT8\nDemo Response (Version: 1) => x TAG_BUFFER\nx => INT8\n"
    )
    files = generate.build_spec(text, rows)
    errors = json.loads(files[generate.SPEC_DIR / "errors.json"])["errors"]
    assert errors[-1] == {
        "name": "NEWER_ERROR",
        "code": 1000,
        "retriable": True,
        "description": "Newer than the guide.",
    }
    assert [e["name"] for e in errors[:-1]] == [e.name for e in guide.parse_guide(SAMPLE)[1]]
    # A code the guide already lists must be deleted from the supplement.
    with pytest.raises(SystemExit, match="the guide now documents error 0"):
        generate.build_spec(text, "# source: here\nOLD_NEWS | 0 | False | Known. |\n")


def test_the_committed_supplement_adds_invalid_regular_expression() -> None:
    from gregor.protocol.errors import ErrorCode, InvalidRegularExpressionError, error_for_code

    rows = guide.parse_supplement_errors(generate.SUPPLEMENT.read_text(encoding="utf-8"))
    assert [(e.name, e.code, e.retriable) for e in rows] == [
        ("INVALID_REGULAR_EXPRESSION", 128, False)
    ]
    assert ErrorCode.INVALID_REGULAR_EXPRESSION == 128
    assert error_for_code(128) is InvalidRegularExpressionError


def test_the_committed_supplement() -> None:
    blocks = guide.parse_supplement(generate.SUPPLEMENT.read_text(encoding="utf-8"))
    assert [(v.api, v.kind, v.version) for v in blocks] == [
        ("ConsumerGroupHeartbeat", "request", 1),
        ("ConsumerGroupHeartbeat", "response", 1),
        ("ConsumerGroupDescribe", "request", 1),
        ("ConsumerGroupDescribe", "response", 1),
        ("ShareGroupHeartbeat", "request", 1),
        ("ShareGroupHeartbeat", "response", 1),
        ("ShareGroupDescribe", "request", 1),
        ("ShareGroupDescribe", "response", 1),
        ("ShareFetch", "request", 1),
        ("ShareFetch", "response", 1),
        ("ShareAcknowledge", "request", 1),
        ("ShareAcknowledge", "response", 1),
        ("DescribeShareGroupOffsets", "request", 0),
        ("DescribeShareGroupOffsets", "request", 1),
        ("DescribeShareGroupOffsets", "response", 0),
        ("DescribeShareGroupOffsets", "response", 1),
        ("AlterShareGroupOffsets", "request", 0),
        ("AlterShareGroupOffsets", "response", 0),
        ("DeleteShareGroupOffsets", "request", 0),
        ("DeleteShareGroupOffsets", "response", 0),
        ("Produce", "request", 12),
        ("Produce", "response", 12),
        ("EndTxn", "request", 5),
        ("EndTxn", "response", 5),
        ("TxnOffsetCommit", "request", 5),
        ("TxnOffsetCommit", "response", 5),
    ]
    assert all(v.source.startswith("kio 0.6.5, kio/schema/") for v in blocks)
