"""Emit the class of a message or nested struct: docstring, slots, field annotations, typed
keyword-only constructor, equality, repr, and the properties of lazily created tagged struct
fields.

The annotations are class-level declarations without values (``group_id: str``), which do
not clash with ``__slots__``; nested classes are named by their qualified name
(``list[MetadataRequest.Topics]``), which the module's ``from __future__ import annotations``
leaves unevaluated."""

from __future__ import annotations

from codegen.emit_fields import (
    Module,
    attr_type,
    default_expr,
    elem_type,
    is_marker,
    lazy,
    slot,
    slot_type,
)
from codegen.model import FieldDef, MessageDef, StructDef


def _type_doc(f: FieldDef) -> str:
    base = {
        "boolean": "bool",
        "string": "str",
        "bytes": "bytes",
        "records": "records",
        "uuid": "UUID",
        "float64": "float",
        "struct": f.struct.class_name if f.struct else "",
    }.get(f.type, f.type)
    return f"list[{base}]" if f.array else base


def _versions_doc(vs: set[int], lo: int, hi: int) -> str:
    s = sorted(vs)
    if s == list(range(lo, hi + 1)):
        return "all"
    if s == list(range(s[0], hi + 1)):
        return f"v{s[0]}+"
    if s == list(range(s[0], s[-1] + 1)):
        return f"v{s[0]}-{s[-1]}" if s[0] != s[-1] else f"v{s[0]}"
    return "v" + ",".join(map(str, s))


def emit_class(
    sd: StructDef, msg: MessageDef, ind: int, out: list[str], top: bool, mod: Module
) -> None:
    p = "    " * ind
    base = "Message" if top else "Struct"
    out.append(f"{p}class {sd.class_name}({base}):")
    if top:
        flex = f", flexible from v{msg.flexible_min}" if msg.flexible_min is not None else ""
        doc = [
            f"{msg.api} {msg.kind} (API key {msg.api_key}), "
            f"v{msg.min_version}-{msg.max_version}{flex}."
        ]
    else:
        doc = [f"Struct ``{sd.qualname}``."]
    if sd.fields:
        doc.append("")
        doc.append("Fields (type, versions[, tag]; default):")
    for f in sd.fields:
        vdoc = _versions_doc(f.versions, msg.min_version, msg.max_version)
        extra = f", tag {f.tag}" if f.tag is not None else ""
        if f.nullable_versions and f.type != "records":
            extra += ", nullable" + (
                ""
                if f.nullable_versions == f.versions
                else f" {_versions_doc(f.nullable_versions, msg.min_version, msg.max_version)}"
            )
        about = f.about.replace("\\", "\\\\").replace('"""', "'''")
        dflt = default_expr(f)
        line = f"    {f.name} ({_type_doc(f)}, {vdoc}{extra}; {dflt})"
        if about:
            line += f": {about}"
        doc.append(line)
    if top:
        doc.append("")
        doc.append("RECORDS fields decode to memoryview slices of the input buffer (no copy).")
    out.append(f'{p}    """' + doc[0])
    for line in doc[1:]:
        out.append((f"{p}    {line}").rstrip())
    out.append(f'{p}    """')
    out.append("")
    tags = ["unknown_tags"] if msg.flexible_min is not None else []
    slots = [slot(f) for f in sd.fields] + tags
    names = [f.name for f in sd.fields] + tags
    out.append(f"{p}    __slots__ = {tuple(slots)!r}")
    out.append(f"{p}    _FIELDS = {tuple(names)!r}")
    if top:
        out.append(f"{p}    API_KEY = {msg.api_key}")
        out.append(f"{p}    API_NAME = {msg.api!r}")
        out.append(f"{p}    MIN_VERSION = {msg.min_version}")
        out.append(f"{p}    MAX_VERSION = {msg.max_version}")
        out.append(f"{p}    FLEXIBLE_MIN_VERSION = {msg.flexible_min!r}")
    if slots:
        out.append("")
    for f in sd.fields:
        out.append(f"{p}    {slot(f)}: {slot_type(f)}")
    if tags:
        out.append(f"{p}    unknown_tags: dict[int, bytes]")
    for f in sd.fields:
        if f.struct is not None:
            out.append("")
            emit_class(f.struct, msg, ind + 1, out, False, mod)
    # __init__
    out.append("")
    params = []
    body = []
    for f in sd.fields:
        if lazy(f):
            params.append(f"{f.name}: {slot_type(f)} = None")
            body.append(f"self.{slot(f)} = {f.name}")
        elif is_marker(f):
            params.append(f"{f.name}: {attr_type(f)} = UNSET")
            body.append(f"self.{f.name} = {default_expr(f)} if {f.name} is UNSET else {f.name}")
        else:
            params.append(f"{f.name}: {attr_type(f)} = {default_expr(f)}")
            body.append(f"self.{f.name} = {f.name}")
    if msg.flexible_min is not None:
        params.append("unknown_tags: dict[int, bytes] = UNSET")
        body.append("self.unknown_tags = {} if unknown_tags is UNSET else unknown_tags")
    if params:
        out.append(f"{p}    def __init__(self, *, {', '.join(params)}) -> None:")
    else:
        out.append(f"{p}    def __init__(self) -> None:")
        body.append("pass")
    for b in body:
        out.append(f"{p}        {b}")
    # __eq__
    out.append("")
    out.append(f"{p}    def __eq__(self, other: Any) -> bool:")
    out.append(f"{p}        if other.__class__ is not self.__class__: return NotImplemented")
    if names:
        cmp = " and ".join(f"self.{s} == other.{s}" for s in names)
        out.append(f"{p}        return {cmp}")
    else:
        out.append(f"{p}        return True")
    # lazily created defaults of tagged struct fields
    for f in sd.fields:
        if not lazy(f):
            continue
        assert f.struct is not None
        out.append("")
        out.append(f"{p}    @property")
        out.append(f"{p}    def {f.name}(self) -> {elem_type(f)}:")
        out.append(f"{p}        v = self.{slot(f)}")
        out.append(f"{p}        if v is None: v = self.{slot(f)} = {f.struct.alias}()")
        out.append(f"{p}        return v")
        out.append("")
        out.append(f"{p}    @{f.name}.setter")
        out.append(f"{p}    def {f.name}(self, value: {elem_type(f)}) -> None:")
        out.append(f"{p}        self.{slot(f)} = value")
    # __repr__
    out.append("")
    out.append(f"{p}    def __repr__(self) -> str:")
    parts = []
    for f in sd.fields:
        if f.type == "records":
            parts.append(f"{f.name}={{_records_repr(self.{f.name})}}")
        else:
            parts.append(f"{f.name}={{self.{f.name}!r}}")
    inner = ", ".join(parts)
    if msg.flexible_min is not None:
        out.append(
            f"{p}        tags = f', unknown_tags={{self.unknown_tags!r}}' if self.unknown_tags else ''"
        )
        out.append(f'{p}        return f"{sd.qualname}({inner}{{tags}})"')
    else:
        out.append(f'{p}        return f"{sd.qualname}({inner})"')
