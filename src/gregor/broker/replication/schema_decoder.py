"""Gregor's deeper schema validation level (``gregor.value.schema.validation.level=decode``):
each record's payload after Confluent's 5-byte framing must decode completely against the
schema its id names.

Theory of operation. ``decoder_for`` turns a registered schema (its type, its text as the
registry answers ``?format=serialized``, and its resolved references) into a ``PayloadDecoder``
once per schema id; ``SchemaLookup`` keeps it beside the id's facts, so the parsed schemas live
in the same bounded cache (``CACHE_SIZE`` ids, the same lifetimes). ``PayloadDecoder.check``
takes a whole framed payload (magic byte, id, body) and answers None when it decodes, else the
reason, which names the schema id:

* Avro: fastavro parses the schema (with its references); the parsed schema becomes a program
  of nodes (``_AvroProgram``) that the record walk's Avro payload walk follows over the bytes
  (``walk.avro_validator``: compiled, with ``_avro_py.AvroValidator`` its reference): every
  value read as Avro's binary encoding reads it, no objects made, and no byte left over.
  fastavro's own ``schemaless_reader`` decodes into Python objects (5 to 10 us a 1 KB record
  here, as much as the broker's whole produce path of it) and its compiled reader recurses on
  the C stack without a limit (a recursive schema's payload a few thousand levels deep crashes
  the process); the walk bounds the depth (``AVRO_MAX_DEPTH``) and does not loop over an array
  of items that take no bytes. The tests hold the walk's verdicts to fastavro's, where the walk
  is stricter as Avro's specification is (an enum or union index below 0, which fastavro takes
  as a Python index from the end; an int beyond 32 bits; a varint beyond 10 bytes).
* JSON Schema: the body parses as JSON (UTF-8) and the ``jsonschema`` validator of the
  schema's draft (draft 7 when it names none, as Confluent) accepts it; the first error is the
  reason.
* Protobuf: the message indexes after the id (a zigzag varint count, then that many indexes;
  a single 0 means the first message) name a message of the registered descriptor, whose
  dynamic class (protobuf's ``message_factory`` over a pool of the descriptor and its
  references) must parse the rest.

A schema the broker cannot build a decoder for (a parse error, a reference that does not
resolve, a type it does not know) gives a decoder that refuses every payload saying so: decode
validation fails closed. No state beyond the decoders' parsed schemas.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gregor.protocol.records._avro_py import (
    AVRO_ARRAY,
    AVRO_BOOLEAN,
    AVRO_BYTES,
    AVRO_DOUBLE,
    AVRO_ENUM,
    AVRO_FIXED,
    AVRO_FLOAT,
    AVRO_INT,
    AVRO_LONG,
    AVRO_MAP,
    AVRO_NULL,
    AVRO_RECORD,
    AVRO_STRING,
    AVRO_UNION,
)
from gregor.protocol.records.walk import avro_validator

if TYPE_CHECKING:
    from google.protobuf.descriptor_pb2 import FileDescriptorProto

#: at most this many message indexes after a Protobuf payload's id
MAX_MESSAGE_INDEXES = 64
#: a payload's check: None, or why it does not decode
Check = Callable[[bytes], str | None]


@dataclass(frozen=True, slots=True)
class Reference:
    """A resolved schema reference: the name the schema imports it by, and its schema."""

    name: str
    schema_type: str
    schema: str


class PayloadDecoder:
    """Decodes one schema id's framed payloads; ``check`` answers None or why not (a clause
    after "The value" or "The key"). For Avro, ``walker`` is the record walk's validator, which
    ``walk.check_payloads`` runs over a batch's records in place; its answers need ``reason``."""

    def __init__(
        self,
        schema_id: int,
        schema_type: str,
        check: Callable[[bytes], str | None],
        walker: Callable[[bytes], str | None] | None = None,
    ):
        self.schema_id = schema_id
        self.schema_type = schema_type
        self.check = check
        self.walker = walker
        self._prefix = f"does not decode with schema id {schema_id} ({schema_type})"

    def reason(self, why: str) -> str:
        """The clause of a refusal that ``walker`` answered ``why``; ``check``'s own as is."""
        return f"{self._prefix}: {why}" if self.walker is not None else why


