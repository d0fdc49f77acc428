"""Which record walk is in use: the compiled one (``_scan``) or the pure-Python reference
(``_scan_py``), and the record-walk functions dispatched to it.

The compiled walk is used when it imports; ``GREGOR_NO_EXTENSIONS=1`` in the environment
forces the reference, and :func:`set_implementation` switches at run time (the tests run
every record test against both). ``scan`` re-exports all of this; ``batch`` imports it from
here, below ``scan``, so the record modules import each other in one direction only.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from gregor.protocol import extensions
from gregor.protocol.records import _scan_py

Buffer = bytes | bytearray | memoryview
T = TypeVar("T", bound=tuple[Any, ...])

_compiled = extensions.compiled("gregor.protocol.records._scan")
_IMPLEMENTATIONS: dict[str, ModuleType | None] = {"python": _scan_py, "cython": _compiled}
_impl: ModuleType = _scan_py if extensions.disabled() or _compiled is None else _compiled


def current() -> ModuleType:
    """The module of the record walk in use."""
    return _impl


def implementation() -> str:
    """``"cython"`` or ``"python"``: which record walk is in use."""
    name: str = _impl.IMPLEMENTATION
    return name


def available() -> list[str]:
    return [name for name, mod in _IMPLEMENTATIONS.items() if mod is not None]


def set_implementation(name: str) -> str:
    """Use the named record walk from now on; return the previous name."""
    global _impl
    mod = _IMPLEMENTATIONS.get(name)
    if mod is None:
        raise ValueError(f"record walk implementation {name!r} is not available")
    previous = implementation()
    _impl = mod
    return previous


def decode_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    record_type: type[T],
) -> list[T]:
    result: list[T] = _impl.decode_records(
        data, count, base_offset, base_timestamp, log_append_time, record_type
    )
    return result


def new_buffer(size: int) -> bytearray:
    """A bytearray of ``size`` bytes to read a frame into (not zeroed when compiled)."""
    buf: bytearray = _impl.new_buffer(size)
    return buf


def validate_records(data: Buffer, count: int) -> None:
    _impl.validate_records(data, count)


def schema_ids(data: Buffer, count: int, value: bool) -> list[int]:
    """Per record, the Confluent wire format's schema id of its value or key (-2 null, -1 not
    framed; see ``_scan_py.schema_ids``), or ProtocolError."""
    ids: list[int] = _impl.schema_ids(data, count, value)
    return ids


def avro_validator(kinds: list[int], a: list[int], b: list[int], children: list[int]) -> Any:
    """The Avro payload walk of a schema given as a program of nodes (see
    ``_avro_py.AvroValidator``): an object whose ``check(payload)`` answers None or why not."""
    return _impl.AvroValidator(kinds, a, b, children)


def check_payloads(
    data: Buffer,
    count: int,
    value: bool,
    ids: list[int],
    checks: dict[int, Callable[[bytes], str | None]],
) -> list[tuple[int, int, str]]:
    """The records whose value (or key) ``checks[ids[i]]`` refuses, as ``(index, schema id,
    why)`` (see ``_scan_py.check_payloads``), or ProtocolError."""
    out: list[tuple[int, int, str]] = _impl.check_payloads(data, count, value, ids, checks)
    return out


def check_records(data: Buffer, count: int, base_timestamp: int) -> tuple[int, int, int, int]:
    """A produced batch's records as its leader judges them: ``(min_timestamp, max_timestamp,
    keyless, bad_delta)``, or ProtocolError (see ``_scan_py.check_records``)."""
    facts: tuple[int, int, int, int] = _impl.check_records(data, count, base_timestamp)
    return facts


def clear_array(arr: array[int]) -> None:
    """Empty ``arr`` for reuse; the compiled walk keeps its room."""
    _impl.clear_array(arr)


def reserve_columns(columns: Any, records: int, value_bytes: int) -> None:
    """Room in ``ArrowColumns`` for a record set's records and value bytes (a hint)."""
    _impl.reserve_columns(columns, records, value_bytes)


def record_appender() -> _scan_py.RecordAppender:
    """A new ``RecordAppender`` of the walk in use (the records of one batch being built; the
    compiled one has the reference's interface)."""
    appender: _scan_py.RecordAppender = _impl.RecordAppender()
    return appender
