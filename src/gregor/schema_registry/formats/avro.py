"""Avro schemas: parsed and validated with fastavro, compared by Avro's schema resolution rules.

Theory of operation. ``AvroSchema.parse`` decodes the JSON, parses every referenced schema
first into one table of named types (a reference's named types are then known to the schema
that refers to them, as Confluent's references work for Avro) and parses the schema with
``fastavro.parse_schema``, which checks names, types and defaults. The stored text is the
schema's JSON without whitespace; the normalized text is fastavro's parsed form (full names,
no namespaces) with keys sorted and bare primitives written as names.

Compatibility (``incompatibilities``) is Avro's resolution of a writer's schema by a reader's:
the same primitive or an allowed promotion (int to long, float or double; long to float or
double; float to double; string and bytes both ways); records whose names match (or a reader
alias names the writer) where every reader field is in the writer or has a default; enums whose
writer symbols the reader has (or a reader default); fixed of one size; arrays and maps by
their items and values; a writer union whose every branch the reader reads; a reader union
with a branch that reads the writer. Logical types do not take part, as in Avro's own check.
"""

from __future__ import annotations

import json
from typing import Any

from gregor.schema_registry.formats.base import (
    Dependency,
    Incompatibility,
    ParsedSchema,
    SchemaParseError,
    flatten,
)

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# (writer, reader) pairs Avro resolves by promotion
PROMOTIONS = frozenset(
    {
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    }
)


_REQUIRED = {
    "record": (("name", str), ("fields", list)),
    "error": (("name", str), ("fields", list)),
    "enum": (("name", str), ("symbols", list)),
    "fixed": (("name", str), ("size", int)),
    "array": (("items", object),),
    "map": (("values", object),),
}


def _check_structure(obj: Any) -> None:
    """What the Avro specification requires and fastavro lets pass: a record's ``fields``, an
    enum's ``symbols``, a fixed's ``size``, an array's ``items``, a map's ``values``, each
    field's ``name`` and ``type``; and no fastavro bookkeeping keys (fastavro takes a dict with
    ``__fastavro_parsed`` as already parsed and checks nothing in it)."""
    if isinstance(obj, dict):
        for k in obj:
            if isinstance(k, str) and k.startswith("__fastavro"):
                raise SchemaParseError(f"the key {k!r} is not allowed in a schema")
        kind = obj.get("type")
        if isinstance(kind, str):
            for name, typ in _REQUIRED.get(kind, ()):
                value = obj.get(name)
                if (
                    value is None
                    or not isinstance(value, typ)
                    or (typ is int and isinstance(value, bool))
                ):
                    raise SchemaParseError(f"a {kind} needs '{name}' ({typ.__name__})")
            if kind in ("record", "error"):
                for f in obj["fields"]:
                    if (
                        not isinstance(f, dict)
                        or not isinstance(f.get("name"), str)
                        or "type" not in f
                    ):
                        raise SchemaParseError(
                            f"every field of {obj['name']!r} needs a 'name' and a 'type'"
                        )
                    _check_structure(f["type"])
                return
        for v in obj.values():
            _check_structure(v)
    elif isinstance(obj, list):
        for v in obj:
            _check_structure(v)


def _strip(obj: Any) -> Any:
    """fastavro's parsed form without its bookkeeping keys, primitives as bare names."""
    if isinstance(obj, dict):
        out = {k: _strip(v) for k, v in obj.items() if not k.startswith("__")}
        if set(out) == {"type"} and out["type"] in PRIMITIVES:
            return out["type"]
        return out
    if isinstance(obj, list):
        return [_strip(v) for v in obj]
    return obj


