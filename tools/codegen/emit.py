"""Emit Python source for the message modules, the registry and the error table.

One module per API (:func:`emit_module`): the classes (:mod:`codegen.emit_class`), then the
straight-line codec functions (:mod:`codegen.emit_codec`) and the version tables. The registry
``messages/__init__.py`` (:func:`emit_registry`) and ``errors.py``
(:func:`codegen.emit_errors.emit_errors`) complete the generated files.
"""

from __future__ import annotations

from codegen.emit_class import emit_class
from codegen.emit_codec import functions
from codegen.emit_errors import emit_errors
from codegen.emit_fields import HEADER, Module, fmt_name
from codegen.model import Api

__all__ = ["HEADER", "emit_errors", "emit_module", "emit_registry"]


def emit_module(api: Api) -> str:
    mod = Module()
    classes: list[str] = []
    funcs: list[str] = []
    tables: list[str] = []
    aliases: list[str] = []
    for msg in (api.request, api.response):
        classes.append("")
        classes.append("")
        emit_class(msg.root, msg, 0, classes, True, mod)
        for sd in msg.root.walk():
            aliases.append(f"{sd.alias} = {sd.qualname}")
        for kind in ("decode", "encode"):
            body, table = functions(mod, msg, kind)
            funcs += body
            attr = "_DECODERS" if kind == "decode" else "_ENCODERS"
            entries = ", ".join(f"{v}: {fn}" for v, fn in table.items())
            tables.append(f"{msg.class_name}.{attr} = {{{entries}}}")

    uses_uuid = any(
        f.type == "uuid"
        for m in (api.request, api.response)
        for sd in m.root.walk()
        for f in sd.fields
    )
    out = [HEADER.rstrip("\n")]
    out.append(
        f'"""{api.name} (API key {api.api_key}): request and response codecs.\n\n'
        f"Generated from src/gregor/protocol/spec/{api.module}.json and the hand-written tables "
        f"beside it.\n"
        f'See gregor.protocol.messages._base for the runtime contract."""'
    )
    out.append("")
    out.append("from __future__ import annotations")
    out.append("")
    out.append("import struct as _struct")
    out.append("from typing import Any")
    if uses_uuid:
        out.append("from uuid import UUID")
    out.append("")
    out.append("from gregor.protocol.messages._base import (")
    out.append("    UNSET, Append as _Append, Buffer as _Buffer, Message, Struct,")
    out.append("    bad_count as _bad_count, bad_length as _bad_length, null_array as _null_array,")
    out.append("    bad_tag_size as _bad_tag_size, records_repr as _records_repr,")
    out.append(")")
    out.append("from gregor.protocol.primitives import (")
    out.append(
        "    UVARINT1 as _UV1, ZERO_UUID as _ZERO_UUID, fixed_array_packers as _array_packers,"
    )
    out.append("    fixed_array_unpackers as _array_unpackers, read_tag_buffer as _read_tags,")
    out.append(
        "    read_uvarint as _ruv, read_varint as _read_varint, read_varlong as _read_varlong,"
    )
    out.append("    uuid_from_int as _uuid, uvarint_bytes as _uvb, varint_bytes as _varint_bytes,")
    out.append(
        "    varlong_bytes as _varlong_bytes, write_compact_records as _write_compact_records,"
    )
    out.append("    write_records as _write_records, write_tag_buffer as _write_tags,")
    out.append(")")
    out.append("")
    out.append(f"__all__ = [{api.request.class_name!r}, {api.response.class_name!r}]")
    out.append("")
    out.append("_new = object.__new__")
    out.append("_unpack_from = _struct.unpack_from")
    out.append("_pack = _struct.pack")
    out.append("_M64 = (1 << 64) - 1")
    for code in sorted(mod.unpack_arrays):
        out.append(f"_UA_{fmt_name(code)} = _array_unpackers({code!r})")
    for code in sorted(mod.pack_arrays):
        out.append(f"_PA_{fmt_name(code)} = _array_packers({code!r})")
    for fmt, name in sorted(mod.structs.items(), key=lambda kv: kv[1]):
        out.append(f"_S_{name} = _struct.Struct('>{fmt}')")
        out.append(f"_U_{name} = _S_{name}.unpack_from")
        out.append(f"_P_{name} = _S_{name}.pack")
    out += classes
    out.append("")
    out.append("")
    out += aliases
    for name, expr in mod.defaults.items():
        out.append(f"{name} = {expr}")
    out += funcs
    out.append("")
    out.append("")
    out += tables
    return "\n".join(out) + "\n"


