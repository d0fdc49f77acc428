"""JSON Schema: validated against its draft's meta-schema with the ``jsonschema`` package,
compared by whether a reader schema accepts every document a writer schema accepts.

Theory of operation. ``JsonSchema.parse`` decodes the JSON, picks the validator for the
schema's ``$schema`` (draft 7 when there is none, as Confluent does), checks the schema against
that draft's meta-schema and builds a validator whose ``referencing`` registry holds the
referenced schemas under their reference names, so ``{"$ref": "other.json"}`` resolves to the
schema registered under that name. The stored text is the schema's JSON without whitespace;
the normalized text sorts the keys.

Compatibility is checked structurally, as Confluent's JSON Schema rules do, over the keywords
that decide what a schema accepts: ``type`` (a reader may widen, integer to number), ``enum``
and ``const``, the bounds (``maximum``, ``minLength``, ``maxItems``, ...: a reader may loosen,
not tighten or add), ``pattern``, ``required``, ``properties`` with the content model
(``additionalProperties``: a property the writer may send must be accepted by the reader, so
adding a constrained property to an open content model or removing one from a closed model is
incompatible), ``items``, and ``anyOf``/``oneOf`` (every writer branch read by some reader
branch). Local ``$ref`` pointers are followed; other keywords (``allOf``, ``if``/``then``,
``dependentSchemas``, ``patternProperties``, formats) are compared for equality only.
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

UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
EQUALITY_ONLY = (
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "contains",
    "uniqueItems",
    "multipleOf",
    "format",
    "prefixItems",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "dependentRequired",
    "minContains",
    "maxContains",
    "contentEncoding",
    "contentMediaType",
)


class JsonSchema(ParsedSchema):
    schema_type = "JSON"

    def __init__(self, raw: Any, validator: Any) -> None:
        self.raw = raw
        self.validator = validator

    @classmethod
    def parse(cls, text: str, dependencies: tuple[Dependency, ...] = ()) -> JsonSchema:
        import jsonschema
        import referencing
        import referencing.jsonschema

        try:
            raw = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise SchemaParseError(f"not JSON: {e}") from None
        if not isinstance(raw, (dict, bool)):
            raise SchemaParseError("a JSON schema is an object or a boolean")
        resources = []
        for dep in flatten(dependencies):
            if dep.schema_type != "JSON":
                raise SchemaParseError(
                    f"reference {dep.name!r} is a {dep.schema_type} schema, not JSON"
                )
            try:
                contents = json.loads(dep.schema)
                resource = referencing.Resource.from_contents(
                    contents, default_specification=referencing.jsonschema.DRAFT7
                )
            except Exception as e:
                raise SchemaParseError(f"reference {dep.name!r}: {e}") from None
            resources.append((dep.name, resource))
        registry: Any = referencing.Registry().with_resources(resources)
        try:
            validator_cls = jsonschema.validators.validator_for(
                raw, default=jsonschema.Draft7Validator
            )
            validator_cls.check_schema(raw)
            validator = validator_cls(raw, registry=registry)
        except jsonschema.exceptions.SchemaError as e:
            raise SchemaParseError(e.message) from None
        except RecursionError:
            raise SchemaParseError("the schema is nested too deeply") from None
        except Exception as e:
            raise SchemaParseError(str(e) or type(e).__name__) from None
        refs = _refs(raw)
        root = referencing.Resource.from_contents(
            raw, default_specification=referencing.jsonschema.DRAFT7
        )
        resolver = registry.with_resource("urn:gregor:root", root).resolver(
            base_uri="urn:gregor:root"
        )
        for ref in sorted(refs):
            try:
                resolver.lookup(ref)
            except Exception:
                raise SchemaParseError(
                    f"the $ref {ref[:200]!r} does not resolve (a reference must name it, or it points nowhere)"
                ) from None
        return cls(raw, validator)

    def canonical(self) -> str:
        return json.dumps(self.raw, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> JsonSchema:
        text = json.dumps(self.raw, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        return JsonSchema(json.loads(text), self.validator)

    def incompatibilities(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, JsonSchema):
            return [
                Incompatibility(
                    "TYPE_CHANGED", "#/", f"the old schema is {writer.schema_type}, not JSON"
                )
            ]
        out: list[Incompatibility] = []
        _Checker(self.raw, writer.raw).check(self.raw, writer.raw, "#", out, 0)
        return out


MAX_REFS = 1000
MAX_COMPARE_DEPTH = 64


def _refs(obj: Any) -> set[str]:
    """Every ``$ref`` string in the schema (at most ``MAX_REFS``)."""
    out: set[str] = set()
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                out.add(ref)
                if len(out) > MAX_REFS:
                    raise SchemaParseError(f"more than {MAX_REFS} distinct $refs")
            stack.extend(
                v for k, v in item.items() if k not in ("enum", "const", "default", "examples")
            )
        elif isinstance(item, list):
            stack.extend(item)
    return out


def _types(s: dict[str, Any]) -> set[str] | None:
    t = s.get("type")
    if t is None:
        return None
    return (
        {t}
        if isinstance(t, str)
        else {x for x in t if isinstance(x, str)}
        if isinstance(t, list)
        else None
    )


class _Checker:
    def __init__(self, reader_root: Any, writer_root: Any) -> None:
        self.rroot = reader_root
        self.wroot = writer_root

    @staticmethod
    def _deref(s: Any, root: Any) -> Any:
        for _ in range(32):
            if (
                not isinstance(s, dict)
                or not isinstance(s.get("$ref"), str)
                or not s["$ref"].startswith("#")
            ):
                return s
            target: Any = root
            for part in s["$ref"][1:].split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and part in target:
                    target = target[part]
                else:
                    return s
            s = target
        return s

    def check(self, r: Any, w: Any, path: str, out: list[Incompatibility], depth: int) -> None:
        if depth > MAX_COMPARE_DEPTH:  # fail closed: what is not compared is not compatible
            out.append(
                Incompatibility(
                    "SCHEMA_TOO_DEEP",
                    path,
                    f"the schemas nest deeper than {MAX_COMPARE_DEPTH} levels at '{path}' and were not compared",
                )
            )
            return
        r, w = self._deref(r, self.rroot), self._deref(w, self.wroot)
        if w is False or r is True or r == {}:
            return
        if r is False:
            out.append(
                Incompatibility(
                    "TYPE_NARROWED", path, f"the new schema at '{path}' accepts nothing"
                )
            )
            return
        if w is True:
            w = {}
        if not isinstance(r, dict) or not isinstance(w, dict):
            return
        if "$ref" in r or "$ref" in w:
            if r.get("$ref") != w.get("$ref"):
                out.append(
                    Incompatibility("REFERENCE_CHANGED", path, f"the reference at '{path}' changed")
                )
            return
        self._types(r, w, path, out)
        self._values(r, w, path, out)
        self._bounds(r, w, path, out)
        self._objects(r, w, path, out, depth)
        if "items" in r and isinstance(r["items"], (dict, bool)):
            self.check(r["items"], w.get("items", True), f"{path}/items", out, depth + 1)
        elif "items" in r and r["items"] != w.get("items"):  # tuple items (a list): equality only
            out.append(
                Incompatibility(
                    "SCHEMA_CHANGED", f"{path}/items", f"the tuple items at '{path}' changed"
                )
            )
        self._combined(r, w, path, out, depth)
        for key in EQUALITY_ONLY:
            if key in r and r.get(key) != w.get(key):
                out.append(
                    Incompatibility(
                        "SCHEMA_CHANGED",
                        f"{path}/{key}",
                        f"the keyword '{key}' at '{path}' changed",
                    )
                )

    def _types(
        self, r: dict[str, Any], w: dict[str, Any], path: str, out: list[Incompatibility]
    ) -> None:
        rt, wt = _types(r), _types(w)
        if rt is None:
            return
        if wt is None:
            out.append(
                Incompatibility(
                    "TYPE_NARROWED",
                    f"{path}/type",
                    f"the new schema restricts the type at '{path}' to {sorted(rt)}",
                )
            )
            return
        lost = [t for t in wt if t not in rt and not (t == "integer" and "number" in rt)]
        if lost:
            out.append(
                Incompatibility(
                    "TYPE_NARROWED",
                    f"{path}/type",
                    f"the new schema at '{path}' no longer accepts {sorted(lost)}",
                )
            )

    def _values(
        self, r: dict[str, Any], w: dict[str, Any], path: str, out: list[Incompatibility]
    ) -> None:
        if "enum" in r:
            if "enum" not in w:
                out.append(
                    Incompatibility(
                        "ENUM_ARRAY_NARROWED", f"{path}/enum", f"an enum was added at '{path}'"
                    )
                )
            elif isinstance(r["enum"], list) and isinstance(w["enum"], list):
                lost = [v for v in w["enum"] if v not in r["enum"]]
                if lost:
                    out.append(
                        Incompatibility(
                            "ENUM_ARRAY_NARROWED",
                            f"{path}/enum",
                            f"the enum at '{path}' lost {lost}",
                        )
                    )
        if "const" in r and r.get("const") != w.get("const", object()):
            out.append(
                Incompatibility("CONST_CHANGED", f"{path}/const", f"the const at '{path}' changed")
            )
        if "pattern" in r and r.get("pattern") != w.get("pattern"):
            kind = "PATTERN_ADDED" if "pattern" not in w else "PATTERN_CHANGED"
            out.append(
                Incompatibility(
                    kind, f"{path}/pattern", f"the pattern at '{path}' was added or changed"
                )
            )

    def _bounds(
        self, r: dict[str, Any], w: dict[str, Any], path: str, out: list[Incompatibility]
    ) -> None:
        for key in UPPER_BOUNDS:
            rv, wv = r.get(key), w.get(key)
            if isinstance(rv, (int, float)) and not isinstance(rv, bool):
                if not isinstance(wv, (int, float)) or isinstance(wv, bool):
                    out.append(
                        Incompatibility(
                            f"{_snake(key)}_ADDED",
                            f"{path}/{key}",
                            f"'{key}' was added at '{path}'",
                        )
                    )
                elif rv < wv:
                    out.append(
                        Incompatibility(
                            f"{_snake(key)}_DECREASED",
                            f"{path}/{key}",
                            f"'{key}' at '{path}' decreased from {wv} to {rv}",
                        )
                    )
        for key in LOWER_BOUNDS:
            rv, wv = r.get(key), w.get(key)
            if isinstance(rv, (int, float)) and not isinstance(rv, bool):
                if not isinstance(wv, (int, float)) or isinstance(wv, bool):
                    if rv > 0 or key in ("minimum", "exclusiveMinimum"):
                        out.append(
                            Incompatibility(
                                f"{_snake(key)}_ADDED",
                                f"{path}/{key}",
                                f"'{key}' was added at '{path}'",
                            )
                        )
                elif rv > wv:
                    out.append(
                        Incompatibility(
                            f"{_snake(key)}_INCREASED",
                            f"{path}/{key}",
                            f"'{key}' at '{path}' increased from {wv} to {rv}",
                        )
                    )

    def _objects(
        self,
        r: dict[str, Any],
        w: dict[str, Any],
        path: str,
        out: list[Incompatibility],
        depth: int,
    ) -> None:
        rreq = set(r.get("required") or []) if isinstance(r.get("required"), list) else set()
        wreq = set(w.get("required") or []) if isinstance(w.get("required"), list) else set()
        for name in sorted(rreq - wreq, key=str):
            out.append(
                Incompatibility(
                    "REQUIRED_ATTRIBUTE_ADDED",
                    f"{path}/required",
                    f"the property '{name}' at '{path}' became required",
                )
            )
        rprops: dict[str, Any] = r["properties"] if isinstance(r.get("properties"), dict) else {}
        wprops: dict[str, Any] = w["properties"] if isinstance(w.get("properties"), dict) else {}
        radd = r.get("additionalProperties", True)
        wadd = w.get("additionalProperties", True)
        for name, wp in wprops.items():
            ppath = f"{path}/properties/{name}"
            if name in rprops:
                self.check(rprops[name], wp, ppath, out, depth + 1)
            elif radd is False:
                out.append(
                    Incompatibility(
                        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL",
                        ppath,
                        f"the property '{name}' was removed from a closed content model at '{path}'",
                    )
                )
            elif isinstance(radd, dict):
                self.check(radd, wp, ppath, out, depth + 1)
        for name, rp in rprops.items():
            if name in wprops:
                continue
            ppath = f"{path}/properties/{name}"
            if wadd is False:
                continue
            probe: list[Incompatibility] = []
            self.check(rp, wadd, ppath, probe, depth + 1)
            if probe:
                out.append(
                    Incompatibility(
                        "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL",
                        ppath,
                        f"the property '{name}' was added to an open content model at '{path}'",
                    )
                )
        if radd is not True and "additionalProperties" in r:
            if radd is False and wadd is not False:
                out.append(
                    Incompatibility(
                        "ADDITIONAL_PROPERTIES_REMOVED",
                        f"{path}/additionalProperties",
                        f"the content model at '{path}' was closed",
                    )
                )
            elif isinstance(radd, dict):
                self.check(radd, wadd, f"{path}/additionalProperties", out, depth + 1)

    def _combined(
        self,
        r: dict[str, Any],
        w: dict[str, Any],
        path: str,
        out: list[Incompatibility],
        depth: int,
    ) -> None:
        for key in ("anyOf", "oneOf"):
            if not isinstance(r.get(key), list):
                continue
            wbranches = (
                w.get("anyOf")
                or w.get("oneOf")
                or [{k: v for k, v in w.items() if k not in ("anyOf", "oneOf")}]
            )
            for i, wb in enumerate(wbranches):
                if not any(not self._probe(rb, wb, depth) for rb in r[key]):
                    out.append(
                        Incompatibility(
                            "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
                            f"{path}/{key}",
                            f"no branch of '{key}' at '{path}' accepts the old branch {i}",
                        )
                    )

    def _probe(self, r: Any, w: Any, depth: int) -> list[Incompatibility]:
        probe: list[Incompatibility] = []
        self.check(r, w, "#", probe, depth + 1)
        return probe


def _snake(key: str) -> str:
    out = "".join("_" + c if c.isupper() else c for c in key)
    return out.upper()