class AvroSchema(ParsedSchema):
    schema_type = "AVRO"

    def __init__(self, raw: Any, parsed: Any, named: dict[str, Any]) -> None:
        self.raw = raw
        self.parsed = parsed
        self.named = named

    @classmethod
    def parse(cls, text: str, dependencies: tuple[Dependency, ...] = ()) -> AvroSchema:
        import fastavro

        named: dict[str, Any] = {}
        for dep in flatten(dependencies):
            if dep.schema_type != "AVRO":
                raise SchemaParseError(
                    f"reference {dep.name!r} is a {dep.schema_type} schema, not AVRO"
                )
            try:
                fastavro.parse_schema(json.loads(dep.schema), named_schemas=named)
            except Exception as e:  # fastavro raises many types on bad input
                raise SchemaParseError(f"reference {dep.name!r}: {e}") from None
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise SchemaParseError(f"not JSON: {e}") from None
        try:
            _check_structure(raw)
        except RecursionError:
            raise SchemaParseError("the schema is nested too deeply") from None
        own = dict(named)
        try:
            parsed = fastavro.parse_schema(raw, named_schemas=own, _write_hint=False)
        except RecursionError:
            raise SchemaParseError("the schema is nested too deeply") from None
        except Exception as e:
            raise SchemaParseError(str(e) or type(e).__name__) from None
        return cls(raw, parsed, own)

    def canonical(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> AvroSchema:
        norm = _strip(self.parsed)
        text = json.dumps(norm, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        return AvroSchema(json.loads(text), self.parsed, self.named)

    def incompatibilities(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, AvroSchema):
            return [
                Incompatibility(
                    "TYPE_MISMATCH", "/", f"the old schema is {writer.schema_type}, not AVRO"
                )
            ]
        out: list[Incompatibility] = []
        _Checker(self.named, writer.named).check(self.parsed, writer.parsed, "", out)
        return out


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Checker:
    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.rn = reader_named
        self.wn = writer_named
        self.seen: set[tuple[str, str]] = set()

    @staticmethod
    def _resolve(t: Any, named: dict[str, Any]) -> Any:
        for _ in range(64):
            if isinstance(t, str):
                if t in PRIMITIVES:
                    return t
                found = named.get(t)
                if found is None:
                    return t
                t = found
            elif isinstance(t, dict):
                typ = t.get("type")
                if isinstance(typ, str) and typ in NAMED | {"array", "map"}:
                    return t
                t = typ
            else:
                return t
        return t

    @staticmethod
    def _kind(t: Any) -> str:
        if isinstance(t, str):
            return t
        if isinstance(t, list):
            return "union"
        kind = t.get("type") if isinstance(t, dict) else None
        return "record" if kind == "error" else str(kind)

    @staticmethod
    def _describe(t: Any) -> str:
        if isinstance(t, dict) and "name" in t:
            return str(t["name"])
        if isinstance(t, dict):
            return str(t.get("type"))
        if isinstance(t, list):
            return "union"
        return str(t)

    def _names_match(self, r: dict[str, Any], w: dict[str, Any]) -> bool:
        rname, wname = str(r.get("name", "")), str(w.get("name", ""))
        if _short(rname) == _short(wname):
            return True
        aliases = r.get("aliases") or []
        return wname in aliases or _short(wname) in aliases

    def check(self, reader: Any, writer: Any, path: str, out: list[Incompatibility]) -> None:
        r = self._resolve(reader, self.rn)
        w = self._resolve(writer, self.wn)
        rk, wk = self._kind(r), self._kind(w)
        here = path or "/"
        if wk == "union":
            for i, branch in enumerate(w):
                self.check(r, branch, f"{path}/{i}" if rk != "union" else path, out)
            return
        if rk == "union":
            for branch in r:
                probe: list[Incompatibility] = []
                self.check(branch, w, path, probe)
                if not probe:
                    return
            out.append(
                Incompatibility(
                    "MISSING_UNION_BRANCH",
                    here,
                    f"The new schema's union at path '{here}' has no branch for the old schema's type {self._describe(w)}",
                )
            )
            return
        if rk != wk:
            if (wk, rk) in PROMOTIONS:
                return
            out.append(
                Incompatibility(
                    "TYPE_MISMATCH",
                    here,
                    f"The type (path '{here}') of a field in the new schema does not match with the old schema "
                    f"({self._describe(r)} cannot read {self._describe(w)})",
                )
            )
            return
        if rk in PRIMITIVES:
            return
        if rk in ("record", "enum", "fixed") and not self._names_match(r, w):
            out.append(
                Incompatibility(
                    "NAME_MISMATCH",
                    f"{path}/name" if path else "/name",
                    f"The name of the schema has changed (path '{here}'): {r.get('name')} is not {w.get('name')}",
                )
            )
            return
        if rk == "record":
            key = (str(r.get("name")), str(w.get("name")))
            if key in self.seen:
                return
            self.seen.add(key)
            wfields = {f["name"]: f for f in w.get("fields", [])}
            for i, rf in enumerate(r.get("fields", [])):
                wf = wfields.get(rf["name"])
                if wf is None:
                    for alias in rf.get("aliases") or []:
                        wf = wfields.get(alias)
                        if wf is not None:
                            break
                fpath = f"{path}/fields/{i}"
                if wf is not None:
                    self.check(rf["type"], wf["type"], f"{fpath}/type", out)
                elif "default" not in rf:
                    out.append(
                        Incompatibility(
                            "READER_FIELD_MISSING_DEFAULT_VALUE",
                            fpath,
                            f"The field '{rf['name']}' at path '{fpath}' in the new schema has no default value "
                            "and is missing in the old schema",
                        )
                    )
        elif rk == "enum":
            missing = [s for s in w.get("symbols", []) if s not in r.get("symbols", [])]
            if missing and r.get("default") is None:
                out.append(
                    Incompatibility(
                        "MISSING_ENUM_SYMBOLS",
                        f"{path}/symbols",
                        f"The new schema is missing enum symbols '{missing}' at path '{path}/symbols' in the old schema",
                    )
                )
        elif rk == "fixed":
            if r.get("size") != w.get("size"):
                out.append(
                    Incompatibility(
                        "FIXED_SIZE_MISMATCH",
                        f"{path}/size",
                        f"The size of FIXED type field at path '{path}/size' in the new schema ({r.get('size')}) "
                        f"does not match with the old schema ({w.get('size')})",
                    )
                )
        elif rk == "array":
            self.check(r.get("items"), w.get("items"), f"{path}/items", out)
        elif rk == "map":
            self.check(r.get("values"), w.get("values"), f"{path}/values", out)
