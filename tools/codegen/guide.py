"""Parse the Kafka protocol guide's text into per-version field trees.

The guide lists every request and response version as a BNF block::

    Produce Request (Version: 9) => transactional_id acks timeout_ms [topic_data] TAG_BUFFER
    transactional_id => COMPACT_NULLABLE_STRING
    ...
    topic_data => name [partition_data] TAG_BUFFER
    name => COMPACT_STRING
    ...
    Field |
    Description |
    ---|
    transactional_id | The transactional ID, or null if the producer is not transactional. |

Indentation was lost in the text, so the nesting is recovered from the order: after the top
line come the definitions of its fields depth first, in declaration order. A definition is
either ``name => TYPE`` (a primitive) or ``name => f1 [f2] TAG_BUFFER`` (a struct whose own
fields follow). ``[x]`` is an array of x; an array of a primitive shows as ``[x]`` with
``x => INT32``. A block (or struct) is flexible when its field list ends in TAG_BUFFER.

The description table that follows a block lists the same fields in the same depth-first
order (plus one ``_tagged_fields`` row per flexible struct, in no useful order), so the
descriptions are attached by walking the tree in that order.

The output of this module is a plain data structure (see :class:`Version`); merging versions
into one schema per message is the job of :mod:`schema`.

:func:`parse_supplement` reads the hand-written supplement (``tools/codegen/supplement.txt``)
in the same block format, strictly: apart from blocks only blank lines and ``#`` comments are
allowed, every block must be preceded by a ``# source:`` comment saying where its facts come
from, and its description table (optional) may describe just the fields it names. Rows of the
guide's error table (``NAME | code | retriable | description |``) may follow a ``# source:``
comment too: error codes the guide's table lacks (:func:`parse_supplement_errors`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

PRIMITIVES = frozenset(
    {
        "BOOLEAN",
        "INT8",
        "INT16",
        "INT32",
        "INT64",
        "UINT16",
        "UINT32",
        "VARINT",
        "VARLONG",
        "UUID",
        "FLOAT64",
        "STRING",
        "COMPACT_STRING",
        "NULLABLE_STRING",
        "COMPACT_NULLABLE_STRING",
        "BYTES",
        "COMPACT_BYTES",
        "NULLABLE_BYTES",
        "COMPACT_NULLABLE_BYTES",
        "RECORDS",
        "COMPACT_RECORDS",
    }
)

_BLOCK_RE = re.compile(r"^([A-Za-z0-9]+) (Request|Response) \(Version: (\d+)\) =>(.*)$")
_DEF_RE = re.compile(r"^([a-z_][a-z0-9_]*) =>(.*)$")
_ROW_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*) \| (.*?) ?\|$")
_ERROR_ROW_RE = re.compile(r"^([A-Z_]+) \| (-?\d+) \| (True|False) \| (.*?) ?\|$")


class GuideError(Exception):
    """The guide's text does not have the expected shape."""


@dataclass
class Field:
    name: str
    is_array: bool
    type: str | None = None  # primitive type name (element type for arrays of primitives)
    fields: list[Field] | None = None  # struct fields (element struct for arrays of structs)
    flexible: bool = False  # struct ends in TAG_BUFFER
    about: str = ""


@dataclass
class Version:
    api: str
    kind: str  # "request" | "response"
    version: int
    flexible: bool
    fields: list[Field] = field(default_factory=list)
    line: int = 0
    source: str = ""  # supplement blocks: where the facts come from


@dataclass
class ErrorCode:
    name: str
    code: int
    retriable: bool
    description: str


def _split_refs(rhs: str) -> tuple[list[tuple[str, bool]], bool]:
    """Split ``f1 [f2] TAG_BUFFER`` into [(name, is_array)] and the flexible flag."""
    refs: list[tuple[str, bool]] = []
    flexible = False
    for token in rhs.split():
        if token == "TAG_BUFFER":
            flexible = True
            continue
        if flexible:
            raise GuideError(f"field {token!r} after TAG_BUFFER")
        if token.startswith("[") and token.endswith("]"):
            refs.append((token[1:-1], True))
        else:
            refs.append((token, False))
    return refs, flexible


class _Cursor:
    def __init__(self, defs: list[tuple[str, str, int]]) -> None:
        self.defs = defs
        self.i = 0

    def take(self, name: str) -> tuple[str, int]:
        if self.i >= len(self.defs):
            raise GuideError(f"missing definition of {name!r}")
        got, rhs, line = self.defs[self.i]
        if got != name:
            raise GuideError(f"line {line}: expected definition of {name!r}, found {got!r}")
        self.i += 1
        return rhs, line