# --- registry ------------------------------------------------------------------------------

REGISTRY_DOC = '''"""Kafka protocol messages: one generated module per API, and the registry.

``API_KEYS`` maps an API key to its :class:`ApiInfo`; ``API_BY_NAME`` maps the API name
("Produce", "Fetch", ...) to the same. Each message class decodes with
``Cls.decode(body, version)`` and encodes with ``obj.encode(version)``; see
:mod:`gregor.protocol.messages._base`.

An API's module is imported the first time one of its classes is used
(``from gregor.protocol.messages import FetchRequest``, ``API_KEYS[1].request``), so a process
loads only the APIs it uses.

Run ``python -m gregor.protocol.messages`` for the APIs and version counts.
"""'''

# ApiInfo and the module-level __getattr__: the registry imports a message module the first
# time one of its classes is asked for, so a process loads only the APIs it uses.
REGISTRY_CLASS = '''

class ApiInfo:
    """One API: key, name, version range, and its request and response classes.

    ``request`` and ``response`` are slots left unset until one of them is read: the first read
    imports the API's module (``gregor.protocol.messages.<module>``) and fills both, so later
    reads are plain attribute reads.
    """

    __slots__ = (
        "key", "name", "module", "min_version", "max_version", "flexible_min_version",
        "request", "response",
    )
    request: type[Message]
    response: type[Message]

    def __init__(
        self, key: int, name: str, module: str, min_version: int, max_version: int,
        flexible_min_version: int | None,
    ) -> None:
        self.key = key
        self.name = name
        self.module = module
        self.min_version = min_version
        self.max_version = max_version
        self.flexible_min_version = flexible_min_version

    if not TYPE_CHECKING:

        def __getattr__(self, attr):
            # Python calls this only for an attribute the instance lacks: an unset slot.
            if attr != "request" and attr != "response":
                raise AttributeError(f"'ApiInfo' object has no attribute {attr!r}")
            module = importlib.import_module(f"{__name__}.{self.module}")
            self.request = getattr(module, self.name + "Request")
            self.response = getattr(module, self.name + "Response")
            return getattr(self, attr)

    def __repr__(self) -> str:
        return (
            f"ApiInfo(key={self.key}, name={self.name!r}, versions={self.min_version}-"
            f"{self.max_version}, flexible_min_version={self.flexible_min_version})"
        )


if not TYPE_CHECKING:

    def __getattr__(name):
        # A message class (``FetchRequest``, ...) not yet imported: import its module, and keep
        # the class in this module's namespace so the next lookup does not come here.
        for suffix in ("Request", "Response"):
            info = API_BY_NAME.get(name[: -len(suffix)]) if name.endswith(suffix) else None
            if info is not None:
                cls = getattr(info, suffix.lower())
                globals()[name] = cls
                return cls
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(globals()) | set(__all__))

'''


