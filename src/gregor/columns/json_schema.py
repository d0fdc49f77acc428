"""JSON Schemas as the Arrow types of the columns they decode into (the Spark types of the
same columns: ``gregor.spark.json_schema``).

The mapping: an object with ``properties`` -> a struct of them (in their order), an object with
no ``properties`` and ``additionalProperties`` a schema -> map<string, T>, an array with
``items`` a schema -> array, string -> string (``format`` date-time -> timestamp, date ->
date), integer -> long, number -> double, boolean -> boolean, ``enum`` or ``const`` of strings
-> string. ``type: [T, "null"]`` and ``oneOf``/``anyOf`` of one type and ``{"type": "null"}``
(what Confluent's serializers generate for an optional field) read as T; every column is
nullable, as Spark's are, so whether a property is ``required`` does not change its type.
Local ``$ref`` (``#/definitions/...``, ``#/$defs/...``) are followed. Refused with
:class:`JsonSchemaUnsupported`: ``oneOf``/``anyOf`` of several types, ``allOf``, a type list
of several non-null types, a recursive ``$ref``, a ``$ref`` to another document, an object
with neither properties nor an ``additionalProperties`` schema, an array without an ``items``
schema. The column's top level must be an object with properties (a struct).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pyarrow as pa


class JsonSchemaUnsupported(ValueError):
    """A JSON Schema the typed columns cannot read."""


@dataclass(frozen=True)
class JsonNode:
    """One JSON Schema type, normalized: ``kind`` is ``object`` (``fields``), ``map``
    (``items``: the values), ``array`` (``items``), ``string``, ``timestamp``, ``date``,
    ``long``, ``double`` or ``boolean``."""

    kind: str
    fields: tuple[tuple[str, JsonNode], ...] = ()
    items: JsonNode | None = None


_SCALARS = {"integer": "long", "number": "double", "boolean": "boolean"}
_FORMATS = {"date-time": "timestamp", "date": "date"}


def parse(text: str) -> JsonNode:
    """The normalized form of a JSON Schema's text, whose top level is an object."""
    try:
        root = json.loads(text)
    except ValueError:
        raise JsonSchemaUnsupported("the schema is not JSON") from None
    node = _Parser(root).node(root, "#")
    if node.kind != "object":
        raise JsonSchemaUnsupported(
            f"a top level of {node.kind} (the typed column reads objects with properties)"
        )
    return node


class _Parser:
    def __init__(self, root: Any) -> None:
        self.root = root
        self.open: set[str] = set()

    def ref(self, ref: str, where: str) -> JsonNode:
        if not ref.startswith("#/"):
            raise JsonSchemaUnsupported(f"{where}: the $ref {ref!r} to another document")
        if ref in self.open:
            raise JsonSchemaUnsupported(
                f"{where}: the recursive $ref {ref!r} (a Spark type cannot nest without end)"
            )
        target: Any = self.root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise JsonSchemaUnsupported(f"{where}: the $ref {ref!r} points at nothing")
            target = target[part]
        self.open.add(ref)
        try:
            return self.node(target, ref)
        finally:
            self.open.discard(ref)

    def node(self, obj: Any, where: str) -> JsonNode:
        if obj is True or obj == {}:
            raise JsonSchemaUnsupported(f"{where}: a value of any type")
        if not isinstance(obj, dict):
            raise JsonSchemaUnsupported(f"{where}: not a schema: {json.dumps(obj)[:80]}")
        if "$ref" in obj:
            return self.ref(str(obj["$ref"]), where)
        if "allOf" in obj:
            raise JsonSchemaUnsupported(f"{where}: allOf")
        for key in ("oneOf", "anyOf"):
            if key in obj:
                options = [o for o in obj[key] if not _is_null(o)]
                if len(options) != 1:
                    raise JsonSchemaUnsupported(
                        f"{where}: {key} of {len(options)} types (only one type, or one with "
                        "null, reads as a column)"
                    )
                return self.node(options[0], f"{where}/{key}")
        kind = obj.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if k != "null"]
            if len(kinds) != 1:
                raise JsonSchemaUnsupported(f"{where}: the types {kind} (only one with null)")
            kind = kinds[0]
        if kind is None:
            if "properties" in obj or "additionalProperties" in obj:
                kind = "object"
            elif "items" in obj:
                kind = "array"
            elif all(isinstance(v, str) for v in obj.get("enum", [obj.get("const", 0)])):
                kind = "string"
            else:
                raise JsonSchemaUnsupported(f"{where}: a value of any type")
        if kind == "object":
            props = obj.get("properties")
            if isinstance(props, dict) and props:
                return JsonNode(
                    "object",
                    fields=tuple(
                        (str(k), self.node(v, f"{where}/properties/{k}")) for k, v in props.items()
                    ),
                )
            extra = obj.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return JsonNode("map", items=self.node(extra, f"{where}/additionalProperties"))
            raise JsonSchemaUnsupported(
                f"{where}: an object with neither properties nor an additionalProperties schema"
            )
        if kind == "array":
            items = obj.get("items")
            if not isinstance(items, dict):
                raise JsonSchemaUnsupported(f"{where}: an array without an items schema")
            return JsonNode("array", items=self.node(items, f"{where}/items"))
        if kind == "string":
            return JsonNode(_FORMATS.get(str(obj.get("format")), "string"))
        if kind in _SCALARS:
            return JsonNode(_SCALARS[kind])
        raise JsonSchemaUnsupported(f"{where}: the type {kind!r}")


def _is_null(obj: Any) -> bool:
    return isinstance(obj, dict) and obj.get("type") == "null"


def arrow_type(node: JsonNode) -> pa.DataType:
    """The Arrow type of the column ``node`` decodes into (its Spark type:
    ``gregor.spark.json_schema.spark_type``)."""
    simple = {
        "string": pa.string(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "date": pa.date32(),
        "long": pa.int64(),
        "double": pa.float64(),
        "boolean": pa.bool_(),
    }
    if node.kind in simple:
        return simple[node.kind]
    if node.kind == "object":
        return pa.struct([pa.field(k, arrow_type(v)) for k, v in node.fields])
    assert node.items is not None
    if node.kind == "map":
        return pa.map_(pa.string(), arrow_type(node.items))
    return pa.list_(pa.field("element", arrow_type(node.items)))


def read_type(node: JsonNode) -> pa.DataType:
    """The type pyarrow's JSON reader is told to read ``node`` as: a map as an empty struct
    (its keys inferred as fields: the reader has no maps), a date as a string."""
    if node.kind == "map":
        return pa.struct([])
    if node.kind == "date":
        return pa.string()
    if node.kind == "object":
        return pa.struct([pa.field(k, read_type(v)) for k, v in node.fields])
    if node.kind == "array":
        assert node.items is not None
        return pa.list_(read_type(node.items))
    return arrow_type(node)


def has_map(node: JsonNode) -> bool:
    if node.kind == "map":
        return True
    if node.items is not None:
        return has_map(node.items)
    return any(has_map(v) for _, v in node.fields)


__all__ = [
    "JsonNode",
    "JsonSchemaUnsupported",
    "arrow_type",
    "has_map",
    "parse",
    "read_type",
]