def decoder_for(
    schema_id: int, schema_type: str, schema: str, references: tuple[Reference, ...]
) -> PayloadDecoder:
    """The decoder of a registered schema; one refusing every payload if it does not build."""
    check: Callable[[bytes], str | None]
    try:
        if schema_type == "AVRO":
            walker = _avro(schema, references)
            prefix = f"does not decode with schema id {schema_id} (AVRO)"

            def check_avro(payload: bytes) -> str | None:
                why: str | None = walker(payload)
                return None if why is None else f"{prefix}: {why}"

            return PayloadDecoder(schema_id, schema_type, check_avro, walker)
        if schema_type == "JSON":
            check = _json(schema_id, schema, references)
        elif schema_type == "PROTOBUF":
            check = _protobuf(schema_id, schema, references)
        else:
            raise ValueError(f"unknown schema type {schema_type!r}")
    except RecursionError:
        check = _refuse(schema_id, "its schema is nested too deeply")
    except Exception as e:  # the libraries raise many types on a schema they cannot take
        check = _refuse(schema_id, f"the broker cannot build a decoder of its schema ({_why(e)})")
    return PayloadDecoder(schema_id, schema_type, check)


def _why(e: BaseException) -> str:
    text = str(e).splitlines()[0][:300] if str(e) else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _refuse(schema_id: int, why: str) -> Callable[[bytes], str | None]:
    reason = f"cannot be decoded with schema id {schema_id}: {why}"

    def check(payload: bytes) -> str | None:
        return reason

    return check


# --- Avro ---


def _avro(schema: str, references: tuple[Reference, ...]) -> Check:
    """The record walk's validator of the Avro schema (fastavro parses it)."""
    import fastavro

    named: dict[str, dict[str, object]] = {}
    for ref in references:
        if ref.schema_type != "AVRO":
            raise ValueError(f"reference {ref.name!r} is {ref.schema_type}, not AVRO")
        fastavro.parse_schema(json.loads(ref.schema), named_schemas=named)
    parsed = fastavro.parse_schema(json.loads(schema), named_schemas=named)
    return avro_validator(*_AvroProgram(named).build(parsed))


_PRIMITIVES = {
    "null": AVRO_NULL,
    "boolean": AVRO_BOOLEAN,
    "int": AVRO_INT,
    "long": AVRO_LONG,
    "float": AVRO_FLOAT,
    "double": AVRO_DOUBLE,
    "bytes": AVRO_BYTES,
    "string": AVRO_STRING,
}


class _AvroProgram:
    """fastavro's parsed schema (named types by full name in ``named``) as the record walk's
    program of nodes (``_avro_py.AvroValidator``): node 0 the schema, a named type one node
    however often it is used (a recursive schema refers back to it), logical types as their
    underlying type."""

    def __init__(self, named: dict[str, dict[str, object]]) -> None:
        self.named = named
        self.kinds: list[int] = []
        self.a: list[int] = []
        self.b: list[int] = []
        self.children: list[int] = []
        self._by_name: dict[str, int] = {}

    def build(self, parsed: object) -> tuple[list[int], list[int], list[int], list[int]]:
        self._node(parsed)
        zero = [False] * len(self.kinds)  # which nodes take no bytes: a fixed point
        changed = True
        while changed:
            changed = False
            for i, kind in enumerate(self.kinds):
                z = (
                    kind == AVRO_NULL
                    or (kind == AVRO_FIXED and self.a[i] == 0)
                    or (
                        kind == AVRO_RECORD
                        and all(zero[c] for c in self.children[self.a[i] : self.a[i] + self.b[i]])
                    )
                )
                if z and not zero[i]:
                    zero[i] = changed = True
        for i, kind in enumerate(self.kinds):
            if kind == AVRO_ARRAY:
                self.b[i] = int(zero[self.a[i]])
        return self.kinds, self.a, self.b, self.children

    def _add(self, kind: int, a: int = 0, b: int = 0) -> int:
        self.kinds.append(kind)
        self.a.append(a)
        self.b.append(b)
        return len(self.kinds) - 1

    def _node(self, t: object) -> int:
        if isinstance(t, str):
            if t in _PRIMITIVES:
                return self._add(_PRIMITIVES[t])
            if t in self._by_name:
                return self._by_name[t]
            if t in self.named:
                return self._node(self.named[t])
            raise ValueError(f"unknown type {t!r}")
        if isinstance(t, list):
            i = self._add(AVRO_UNION)
            kids = [self._node(branch) for branch in t]
            self.a[i], self.b[i] = len(self.children), len(kids)
            self.children.extend(kids)
            return i
        if not isinstance(t, dict):
            raise ValueError(f"not an Avro type: {t!r}")
        kind = t.get("type")
        name = t.get("name")
        if kind in ("record", "error"):
            i = self._add(AVRO_RECORD)
            self._by_name[str(name)] = i
            kids = [self._node(f["type"]) for f in t["fields"]]
            self.a[i], self.b[i] = len(self.children), len(kids)
            self.children.extend(kids)
            return i
        if kind == "enum":
            i = self._add(AVRO_ENUM, len(t["symbols"]))
        elif kind == "fixed":
            i = self._add(AVRO_FIXED, int(t["size"]))
        elif kind == "array":
            i = self._add(AVRO_ARRAY)
            self.a[i] = self._node(t["items"])
            return i
        elif kind == "map":
            i = self._add(AVRO_MAP)
            self.a[i] = self._node(t["values"])
            return i
        else:
            return self._node(kind)  # a primitive with attributes, a logical type
        self._by_name[str(name)] = i
        return i