def emit_registry(apis: list[Api]) -> str:
    out = [HEADER.rstrip("\n"), REGISTRY_DOC, ""]
    out.append("import importlib")
    out.append("from typing import TYPE_CHECKING")
    out.append("")
    out.append("from gregor.protocol.exceptions import ProtocolError")
    out.append("from gregor.protocol.messages._base import Message, Struct")
    out.append("")
    out.append("if TYPE_CHECKING:")
    for api in sorted(apis, key=lambda a: a.module):
        for msg, suffix in ((api.request, "Request"), (api.response, "Response")):
            if msg.class_name != api.name + suffix:
                raise ValueError(f"{api.name}: class {msg.class_name} is not {api.name}{suffix}")
        out.append(
            f"    from gregor.protocol.messages.{api.module} import "
            f"{api.request.class_name}, {api.response.class_name}"
        )
    out.append(REGISTRY_CLASS)
    out.append("API_KEYS: dict[int, ApiInfo] = {")
    for api in sorted(apis, key=lambda a: a.api_key):
        rq, rs = api.request, api.response
        if (rq.min_version, rq.max_version, rq.flexible_min) != (
            rs.min_version,
            rs.max_version,
            rs.flexible_min,
        ):
            raise ValueError(f"{api.name}: request and response version ranges differ")
        out.append(
            f"    {api.api_key}: ApiInfo({api.api_key}, {api.name!r}, {api.module!r}, "
            f"{rq.min_version}, {rq.max_version}, {rq.flexible_min!r}),"
        )
    out.append("}")
    out.append("API_BY_NAME: dict[str, ApiInfo] = {info.name: info for info in API_KEYS.values()}")
    out.append("")
    out.append(
        "# Versions (of both request and response) that come from tools/codegen/supplement.txt"
    )
    out.append("# rather than the protocol guide, by API key.")
    out.append("SUPPLEMENT_VERSIONS: dict[int, tuple[int, ...]] = {")
    for api in sorted(apis, key=lambda a: a.api_key):
        rq, rs = api.request, api.response
        if rq.supplement_versions != rs.supplement_versions:
            raise ValueError(f"{api.name}: request and response supplement versions differ")
        if rq.supplement_versions:
            out.append(f"    {api.api_key}: {tuple(sorted(rq.supplement_versions))!r},")
    out.append("}")
    out.append("")
    out.append(
        '''

def _info(api_key: int) -> ApiInfo:
    try:
        return API_KEYS[api_key]
    except KeyError:
        raise ProtocolError(f"unknown API key {api_key}") from None


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether ``api_version`` of the API uses the flexible (compact, tagged) encoding.

    Versions past the highest known one count as flexible when the API has flexible
    versions at all (so a newer client's header can still be read).
    """
    flex = _info(api_key).flexible_min_version
    return flex is not None and api_version >= flex


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions, else 1; ControlledShutdown v0 uses header v0."""
    if api_key == 7 and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions responses always use header v0."""
    if api_key == 18:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


def counts() -> str:
    """A table of version counts per API; totals for the guide, the supplement and both."""
    lines = [f"{'key':>4}  {'api':<30} {'req':>3} {'resp':>4}"]
    n_req = n_resp = n_sup = guide_apis = 0
    added = []
    for key, info in sorted(API_KEYS.items()):
        req = len(info.request._DECODERS)
        resp = len(info.response._DECODERS)
        sup = SUPPLEMENT_VERSIONS.get(key, ())
        n_req += req
        n_resp += resp
        n_sup += len(sup)
        guide_apis += req > len(sup)
        note = ""
        if sup:
            vs = ", ".join(f"v{v}" for v in sup)
            note = f"  (supplement: {vs})"
            added.append(f"{info.name} {vs}")
        lines.append(f"{key:>4}  {info.name:<30} {req:>3} {resp:>4}{note}")
    lines.append(
        f"{guide_apis} APIs, {n_req - n_sup} request versions, {n_resp - n_sup} response versions"
        " in the guide"
    )
    lines.append(
        f"+{n_sup} request versions, +{n_sup} response versions from the supplement"
        + (": " + "; ".join(added) if added else "")
    )
    lines.append(f"{len(API_KEYS)} APIs, {n_req} request versions, {n_resp} response versions in all")
    return "\\n".join(lines)'''.lstrip("\n")
    )
    names = ["ApiInfo", "API_KEYS", "API_BY_NAME", "Message", "Struct", "is_flexible"]
    names += ["request_header_version", "response_header_version", "counts", "SUPPLEMENT_VERSIONS"]
    for api in sorted(apis, key=lambda a: a.module):
        names += [api.request.class_name, api.response.class_name]
    out.append("")
    out.append("")
    out.append("__all__ = [")
    for n in names:
        out.append(f"    {n!r},")
    out.append("]")
    return "\n".join(out) + "\n"
