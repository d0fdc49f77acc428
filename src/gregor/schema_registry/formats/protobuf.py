"""Protobuf schemas: ``.proto`` text compiled by protoc (grpcio-tools' build of it, run as a
child process), or a base64 ``FileDescriptorProto`` (what confluent-kafka's serializers send),
compared by Confluent's Protobuf rules.

Theory of operation. Whatever the form, a schema becomes a ``FileDescriptorProto``: text is
compiled by ``python -m grpc_tools.protoc --descriptor_set_out`` in a private temporary
directory, with the referenced schemas given to it as a descriptor set
(``--descriptor_set_in``) under their reference names, so ``import "other.proto";`` resolves
to the schema registered under that name, and Google's well-known types from grpcio-tools'
own include directory; a base64 descriptor is decoded and built into a descriptor pool with its
dependencies, which checks its types resolve. protoc runs in a child process with a time
limit: a hostile file cannot hang or crash the registry, and its one-line error is the answer.

Text keeps its text as the stored form; a descriptor's stored form is the ``.proto`` text
printed from it (``print_proto``), as Confluent stores it. ``format=serialized`` answers the
base64 descriptor. The normalized form is the printed text of the compiled descriptor.

Compatibility (``incompatibilities``), reader against writer: the package may not change; no
message of the writer may be removed; a field number kept must keep a compatible kind
(varints int32/int64/uint32/uint64/bool, zigzag sint32/sint64, fixed32/sfixed32,
fixed64/sfixed64, string/bytes, and the same message or enum type), the same cardinality, and
may not move into a oneof that already existed; a proto2 required field may not be added or
removed. Removing a field or adding an optional one is compatible both ways.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

from gregor.schema_registry.formats.base import (
    Dependency,
    Incompatibility,
    ParsedSchema,
    SchemaParseError,
    flatten,
)

PROTOC_TIMEOUT_S = 60.0
MAIN_FILE = "schema.proto"
_B64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.\-/]+$")

SCALARS = {
    1: "double",
    2: "float",
    3: "int64",
    4: "uint64",
    5: "int32",
    6: "fixed64",
    7: "fixed32",
    8: "bool",
    9: "string",
    12: "bytes",
    13: "uint32",
    15: "sfixed32",
    16: "sfixed64",
    17: "sint32",
    18: "sint64",
}
TYPE_GROUP, TYPE_MESSAGE, TYPE_ENUM = 10, 11, 14
LABEL_OPTIONAL, LABEL_REQUIRED, LABEL_REPEATED = 1, 2, 3
_KIND_CLASSES = [{3, 4, 5, 8, 13}, {17, 18}, {7, 15}, {6, 16}, {9, 12}]


def _well_known() -> list[Any]:
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


def _include_dir() -> str:
    from importlib import resources

    return str(resources.files("grpc_tools") / "_proto")


class ProtobufSchema(ParsedSchema):
    schema_type = "PROTOBUF"

    def __init__(self, text: str, file: Any, dependencies: list[Any]) -> None:
        self.text = text
        self.file = file  # FileDescriptorProto
        self.dependency_files = dependencies

    @classmethod
    def parse(cls, text: str, dependencies: tuple[Dependency, ...] = ()) -> ProtobufSchema:
        from google.protobuf import descriptor_pb2

        dep_files: list[Any] = []
        names: set[str] = set()
        for dep in flatten(dependencies):
            if dep.schema_type != "PROTOBUF":
                raise SchemaParseError(
                    f"reference {dep.name!r} is a {dep.schema_type} schema, not PROTOBUF"
                )
            parsed = cls._parse_one(dep.schema, dep.name, dep_files)
            parsed.file.name = dep.name
            if dep.name not in names:
                names.add(dep.name)
                dep_files.append(parsed.file)
        stripped = text.strip()
        if _B64.match(stripped) and ";" not in stripped:
            try:
                fdp = descriptor_pb2.FileDescriptorProto()
                fdp.ParseFromString(base64.b64decode(stripped, validate=False))
            except (binascii.Error, ValueError, Exception) as e:
                raise SchemaParseError(f"not a base64 FileDescriptorProto: {e}") from None
            _check_pool(fdp, dep_files)
            return cls(print_proto(fdp), fdp, dep_files)
        return cls._parse_one(text, MAIN_FILE, dep_files)

    @classmethod
    def _parse_one(cls, text: str, name: str, dep_files: list[Any]) -> ProtobufSchema:
        from google.protobuf import descriptor_pb2

        stripped = text.strip()
        if _B64.match(stripped) and ";" not in stripped:
            fdp = descriptor_pb2.FileDescriptorProto()
            try:
                fdp.ParseFromString(base64.b64decode(stripped))
            except Exception as e:
                raise SchemaParseError(f"not a base64 FileDescriptorProto: {e}") from None
            _check_pool(fdp, dep_files)
            return cls(print_proto(fdp), fdp, list(dep_files))
        return cls(text, _compile(text, name, dep_files), list(dep_files))

    def canonical(self) -> str:
        return self.text

    def normalized(self) -> ProtobufSchema:
        return ProtobufSchema(print_proto(self.file), self.file, self.dependency_files)

    def formatted(self, fmt: str | None) -> str:
        if fmt == "serialized":
            return base64.b64encode(self.file.SerializeToString(deterministic=True)).decode("ascii")
        return self.text

    def incompatibilities(self, writer: ParsedSchema) -> list[Incompatibility]:
        if not isinstance(writer, ProtobufSchema):
            return [
                Incompatibility(
                    "TYPE_CHANGED", "#/", f"the old schema is {writer.schema_type}, not PROTOBUF"
                )
            ]
        out: list[Incompatibility] = []
        r, w = self.file, writer.file
        if r.package != w.package:
            out.append(
                Incompatibility(
                    "PACKAGE_CHANGED",
                    "#/",
                    f"the package changed from '{w.package}' to '{r.package}'",
                )
            )
        # messages by their names inside the package (a changed package is reported once)
        rmsgs = dict(_messages(r.message_type, ""))
        for name, wm in _messages(w.message_type, ""):
            rm = rmsgs.get(name)
            if rm is None:
                out.append(
                    Incompatibility(
                        "MESSAGE_REMOVED", f"#/{name}", f"the message '{name}' was removed"
                    )
                )
                continue
            _compare_message(name, rm, wm, out, r.package, w.package)
        return out


def _messages(msgs: Any, prefix: str) -> list[tuple[str, Any]]:
    out = []
    for m in msgs:
        full = f"{prefix}.{m.name}" if prefix else m.name
        if m.options.map_entry:
            continue
        out.append((full, m))
        out.extend(_messages(m.nested_type, full))
    return out


def _relative(type_name: str, package: str) -> str:
    """A message or enum type's name inside its file's package (``.acme.Order.Item`` in
    ``acme``: ``Order.Item``), so a changed package is not also every field's type change."""
    prefix = f".{package}." if package else "."
    return type_name[len(prefix) :] if type_name.startswith(prefix) else type_name


