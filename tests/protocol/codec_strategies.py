"""Hypothesis strategies for every message and version, derived from the generator's model.

The model is built from the committed spec (src/gregor/protocol/spec/) by the same code the
generator uses, so the strategies follow the spec, not the generated code: a field is given a
value only in the versions where the spec says it is on the wire (or tagged).
"""

from __future__ import annotations

import importlib
import sys
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

from codegen import generate  # noqa: E402
from codegen.model import INT_RANGES, Api, FieldDef, MessageDef, StructDef  # noqa: E402


@cache
def apis() -> tuple[Api, ...]:
    return tuple(generate.load_model())


@cache
def api_by_name() -> dict[str, Api]:
    return {a.name: a for a in apis()}


def message_def(api: str, kind: str) -> MessageDef:
    a = api_by_name()[api]
    return a.request if kind == "request" else a.response


def runtime_class(module: str, qualname: str) -> type:
    obj: Any = importlib.import_module(f"gregor.protocol.messages.{module}")
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@cache
def _error_codes() -> list[int]:
    from gregor.protocol.errors import ErrorCode

    return sorted(int(c) for c in ErrorCode)


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)


class Options:
    """Knobs for interop tests, where the other side is stricter than the guide."""

    def __init__(
        self, null_arrays: bool = True, unknown_tags: bool = True, small_ints: bool = False
    ) -> None:
        self.null_arrays = null_arrays
        self.unknown_tags = unknown_tags
        # kio maps some int fields to datetime / timedelta, which reject most negatives and
        # years past 9999: keep integers in 0..10**12 when comparing with it.
        self.small_ints = small_ints


def _value(f: FieldDef, v: int, module: str, flex: bool, opts: Options, tagged: bool) -> Any:
    t = f.type
    if t == "boolean":
        s: Any = st.booleans()
    elif t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        if opts.small_ints:
            lo, hi = max(lo, 0), min(hi, 10**12)
        s = st.integers(lo, hi)
        if opts.small_ints and t == "int16" and f.name.endswith("error_code"):
            s = st.sampled_from(_error_codes())  # kio only accepts codes it knows
    elif t == "float64":
        s = st.floats(allow_nan=False)
    elif t == "uuid":
        s = st.uuids() | st.just(uuid.UUID(int=0))
    elif t == "string":
        s = _TEXT
    elif t == "bytes":
        s = st.binary(max_size=8)
    elif t == "records":
        s = st.binary(max_size=24)
    elif t == "struct":
        assert f.struct is not None
        s = struct_strategy(f.struct, v, module, flex, opts)
    else:
        raise AssertionError(t)
    if not f.array and f.nullable(v):
        s = st.none() | s
    if f.array:
        s = st.lists(s, max_size=3)
        # null only where the field's type admits it (null in some version, or a None default)
        if opts.null_arrays and not tagged and (f.nullable_versions or f.default is None):
            s = st.none() | s
    return s


def struct_strategy(sd: StructDef, v: int, module: str, flex: bool, opts: Options) -> Any:
    cls = runtime_class(module, sd.qualname)
    kwargs: dict[str, Any] = {}
    for f in sd.fields:
        if v in f.versions:
            kwargs[f.name] = _value(f, v, module, flex, opts, f.tag is not None)
    if flex and opts.unknown_tags:
        kwargs["unknown_tags"] = st.dictionaries(
            st.integers(20, 300), st.binary(max_size=4), max_size=2
        )
    return st.builds(cls, **kwargs)


def message_strategy(m: MessageDef, v: int, opts: Options | None = None) -> Any:
    opts = opts or Options()
    key = (m.api, m.kind, v, opts.null_arrays, opts.unknown_tags, opts.small_ints)
    s = _CACHE.get(key)
    if s is None:
        a = api_by_name()[m.api]
        s = _CACHE[key] = struct_strategy(m.root, v, a.module, m.flexible(v), opts)
    return s


_CACHE: dict[tuple, Any] = {}


def all_messages() -> list[tuple[str, str]]:
    return [(a.name, kind) for a in apis() for kind in ("request", "response")]
