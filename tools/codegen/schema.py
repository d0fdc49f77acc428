"""Merge the guide's per-version field trees into one schema per message.

The guide repeats every field in every version. The spec keeps one tree per message in which
each field carries the versions it exists in (``"versions": "3-11"``) and, for strings and
bytes, the versions in which it is nullable. Compactness is not stored per field: it follows
from the message's flexible versions (a flexible version uses compact strings, bytes, arrays
and records everywhere; :mod:`guide` output is checked for that).

Field order at each level is the order fields are declared in; a field added in a later
version is placed after the field that precedes it in that version. If two versions disagree on
the relative order of two fields, merging fails loudly rather than guessing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from codegen.guide import Field, Version

_STRINGS = {
    "STRING": ("string", False, False),
    "COMPACT_STRING": ("string", False, True),
    "NULLABLE_STRING": ("string", True, False),
    "COMPACT_NULLABLE_STRING": ("string", True, True),
    "BYTES": ("bytes", False, False),
    "COMPACT_BYTES": ("bytes", False, True),
    "NULLABLE_BYTES": ("bytes", True, False),
    "COMPACT_NULLABLE_BYTES": ("bytes", True, True),
    "RECORDS": ("records", True, False),
    "COMPACT_RECORDS": ("records", True, True),
}


class SchemaError(Exception):
    pass


def format_versions(versions: Iterable[int]) -> str:
    """``{0,1,2,5,6}`` -> ``"0-2,5-6"``."""
    vs = sorted(set(versions))
    if not vs:
        return ""
    out: list[str] = []
    lo = prev = vs[0]
    for v in vs[1:]:
        if v == prev + 1:
            prev = v
            continue
        out.append(f"{lo}-{prev}")
        lo = prev = v
    out.append(f"{lo}-{prev}")
    return ",".join(out)


def parse_versions(text: str, max_version: int) -> set[int]:
    """Inverse of :func:`format_versions`; also accepts ``"N+"`` (through max_version)."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if part.endswith("+"):
            out.update(range(int(part[:-1]), max_version + 1))
        elif "-" in part:
            lo, hi = part.split("-")
            out.update(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return out


def _kind(f: Field) -> tuple[str, bool, bool]:
    """(type, is_array, nullable) of a guide field."""
    if f.fields is not None:
        return "struct", f.is_array, False
    assert f.type is not None
    if f.type in _STRINGS:
        t, nullable, _compact = _STRINGS[f.type]
        return t, f.is_array, nullable
    return f.type.lower(), f.is_array, False


def _merge_order(orders: list[list[str]]) -> list[str]:
    merged: list[str] = []
    for order in orders:
        last = -1
        for name in order:
            if name in merged:
                idx = merged.index(name)
                if idx < last:
                    raise SchemaError(f"field order differs between versions near {name!r}")
                last = idx
            else:
                merged.insert(last + 1, name)
                last += 1
    return merged


def merge_level(per_version: dict[int, list[Field]], where: str) -> list[dict[str, Any]]:
    """Merge one struct level given {version: fields at this level}."""
    order = _merge_order([[f.name for f in fs] for _, fs in sorted(per_version.items())])
    out: list[dict[str, Any]] = []
    for name in order:
        present: dict[int, Field] = {}
        for v, fs in per_version.items():
            for f in fs:
                if f.name == name:
                    present[v] = f
        kinds = {(_kind(f)[0], _kind(f)[1]) for f in present.values()}
        if len(kinds) != 1:
            raise SchemaError(f"{where}.{name}: type changes between versions: {sorted(kinds)}")
        ((ftype, is_array),) = kinds
        entry: dict[str, Any] = {"name": name, "type": ftype}
        if is_array:
            entry["array"] = True
        entry["versions"] = format_versions(present.keys())
        if ftype in ("string", "bytes"):
            nullable = {v for v, f in present.items() if _kind(f)[2]}
            if nullable:
                entry["nullable_versions"] = format_versions(nullable)
        abouts = [f.about for _, f in sorted(present.items()) if f.about]
        if abouts:
            entry["about"] = abouts[-1]
        if ftype == "struct":
            entry["fields"] = merge_level(
                {v: f.fields or [] for v, f in present.items()}, f"{where}.{name}"
            )
        out.append(entry)
    return out


def merge_message(versions: list[Version]) -> dict[str, Any]:
    """One message (e.g. all Produce Request versions) -> spec dict."""
    versions = sorted(versions, key=lambda v: v.version)
    nums = [v.version for v in versions]
    if nums != list(range(nums[0], nums[-1] + 1)):
        raise SchemaError(f"{versions[0].api} {versions[0].kind}: version gaps {nums}")
    where = f"{versions[0].api}{versions[0].kind.title()}"
    flexible = [v.version for v in versions if v.flexible]
    if flexible and flexible != list(range(flexible[0], nums[-1] + 1)):
        raise SchemaError(f"{where}: flexible versions are not a suffix: {flexible}")
    return {
        "versions": format_versions(nums),
        "flexible_versions": format_versions(flexible),
        "fields": merge_level({v.version: v.fields for v in versions}, where),
    }
