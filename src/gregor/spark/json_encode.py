"""The sink's JSON Schema columns: a struct ``value`` (or ``key``) written as Confluent-framed
JSON in a subject's registered JSON Schema (``valueFormat json`` on ``df.write`` /
``writeStream``).

The schema is the subject's version looked up once when the write is planned; each row becomes
a JSON object, is validated against the schema with ``jsonschema`` (the validator
confluent-kafka's ``JSONSerializer`` uses: the schema's own draft, no ``format`` checks), and is
framed as that serializer frames it: a magic byte 0, the schema id (4 bytes, big-endian), the
JSON text in UTF-8 (compact, non-ASCII kept). A row that does not validate (or holds a value JSON
cannot carry, such as NaN) fails the task naming the column and the reason.

Values map to JSON as the source reads JSON into Spark (:mod:`gregor.spark.json_schema`), so a
round trip is exact: a struct -> an object, a map -> an object (keys as text), an array -> an
array, a timestamp -> an ISO 8601 ``date-time`` in UTC (``2024-05-06T07:08:09.123456Z``,
fraction only when there is one), a date -> ``YYYY-MM-DD``, a decimal -> a number (an integer
where the schema says ``integer``), binary -> base64 text (as Spark's ``to_json`` writes it). A
null struct field is left out of its object (as ``to_json`` does), unless the property is
``required``: then it is written as ``null`` and the schema decides. Struct fields the schema
lacks are written as they are (``additionalProperties`` decides).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import struct
import threading
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from gregor.columns.framing import TypedColumn
from gregor.columns.json_schema import JsonNode, parse
from gregor.spark.options import OptionError

UTC = datetime.UTC


@dataclass(frozen=True)
class _Shape:
    """A JSON Schema node as the encoder needs it: the parsed ``node`` and, for an object, its
    properties' shapes and which are ``required``; for an array or map, its items' shape."""

    node: JsonNode
    fields: dict[str, _Shape]
    required: frozenset[str]
    items: _Shape | None


def _resolve(obj: Any, root: Any) -> Any:
    """``obj`` with local ``$ref``s followed and a ``oneOf``/``anyOf`` of one type and null
    taken as that type (as :func:`gregor.spark.json_schema.parse` reads them; it has refused
    everything else already)."""
    for _ in range(64):
        if not isinstance(obj, dict):
            return {}
        if "$ref" in obj:
            target: Any = root
            for part in str(obj["$ref"])[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part, {}) if isinstance(target, dict) else {}
            obj = target
            continue
        for key in ("oneOf", "anyOf"):
            if key in obj:
                options = [
                    o for o in obj[key] if not (isinstance(o, dict) and o.get("type") == "null")
                ]
                obj = options[0] if options else {}
                break
        else:
            return obj
    return {}


def _shape(node: JsonNode, obj: Any, root: Any) -> _Shape:
    obj = _resolve(obj, root)
    if node.kind == "object":
        props = obj.get("properties", {})
        required = obj.get("required", [])
        return _Shape(
            node,
            {k: _shape(v, props.get(k, {}), root) for k, v in node.fields},
            frozenset(str(r) for r in required if isinstance(required, list)),
            None,
        )
    if node.kind in ("array", "map"):
        assert node.items is not None
        inner = obj.get("items" if node.kind == "array" else "additionalProperties", {})
        return _Shape(node, {}, frozenset(), _shape(node.items, inner, root))
    return _Shape(node, {}, frozenset(), None)


class _Encoder:
    """One column's schema in one process: its shape and its validator."""

    def __init__(self, schema: str) -> None:
        from jsonschema.validators import validator_for

        root = json.loads(schema)
        self.shape = _shape(parse(schema), root, root)
        cls = validator_for(root)
        cls.check_schema(root)
        self.validator = cls(root)


_ENCODERS: dict[str, _Encoder] = {}
_LOCK = threading.Lock()


def _encoder(schema: str) -> _Encoder:
    with _LOCK:
        got = _ENCODERS.get(schema)
        if got is None:
            got = _ENCODERS[schema] = _Encoder(schema)
        return got


def required(schema: str) -> list[str]:
    """The top-level ``required`` properties of ``schema`` (the sink checks they are columns)."""
    root = json.loads(schema)
    return sorted(_shape(parse(schema), root, root).required)


def _timestamp(value: datetime.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds" if value.microsecond else "seconds") + "Z"


def _to_json(value: Any, shape: _Shape | None) -> Any:
    """A row's value (as Arrow's ``to_pylist`` gives it, maps as dicts) as JSON data for
    ``shape`` (None: a value the schema does not describe)."""
    if value is None:
        return None
    kind = shape.node.kind if shape is not None else None
    if isinstance(value, dict):
        if kind == "map":
            assert shape is not None
            return {str(k): _to_json(v, shape.items) for k, v in value.items()}
        fields = shape.fields if shape is not None and kind == "object" else {}
        needed = shape.required if shape is not None else frozenset()
        return {
            str(k): _to_json(v, fields.get(k))
            for k, v in value.items()
            if v is not None or k in needed
        }
    if isinstance(value, list):
        items = shape.items if shape is not None and kind == "array" else None
        return [_to_json(v, items) for v in value]
    if isinstance(value, datetime.datetime):
        return _timestamp(value)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        if kind == "long" and value == value.to_integral_value():
            return int(value)
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.time | datetime.timedelta):
        return str(value)
    return value


def encode_column(array: pa.Array, spec: TypedColumn) -> pa.Array:
    """``array`` (the struct column) as a binary column of framed JSON; nulls stay null."""
    from jsonschema.exceptions import ValidationError

    enc = _encoder(spec.schema)
    prefix = b"\x00" + struct.pack(">I", spec.schema_id)
    out: list[bytes | None] = []
    for row in array.to_pylist(maps_as_pydicts="strict"):
        if row is None:
            out.append(None)
            continue
        doc = _to_json(row, enc.shape)
        try:
            text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
            enc.validator.validate(doc)
        except ValidationError as e:
            where = "/".join(str(p) for p in e.absolute_path)
            raise OptionError(
                f"the {spec.column} column does not fit the subject {spec.subject} version "
                f"{spec.version}: {e.message}" + (f" (at {where})" if where else "")
            ) from None
        except ValueError as e:  # NaN or an infinity, which JSON has no number for
            raise OptionError(
                f"the {spec.column} column does not fit the subject {spec.subject} version "
                f"{spec.version}: {e}"
            ) from None
        out.append(prefix + text.encode("utf-8"))
    return pa.array(out, pa.binary())


__all__ = ["encode_column", "required"]