# --- JSON Schema ---


def _json(schema_id: int, schema: str, references: tuple[Reference, ...]) -> Check:
    import jsonschema
    import referencing
    import referencing.jsonschema

    resources = []
    for ref in references:
        if ref.schema_type != "JSON":
            raise ValueError(f"reference {ref.name!r} is {ref.schema_type}, not JSON")
        resources.append(
            (
                ref.name,
                referencing.Resource.from_contents(
                    json.loads(ref.schema), default_specification=referencing.jsonschema.DRAFT7
                ),
            )
        )
    raw = json.loads(schema)
    validator_cls = jsonschema.validators.validator_for(raw, default=jsonschema.Draft7Validator)
    validator_cls.check_schema(raw)
    validator = validator_cls(raw, registry=referencing.Registry().with_resources(resources))
    prefix = f"does not decode with schema id {schema_id} (JSON)"
    loads = json.loads

    def check(payload: bytes) -> str | None:
        try:
            doc = loads(payload[5:])
        except RecursionError:
            return f"{prefix}: nested too deeply"
        except ValueError as e:
            return f"{prefix}: not JSON: {_why(e)}"
        try:
            error = next(validator.iter_errors(doc), None)
        except RecursionError:
            return f"{prefix}: nested too deeply"
        except Exception as e:  # a $ref that does not resolve, ...
            return f"{prefix}: {_why(e)}"
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            return f"{prefix}: at /{where}: {error.message[:300]}"
        return None

    return check


# --- Protobuf ---


def _protobuf(schema_id: int, schema: str, references: tuple[Reference, ...]) -> Check:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from google.protobuf.message import DecodeError, Message

    pool = descriptor_pool.DescriptorPool()
    files = []
    for ref in references:
        if ref.schema_type != "PROTOBUF":
            raise ValueError(f"reference {ref.name!r} is {ref.schema_type}, not PROTOBUF")
        dep = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(ref.schema))
        dep.name = ref.name
        files.append(dep)
    main = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(schema.strip(), validate=True)
    )
    have = {f.name for f in files} | {main.name}
    for wk in _well_known():
        if wk.name not in have:
            pool.Add(wk)
    for f in files:
        pool.Add(f)
    pool.Add(main)
    package = f"{main.package}." if main.package else ""
    classes: dict[tuple[int, ...], type[Message]] = {}
    prefix = f"does not decode with schema id {schema_id} (PROTOBUF)"

    def message_class(path: tuple[int, ...]) -> type[Message] | None:
        cls = classes.get(path)
        if cls is None:
            msgs: Any = main.message_type
            name = package
            for i in path:
                if i >= len(msgs):
                    return None
                name += msgs[i].name
                msgs = msgs[i].nested_type
                name += "."
            cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(name[:-1]))
            classes[path] = cls  # one per message of the schema: bounded by the schema
        return cls

    def check(payload: bytes) -> str | None:
        pos = 5
        count, pos = _zigzag(payload, pos)
        if count is None or not 0 <= count <= MAX_MESSAGE_INDEXES:
            return f"{prefix}: no message indexes after the schema id"
        path: list[int] = []
        for _ in range(count):
            index, pos = _zigzag(payload, pos)
            if index is None or index < 0:
                return f"{prefix}: the message indexes do not parse"
            path.append(index)
        cls = message_class(tuple(path) or (0,))
        if cls is None:
            return f"{prefix}: the schema has no message at indexes {path}"
        try:
            cls.FromString(payload[pos:])
        except DecodeError as e:
            return f"{prefix}: {_why(e)}"
        except Exception as e:
            return f"{prefix}: {_why(e)}"
        return None

    return check


def _zigzag(data: bytes, pos: int) -> tuple[int | None, int]:
    """A zigzag varint at ``pos`` (at most 10 bytes) and the position after it."""
    n = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        b = data[i]
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return (n >> 1) ^ -(n & 1), i + 1
        shift += 7
    return None, pos


def _well_known() -> list[FileDescriptorProto]:
    from google.protobuf import (
        any_pb2,
        api_pb2,
        descriptor_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        source_context_pb2,
        struct_pb2,
        timestamp_pb2,
        type_pb2,
        wrappers_pb2,
    )

    out = []
    for mod in (
        any_pb2,
        source_context_pb2,
        type_pb2,
        api_pb2,
        descriptor_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    ):
        fdp = descriptor_pb2.FileDescriptorProto()
        mod.DESCRIPTOR.CopyToProto(fdp)
        out.append(fdp)
    return out