def _kind_compatible(a: Any, b: Any, a_package: str, b_package: str) -> bool:
    named = (TYPE_MESSAGE, TYPE_GROUP, TYPE_ENUM)
    if a.type in named or b.type in named:
        return bool(
            a.type == b.type
            and _relative(a.type_name, a_package) == _relative(b.type_name, b_package)
        )
    if a.type == b.type:
        return True
    return any(a.type in group and b.type in group for group in _KIND_CLASSES)


def _compare_message(
    name: str, r: Any, w: Any, out: list[Incompatibility], r_package: str, w_package: str
) -> None:
    rf = {f.number: f for f in r.field}
    wf = {f.number: f for f in w.field}
    w_oneofs = {o.name for o in w.oneof_decl}
    for number, f in rf.items():
        path = f"#/{name}/{number}"
        old = wf.get(number)
        if old is None:
            if f.label == LABEL_REQUIRED:
                out.append(
                    Incompatibility(
                        "REQUIRED_FIELD_ADDED", path, f"the required field '{f.name}' was added"
                    )
                )
            continue
        if not _kind_compatible(f, old, r_package, w_package):
            out.append(
                Incompatibility(
                    "FIELD_KIND_CHANGED",
                    path,
                    f"the field '{f.name}' in '{name}' changed its kind incompatibly",
                )
            )
        elif (f.label == LABEL_REPEATED) != (old.label == LABEL_REPEATED):
            out.append(
                Incompatibility(
                    "FIELD_SCALAR_KIND_CHANGED",
                    path,
                    f"the field '{f.name}' in '{name}' changed between repeated and singular",
                )
            )
        r_oneof = _real_oneof(r, f)
        w_oneof = _real_oneof(w, old)
        if r_oneof is not None and w_oneof is None and r_oneof in w_oneofs:
            out.append(
                Incompatibility(
                    "FIELD_MOVED_TO_EXISTING_ONEOF",
                    path,
                    f"the field '{f.name}' moved into the existing oneof '{r_oneof}'",
                )
            )
    for number, old in wf.items():
        if number not in rf and old.label == LABEL_REQUIRED:
            out.append(
                Incompatibility(
                    "REQUIRED_FIELD_REMOVED",
                    f"#/{name}/{number}",
                    f"the required field '{old.name}' was removed",
                )
            )


