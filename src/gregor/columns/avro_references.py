"""Avro schemas with references made whole for the decoders.

A Confluent schema may name types another subject's version defines (``references``: name,
subject, version; the referenced schema may have references of its own). The decoders need one
self-contained schema (polars reads a container whose header carries it; fastavro and the Arrow
types parse it), so :func:`resolved` fetches every referenced schema from the registry, depth
first, and :func:`inline` puts each referenced type's definition at its first use in the
schema, later uses staying names, as Avro's parser would have met them had the definitions been
written there. A definition keeps its own namespace where it is put (an explicit ``namespace``,
``""`` for none), so its full name does not change. No state.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gregor.client.schema_registry import RegistryClient
from gregor.columns.avro_schema import AvroUnsupported

_NAMED = ("record", "error", "enum", "fixed")
_PRIMITIVES = frozenset(("null", "boolean", "int", "long", "float", "double", "bytes", "string"))
#: Referenced schemas one schema may pull in, all levels together (a bound on a hostile chain).
MAX_REFERENCES = 256


def resolved(client: RegistryClient, references: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every type the ``references`` name, and those their schemas reference, by name: each
    referenced subject version's schema (parsed JSON)."""
    named: dict[str, Any] = {}
    seen: set[tuple[str, str]] = set()

    def visit(refs: Sequence[Mapping[str, Any]]) -> None:
        for ref in refs:
            key = (str(ref.get("subject")), str(ref.get("version")))
            if key in seen:
                continue
            seen.add(key)
            if len(seen) > MAX_REFERENCES:
                raise AvroUnsupported(f"more than {MAX_REFERENCES} schema references")
            got = client.subject_version(key[0], key[1])
            if got.get("schemaType", "AVRO") != "AVRO":
                raise AvroUnsupported(
                    f"the reference {ref.get('name')!r} to a {got.get('schemaType')} schema"
                )
            visit(got.get("references") or ())
            named.setdefault(str(ref.get("name")), json.loads(str(got["schema"])))

    visit(references)
    return named


def _full(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def _own_namespace(obj: Mapping[str, Any], enclosing: str) -> str:
    name = str(obj.get("name", ""))
    if "." in name:
        return name.rpartition(".")[0]
    ns = obj.get("namespace")
    return enclosing if ns is None else str(ns)


def inline(schema: str, named: Mapping[str, Any]) -> str:
    """``schema`` (JSON text) with each type of ``named`` defined at its first use."""
    defined: set[str] = set()

    def walk(obj: Any, namespace: str) -> Any:
        if isinstance(obj, str):
            if obj in _PRIMITIVES:
                return obj
            for key in (_full(obj, namespace), obj):
                if key in named and key not in defined:
                    definition = dict(named[key]) if isinstance(named[key], dict) else named[key]
                    if isinstance(definition, dict):
                        definition.setdefault("namespace", _own_namespace(definition, ""))
                    return walk(definition, namespace)
            return obj
        if isinstance(obj, list):
            return [walk(branch, namespace) for branch in obj]
        if not isinstance(obj, dict):
            return obj
        kind = obj.get("type")
        if kind in _NAMED:
            ns = _own_namespace(obj, namespace)
            defined.add(_full(str(obj.get("name", "")), ns))
            defined.add(str(obj.get("name", "")))
            if kind in ("record", "error"):
                fields = [
                    {**f, "type": walk(f.get("type"), ns)} if isinstance(f, dict) else f
                    for f in obj.get("fields", [])
                ]
                return {**obj, "fields": fields}
            return obj
        if kind == "array":
            return {**obj, "items": walk(obj.get("items"), namespace)}
        if kind == "map":
            return {**obj, "values": walk(obj.get("values"), namespace)}
        if isinstance(kind, list | dict) or (isinstance(kind, str) and kind not in _PRIMITIVES):
            return {**obj, "type": walk(kind, namespace)}
        return obj

    return json.dumps(walk(json.loads(schema), ""))


def whole(client: RegistryClient, schema: str, references: Sequence[Mapping[str, Any]]) -> str:
    """``schema`` with its ``references`` resolved and inlined (itself when it has none)."""
    if not references:
        return schema
    return inline(schema, resolved(client, references))


__all__ = ["MAX_REFERENCES", "inline", "resolved", "whole"]