def _parse_fields(refs: list[tuple[str, bool]], cursor: _Cursor) -> list[Field]:
    out: list[Field] = []
    seen: set[str] = set()
    for name, is_array in refs:
        if name in seen:
            raise GuideError(f"field {name!r} appears twice in one struct")
        seen.add(name)
        rhs, line = cursor.take(name)
        rhs = rhs.strip()
        if rhs in PRIMITIVES:
            out.append(Field(name=name, is_array=is_array, type=rhs))
            continue
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", rhs) and rhs != "TAG_BUFFER":
            raise GuideError(f"line {line}: unknown type {rhs!r}")
        sub_refs, flexible = _split_refs(rhs)
        sub = _parse_fields(sub_refs, cursor)
        out.append(Field(name=name, is_array=is_array, fields=sub, flexible=flexible))
    return out


def _walk(fields: list[Field]) -> Iterator[Field]:
    for f in fields:
        yield f
        if f.fields is not None:
            yield from _walk(f.fields)


def _describe_by_name(fields: list[Field], rows: list[tuple[str, str]], where: str) -> None:
    """Attach a partial description table: each row names one field of the block."""
    by_name: dict[str, list[Field]] = {}
    for f in _walk(fields):
        by_name.setdefault(f.name, []).append(f)
    for name, about in rows:
        found = by_name.get(name, [])
        if len(found) != 1:
            what = "no field" if not found else "more than one field"
            raise GuideError(f"{where}: description row {name!r} matches {what}")
        found[0].about = about


def parse_guide(text: str) -> tuple[list[Version], list[ErrorCode]]:
    """Return every request/response version block and the error table, in guide order."""
    return _parse(text, strict=False)


def parse_supplement(text: str) -> list[Version]:
    """Return the supplement's version blocks (see the module docstring for the rules)."""
    return _parse(text, strict=True)[0]  # an error-table row is "not a block" here


def parse_supplement_errors(text: str) -> list[ErrorCode]:
    """Return the supplement's error-table rows (the guide's row format, after a ``# source:``
    comment): error codes newer than the guide's table."""
    return _parse(text, strict=True)[1]


_SOURCE_RE = re.compile(r"^#\s*source:\s*(.*)$", re.IGNORECASE)


def _parse(text: str, strict: bool) -> tuple[list[Version], list[ErrorCode]]:
    lines = text.splitlines()
    versions: list[Version] = []
    i = 0
    n = len(lines)
    source: list[str] = []  # the "# source:" comment (and its continuation lines) seen last
    while i < n:
        m = _BLOCK_RE.match(lines[i])
        if not m:
            if strict:
                line = lines[i].strip()
                src = _SOURCE_RE.match(line)
                if src:
                    source = [src.group(1).strip()]
                elif line.startswith("#") and source:
                    source.append(line.lstrip("#").strip())
                elif (
                    line and not line.startswith("#") and not (source and _ERROR_ROW_RE.match(line))
                ):
                    raise GuideError(f"supplement line {i + 1}: not a block, blank or # comment")
            i += 1
            continue
        if strict and not source:
            raise GuideError(f"supplement line {i + 1}: block without a '# source:' comment")
        api, kind, ver, rhs = m.group(1), m.group(2).lower(), int(m.group(3)), m.group(4)
        start = i + 1
        i += 1
        defs: list[tuple[str, str, int]] = []
        while i < n:
            d = _DEF_RE.match(lines[i])
            if not d:
                break
            defs.append((d.group(1), d.group(2), i + 1))
            i += 1
        refs, flexible = _split_refs(rhs)
        cursor = _Cursor(defs)
        try:
            fields = _parse_fields(refs, cursor)
        except GuideError as e:
            raise GuideError(f"{api} {kind} v{ver} (line {start}): {e}") from None
        if cursor.i != len(defs):
            extra = defs[cursor.i]
            raise GuideError(f"{api} {kind} v{ver}: unused definition {extra[0]!r} line {extra[2]}")
        # Optional description table.
        rows: list[tuple[str, str]] = []
        if i < n and lines[i].startswith("Field |"):
            i += 1
            while i < n and not _BLOCK_RE.match(lines[i]):
                r = _ROW_RE.match(lines[i])
                if r and lines[i] not in ("Field |", "Description |"):
                    rows.append((r.group(1), r.group(2)))
                elif lines[i] in ("Description |", "---|"):
                    pass
                else:
                    break
                i += 1
        named = [r for r in rows if r[0] != "_tagged_fields"]
        flat = list(_walk(fields))
        if [r[0] for r in named] == [f.name for f in flat]:
            for f, (_, about) in zip(flat, named, strict=True):
                f.about = about
        elif strict:
            _describe_by_name(fields, named, f"{api} {kind} v{ver} (line {start})")
        versions.append(
            Version(
                api=api,
                kind=kind,
                version=ver,
                flexible=flexible,
                fields=fields,
                line=start,
                source=" ".join(source) if strict else "",
            )
        )
        if strict:
            source = []  # each block names its own source
    errors = [
        ErrorCode(m.group(1), int(m.group(2)), m.group(3) == "True", m.group(4).strip())
        for m in map(_ERROR_ROW_RE.match, lines)
        if m
    ]
    return versions, errors