def _real_oneof(msg: Any, f: Any) -> str | None:
    if not f.HasField("oneof_index") or f.proto3_optional:
        return None
    return str(msg.oneof_decl[f.oneof_index].name)


def _check_pool(fdp: Any, dep_files: list[Any]) -> None:
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    have = {d.name for d in dep_files}
    try:
        for wk in _well_known():
            if wk.name not in have:
                pool.Add(wk)
        for d in dep_files:
            pool.Add(d)
        pool.Add(fdp)
        pool.FindFileByName(fdp.name)
    except Exception as e:
        raise SchemaParseError(f"the descriptor does not build: {e}") from None


def _compile(text: str, name: str, dep_files: list[Any]) -> Any:
    from google.protobuf import descriptor_pb2

    if not _SAFE_NAME.match(name) or name.startswith("/") or ".." in name.split("/"):
        raise SchemaParseError(f"the reference name {name!r} is not a relative .proto path")
    with tempfile.TemporaryDirectory(prefix="gregor-protoc-") as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(os.path.join(src, os.path.dirname(name)), exist_ok=True)
        with open(os.path.join(src, name), "w", encoding="utf-8") as fh:
            fh.write(text)
        args = [sys.executable, "-m", "grpc_tools.protoc", f"--proto_path={src}"]
        if dep_files:
            deps_path = os.path.join(tmp, "deps.pb")
            fds = descriptor_pb2.FileDescriptorSet()
            fds.file.extend(dep_files)
            with open(deps_path, "wb") as fh:
                fh.write(fds.SerializeToString())
            args.append(f"--descriptor_set_in={deps_path}")
        out_path = os.path.join(tmp, "out.pb")
        args += [f"--proto_path={_include_dir()}", f"--descriptor_set_out={out_path}", name]
        try:
            done = subprocess.run(
                args, capture_output=True, timeout=PROTOC_TIMEOUT_S, cwd=tmp, check=False
            )
        except subprocess.TimeoutExpired:
            raise SchemaParseError("protoc did not finish in time") from None
        if done.returncode != 0 or not os.path.exists(out_path):
            err = done.stderr.decode("utf-8", "replace").replace(src + os.sep, "").strip()
            first = err.splitlines()[0] if err else f"protoc exited with {done.returncode}"
            raise SchemaParseError(first[:500])
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out_path, "rb") as fh:
            fds.ParseFromString(fh.read())
    for f in fds.file:
        if f.name == name:
            return f
    raise SchemaParseError("protoc produced no descriptor")


# --- printing a descriptor as .proto text ---

_FILE_OPTIONS = (
    "java_package",
    "java_outer_classname",
    "java_multiple_files",
    "go_package",
    "csharp_namespace",
    "objc_class_prefix",
    "php_namespace",
    "ruby_package",
    "optimize_for",
)


def _literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(v)


def print_proto(fdp: Any) -> str:
    """``.proto`` text for a FileDescriptorProto: syntax, package, imports, the common file
    options, messages (fields, maps, oneofs, nested types, reserved), enums and services."""
    syntax = fdp.syntax or "proto2"
    lines = [f'syntax = "{syntax}";']
    if fdp.package:
        lines.append(f"package {fdp.package};")
    public = set(fdp.public_dependency)
    weak = set(fdp.weak_dependency)
    for i, dep in enumerate(fdp.dependency):
        kind = "public " if i in public else "weak " if i in weak else ""
        lines.append(f'import {kind}"{dep}";')
    for opt in _FILE_OPTIONS:
        if fdp.options.HasField(opt):
            value = getattr(fdp.options, opt)
            if opt == "optimize_for":
                value = {1: "SPEED", 2: "CODE_SIZE", 3: "LITE_RUNTIME"}.get(value, "SPEED")
                lines.append(f"option {opt} = {value};")
            else:
                lines.append(f"option {opt} = {_literal(value)};")
    lines.append("")
    for m in fdp.message_type:
        lines.extend(_print_message(m, syntax, 0))
    for e in fdp.enum_type:
        lines.extend(_print_enum(e, 0))
    for s in fdp.service:
        lines.append(f"service {s.name} {{")
        for m in s.method:
            cs = "stream " if m.client_streaming else ""
            ss = "stream " if m.server_streaming else ""
            lines.append(f"  rpc {m.name}({cs}{m.input_type}) returns ({ss}{m.output_type});")
        lines.append("}")
    return "\n".join(lines).rstrip() + "\n"


