"""The code generator's model: spec JSON + hand-written tables -> message definitions.

``build()`` turns the per-API spec documents into :class:`Api` objects with a
:class:`MessageDef` for the request and the response. On the way it:

* merges the tagged fields of ``tagged_fields.toml`` into the right structs;
* applies ``overrides.toml``: per-field default values, which non-array struct fields are
  nullable (the guide does not say; a nullable struct is preceded by an INT8 marker, -1 null)
  and which arrays may be null (the guide does not say either; it changes no wire code, since
  every decoder reads a -1 count as null, but it is the field's type: ``list[T] | None``);
* computes every field's default value.

Names: module = snake_case of the API name, class = ``<Api>Request`` / ``<Api>Response``,
nested struct class = CamelCase of the field name.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from codegen.schema import parse_versions

FIXED: dict[str, tuple[str, int]] = {
    "boolean": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "uuid": ("QQ", 16),
}
VARIABLE = {"string", "bytes", "records", "varint", "varlong", "struct"}
INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
    "varint": (-(1 << 31), (1 << 31) - 1),
    "varlong": (-(1 << 63), (1 << 63) - 1),
}


class ModelError(Exception):
    pass


def module_name(api: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", api).lower()


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


# Default markers (besides plain Python constants).
LIST = _Marker("LIST")  # a fresh empty list
STRUCT = _Marker("STRUCT")  # a fresh instance of the field's struct class
ZERO_UUID = _Marker("ZERO_UUID")


@dataclass
class FieldDef:
    name: str
    type: str
    array: bool
    versions: set[int]
    nullable_versions: set[int] = field(default_factory=set)
    tag: int | None = None
    struct: StructDef | None = None
    default: Any = None
    about: str = ""

    @property
    def is_fixed(self) -> bool:
        return not self.array and self.type in FIXED

    def nullable(self, version: int) -> bool:
        """Whether the value may be null in ``version`` (for an array: the array itself;
        array elements are never null)."""
        return version in self.nullable_versions


@dataclass
class StructDef:
    class_name: str
    qualname: str  # dotted, for code: ProduceRequest.TopicData
    fields: list[FieldDef]

    @property
    def alias(self) -> str:
        return "_C_" + self.qualname.replace(".", "_")

    def present(self, version: int) -> list[FieldDef]:
        """Fields on the wire (not tagged) in ``version``, in order."""
        return [f for f in self.fields if version in f.versions and f.tag is None]

    def tagged(self, version: int) -> list[FieldDef]:
        return sorted(
            (f for f in self.fields if version in f.versions and f.tag is not None),
            key=lambda f: f.tag,  # type: ignore[arg-type,return-value]
        )

    def walk(self) -> Iterator[StructDef]:
        yield self
        for f in self.fields:
            if f.struct is not None:
                yield from f.struct.walk()


@dataclass
class MessageDef:
    api: str
    api_key: int
    kind: str  # request | response
    class_name: str
    min_version: int
    max_version: int
    flexible_min: int | None
    root: StructDef
    supplement_versions: frozenset[int] = frozenset()  # versions from tools/codegen/supplement.txt

    @property
    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)

    def flexible(self, version: int) -> bool:
        return self.flexible_min is not None and version >= self.flexible_min


@dataclass
class Api:
    name: str
    api_key: int
    module: str
    request: MessageDef
    response: MessageDef


def _field_from_spec(d: dict[str, Any], max_version: int, qual: str) -> FieldDef:
    versions = parse_versions(d["versions"], max_version)
    f = FieldDef(
        name=d["name"],
        type=d["type"],
        array=bool(d.get("array")),
        versions=versions,
        nullable_versions=parse_versions(d.get("nullable_versions", ""), max_version),
        about=d.get("about", ""),
    )
    if f.type == "records":
        f.nullable_versions = set(versions)
    if f.array and f.nullable_versions:
        raise ModelError(f"{qual}.{f.name}: an array of nullable elements is not supported")
    if f.type == "struct":
        cname = camel(f.name)
        f.struct = StructDef(
            cname,
            f"{qual}.{cname}",
            [_field_from_spec(x, max_version, f"{qual}.{cname}") for x in d["fields"]],
        )
    return f


def _tagged_field(t: dict[str, Any], max_version: int, qual: str, versions: set[int]) -> FieldDef:
    f = FieldDef(
        name=t["name"],
        type=t["type"],
        array=bool(t.get("array")),
        versions=versions,
        nullable_versions=set(versions) if t.get("nullable") else set(),
        about=t.get("about", ""),
    )
    if "default" in t:
        f.default = t["default"]
    if f.type == "struct":
        cname = camel(f.name)
        f.struct = StructDef(
            cname,
            f"{qual}.{cname}",
            [
                _tagged_field(x, max_version, f"{qual}.{cname}", versions)
                for x in t.get("fields", [])
            ],
        )
    return f


def _find_struct(root: StructDef, path: str) -> StructDef:
    sd = root
    for part in filter(None, path.split(".")):
        match = [f for f in sd.fields if f.name == part and f.struct is not None]
        if not match:
            raise ModelError(f"{root.qualname}: no struct field {part!r} on path {path!r}")
        sd = match[0].struct  # type: ignore[assignment]
    return sd


def _find_field(root: StructDef, path: str) -> FieldDef:
    *parents, name = path.split(".")
    sd = _find_struct(root, ".".join(parents))
    for f in sd.fields:
        if f.name == name:
            return f
    raise ModelError(f"{root.qualname}: no field {path!r}")


def _check_default(f: FieldDef, where: str) -> None:
    v = f.default
    if f.type in INT_RANGES and not f.array and v is not None and v is not LIST:
        lo, hi = INT_RANGES[f.type]
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise ModelError(f"{where}: default {v!r} does not fit {f.type}")


def _fill_defaults(sd: StructDef, max_version: int) -> None:
    for f in sd.fields:
        if f.struct is not None:
            _fill_defaults(f.struct, max_version)
        if f.default is not None:
            continue
        if f.array:
            f.default = LIST
        elif f.type == "struct":
            f.default = None if f.nullable_versions else STRUCT
        elif f.type in ("string", "bytes"):
            last = max(f.versions)
            if f.nullable(last):
                f.default = None
            else:
                f.default = "" if f.type == "string" else b""
        elif f.type == "records":
            f.default = None if f.nullable_versions else b""
        elif f.type == "boolean":
            f.default = False
        elif f.type == "float64":
            f.default = 0.0
        elif f.type == "uuid":
            f.default = ZERO_UUID
        else:
            f.default = 0


def build(apis: list[dict[str, Any]], tagged_text: str, overrides_text: str) -> list[Api]:
    tagged = tomllib.loads(tagged_text).get("tagged", [])
    overrides = tomllib.loads(overrides_text)
    out: list[Api] = []
    by_class: dict[str, MessageDef] = {}
    for doc in apis:
        msgs = {}
        for kind in ("request", "response"):
            spec = doc[kind]
            vs = sorted(parse_versions(spec["versions"], 0))
            flex = sorted(parse_versions(spec["flexible_versions"], 0))
            cname = doc["name"] + kind.title()
            root = StructDef(
                cname, cname, [_field_from_spec(d, vs[-1], cname) for d in spec["fields"]]
            )
            msg = MessageDef(
                api=doc["name"],
                api_key=doc["api_key"],
                kind=kind,
                class_name=cname,
                min_version=vs[0],
                max_version=vs[-1],
                flexible_min=flex[0] if flex else None,
                root=root,
                supplement_versions=frozenset(
                    parse_versions(spec.get("supplement_versions", ""), 0)
                ),
            )
            msgs[kind] = msg
            by_class[cname] = msg
        out.append(
            Api(
                doc["name"],
                doc["api_key"],
                module_name(doc["name"]),
                msgs["request"],
                msgs["response"],
            )
        )

    for t in tagged:
        m = by_class.get(t["message"])
        if m is None:
            raise ModelError(f"tagged_fields.toml: unknown message {t['message']!r}")
        sd = _find_struct(m.root, t["path"])
        versions = parse_versions(t["versions"], m.max_version)
        if not versions or m.flexible_min is None or min(versions) < m.flexible_min:
            raise ModelError(f"tagged field {t['message']}.{t['name']}: versions not flexible")
        if any(f.name == t["name"] for f in sd.fields):
            raise ModelError(f"tagged field {t['message']}.{t['name']} clashes with a field")
        if any(f.tag == t["tag"] and f.versions & versions for f in sd.fields):
            raise ModelError(f"tagged field {t['message']}.{t['name']}: tag {t['tag']} reused")
        f = _tagged_field(t, m.max_version, sd.qualname, versions)
        f.tag = t["tag"]
        sd.fields.append(f)

    for cls_name, paths in overrides.get("nullable_structs", {}).items():
        m = by_class[cls_name]
        for p in paths:
            f = _find_field(m.root, p)
            if f.type != "struct" or f.array:
                raise ModelError(f"nullable_structs: {cls_name}.{p} is not a struct field")
            f.nullable_versions = set(f.versions)

    for cls_name, paths in overrides.get("non_nullable_records", {}).items():
        m = by_class.get(cls_name)
        if m is None:
            raise ModelError(f"overrides.toml: unknown message {cls_name!r}")
        for p in paths:
            f = _find_field(m.root, p)
            if f.type != "records":
                raise ModelError(f"non_nullable_records: {cls_name}.{p} is not a records field")
            f.nullable_versions = set()

    for cls_name, table in overrides.get("nullable_arrays", {}).items():
        m = by_class.get(cls_name)
        if m is None:
            raise ModelError(f"overrides.toml: unknown message {cls_name!r}")
        for p, text in table.items():
            f = _find_field(m.root, p)
            if not f.array:
                raise ModelError(f"nullable_arrays: {cls_name}.{p} is not an array")
            f.nullable_versions = parse_versions(text, m.max_version)
            if not f.nullable_versions or not f.nullable_versions <= f.versions:
                raise ModelError(f"nullable_arrays: {cls_name}.{p}: versions {text!r}")

    for cls_name, table in overrides.get("defaults", {}).items():
        m = by_class.get(cls_name)
        if m is None:
            raise ModelError(f"overrides.toml: unknown message {cls_name!r}")
        for p, value in table.items():
            f = _find_field(m.root, p)
            f.default = value
            _check_default(f, f"{cls_name}.{p}")

    for api in out:
        for m in (api.request, api.response):
            _fill_defaults(m.root, m.max_version)
            for sd in m.root.walk():
                for f in sd.fields:
                    _check_default(f, f"{sd.qualname}.{f.name}")
    return out