def _field_type(f: Any) -> str:
    if f.type in (TYPE_MESSAGE, TYPE_ENUM, TYPE_GROUP):
        return str(f.type_name)
    return SCALARS.get(f.type, "bytes")


def _print_field(f: Any, syntax: str, maps: dict[str, Any], in_oneof: bool) -> str:
    if f.type == TYPE_MESSAGE and f.type_name in maps and f.label == LABEL_REPEATED:
        entry = maps[f.type_name]
        kf = next(x for x in entry.field if x.number == 1)
        vf = next(x for x in entry.field if x.number == 2)
        decl = f"map<{_field_type(kf)}, {_field_type(vf)}> {f.name} = {f.number}"
    else:
        label = ""
        if not in_oneof:
            if f.label == LABEL_REPEATED:
                label = "repeated "
            elif f.label == LABEL_REQUIRED:
                label = "required "
            elif syntax == "proto2" or f.proto3_optional:
                label = "optional "
        decl = f"{label}{_field_type(f)} {f.name} = {f.number}"
    opts = []
    if f.HasField("default_value"):
        dv = f.default_value
        opts.append(f"default = {_literal(dv) if f.type in (9, 12) else dv}")
    if f.options.HasField("packed"):
        opts.append(f"packed = {_literal(f.options.packed)}")
    if f.options.HasField("deprecated"):
        opts.append(f"deprecated = {_literal(f.options.deprecated)}")
    return decl + (f" [{', '.join(opts)}]" if opts else "") + ";"


def _print_enum(e: Any, depth: int) -> list[str]:
    pad = "  " * depth
    lines = [f"{pad}enum {e.name} {{"]
    if e.options.HasField("allow_alias"):
        lines.append(f"{pad}  option allow_alias = {_literal(e.options.allow_alias)};")
    for v in e.value:
        lines.append(f"{pad}  {v.name} = {v.number};")
    lines.extend(_print_reserved(e.reserved_range, e.reserved_name, pad + "  ", inclusive=True))
    lines.append(f"{pad}}}")
    return lines


def _print_reserved(ranges: Any, names: Any, pad: str, inclusive: bool) -> list[str]:
    out = []
    parts = []
    for r in ranges:
        end = r.end if inclusive else r.end - 1
        parts.append(
            str(r.start) if end == r.start else f"{r.start} to {'max' if end >= 536870911 else end}"
        )
    if parts:
        out.append(f"{pad}reserved {', '.join(parts)};")
    if names:
        out.append(f"{pad}reserved {', '.join(_literal(n) for n in names)};")
    return out


def _print_message(m: Any, syntax: str, depth: int) -> list[str]:
    pad = "  " * depth
    lines = [f"{pad}message {m.name} {{"]
    entries = {n.name: n for n in m.nested_type if n.options.map_entry}
    resolved_maps = {}
    for f in m.field:
        tail = f.type_name.rsplit(".", 1)[-1]
        if f.type == TYPE_MESSAGE and tail in entries and f.type_name.endswith(f"{m.name}.{tail}"):
            resolved_maps[f.type_name] = entries[tail]
    printed_oneofs: set[int] = set()
    for f in m.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            idx = f.oneof_index
            if idx in printed_oneofs:
                continue
            printed_oneofs.add(idx)
            lines.append(f"{pad}  oneof {m.oneof_decl[idx].name} {{")
            for g in m.field:
                if g.HasField("oneof_index") and not g.proto3_optional and g.oneof_index == idx:
                    lines.append(f"{pad}    {_print_field(g, syntax, resolved_maps, True)}")
            lines.append(f"{pad}  }}")
        else:
            lines.append(f"{pad}  {_print_field(f, syntax, resolved_maps, False)}")
    for n in m.nested_type:
        if not n.options.map_entry:
            lines.extend(_print_message(n, syntax, depth + 1))
    for e in m.enum_type:
        lines.extend(_print_enum(e, depth + 1))
    lines.extend(_print_reserved(m.reserved_range, m.reserved_name, pad + "  ", inclusive=False))
    lines.append(f"{pad}}}")
    return lines
