"""Runtime support shared by the generated message modules (hand-written).

Each generated module defines ``<Api>Request`` / ``<Api>Response`` classes deriving from
:class:`Message`, with nested struct classes deriving from :class:`Struct`. A message class
carries two tables filled in by its module: ``_DECODERS`` and ``_ENCODERS``, mapping a version
to a plain function with straight-line code for that version's layout (versions with the same
layout share one function). The functions:

* ``decoder(buf, pos) -> (obj, new_pos)`` reads from any bytes-like ``buf`` (:data:`Buffer`);
* ``encoder(obj, append)`` calls ``append`` (:data:`Append`) with each encoded part (bytes, or
  the RECORDS value itself, see :func:`gregor.protocol.primitives.write_records`).

The generated classes declare their fields with annotations (``group_id: str``,
``topics: list[MetadataRequest.Topics]``, ``records: bytes | bytearray | memoryview | None``)
and take them as typed keyword arguments; the codec functions are annotated too, and the
whole package type-checks under ``mypy --strict``.

This module turns low-level failures inside those functions (``struct.error`` on truncation,
``UnicodeDecodeError``, ``IndexError`` past the end, ...) into :class:`ProtocolError`, checks for
trailing bytes and unsupported versions, and joins parts once on encode.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, ClassVar, TypeAlias, TypeVar

from gregor.protocol.exceptions import ProtocolError

T = TypeVar("T", bound="Message")

#: What decoders read: any bytes-like buffer.
Buffer: TypeAlias = bytes | bytearray | memoryview
#: What encoders write through: ``list.append`` of the parts list.
Append: TypeAlias = Callable[[Any], object]
#: ``decoder(buf, pos) -> (message, position after it)``
Decoder: TypeAlias = Callable[[Buffer, int], tuple[Any, int]]
#: ``encoder(message, append)``
Encoder: TypeAlias = Callable[[Any, Append], None]


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


#: Marker for "argument not given" in generated ``__init__`` (so None can mean null).
UNSET: Any = _Unset()

_DECODE_ERRORS = (struct.error, ValueError, IndexError, OverflowError, MemoryError)
_ENCODE_ERRORS = (struct.error, ValueError, TypeError, AttributeError, OverflowError)


class Struct:
    """Base of every generated struct (nested classes and messages)."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[str, ...]] = ()

    __hash__ = None  # type: ignore[assignment]  # mutable

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict, nested structs converted too (for logging and tests)."""
        out: dict[str, Any] = {}
        for name in self._FIELDS:
            out[name] = _plain(getattr(self, name))
        return out


def _plain(v: Any) -> Any:
    if isinstance(v, Struct):
        return v.to_dict()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, memoryview):
        return bytes(v)
    return v


class Message(Struct):
    """Base of every generated request and response class."""

    __slots__ = ()
    API_KEY: ClassVar[int]
    API_NAME: ClassVar[str]
    MIN_VERSION: ClassVar[int]
    MAX_VERSION: ClassVar[int]
    FLEXIBLE_MIN_VERSION: ClassVar[int | None]
    _DECODERS: ClassVar[dict[int, Decoder]]
    _ENCODERS: ClassVar[dict[int, Encoder]]

    @classmethod
    def decode(cls: type[T], data: Buffer, version: int) -> T:
        """Decode a whole body (everything after the header); trailing bytes are an error.

        RECORDS fields of the result are memoryview slices of ``data`` (no copy).
        """
        try:
            fn = cls._DECODERS[version]
        except (KeyError, TypeError):
            raise ProtocolError(
                f"{cls.__name__} version {version!r} is not supported "
                f"({cls.MIN_VERSION}-{cls.MAX_VERSION})"
            ) from None
        obj: T
        try:
            obj, pos = fn(data, 0)
        except ProtocolError:
            raise
        except _DECODE_ERRORS as e:
            raise ProtocolError(f"{cls.__name__} v{version}: malformed body ({e})") from None
        if pos != len(data):
            raise ProtocolError(
                f"{cls.__name__} v{version}: {len(data) - pos} trailing bytes after the body"
            )
        return obj

    @classmethod
    def decode_from(cls: type[T], buf: Buffer, pos: int, version: int) -> tuple[T, int]:
        """Decode one body starting at ``pos``; return (message, position after it)."""
        try:
            fn = cls._DECODERS[version]
        except (KeyError, TypeError):
            raise ProtocolError(
                f"{cls.__name__} version {version!r} is not supported "
                f"({cls.MIN_VERSION}-{cls.MAX_VERSION})"
            ) from None
        try:
            return fn(buf, pos)
        except ProtocolError:
            raise
        except _DECODE_ERRORS as e:
            raise ProtocolError(f"{cls.__name__} v{version}: malformed body ({e})") from None

    def encode_parts(self, version: int) -> list[Any]:
        """The encoded body as a list of parts (bytes, and RECORDS values as given)."""
        try:
            fn = self._ENCODERS[version]
        except (KeyError, TypeError):
            raise ProtocolError(
                f"{type(self).__name__} version {version!r} is not supported "
                f"({self.MIN_VERSION}-{self.MAX_VERSION})"
            ) from None
        parts: list[Any] = []
        try:
            fn(self, parts.append)
        except ProtocolError:
            raise
        except _ENCODE_ERRORS as e:
            raise ProtocolError(f"{type(self).__name__} v{version}: cannot encode ({e})") from e
        return parts

    def encode(self, version: int) -> bytes:
        """The encoded body (no size prefix, no header)."""
        try:
            fn = self._ENCODERS[version]
        except (KeyError, TypeError):
            raise ProtocolError(
                f"{type(self).__name__} version {version!r} is not supported "
                f"({self.MIN_VERSION}-{self.MAX_VERSION})"
            ) from None
        parts: list[Any] = []
        try:
            fn(self, parts.append)
            return b"".join(parts)
        except ProtocolError:
            raise
        except _ENCODE_ERRORS as e:
            raise ProtocolError(f"{type(self).__name__} v{version}: cannot encode ({e})") from e


def records_repr(v: Any) -> str:
    if v is None:
        return "None"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return f"<{len(v)} bytes>"
    return repr(v)


def bad_length(n: int) -> ProtocolError:
    return ProtocolError(f"invalid length {n}")


def null_array(n: int, name: str) -> ProtocolError:
    """A negative count for an array that is null in no version: refused, as Kafka's generated
    readers refuse it."""
    if n != -1:
        return bad_length(n)
    return ProtocolError(f"non-nullable field {name} was serialized as null")


def truncated() -> ProtocolError:
    return ProtocolError("truncated: a length points past the end of the buffer")


def bad_count(n: int) -> ProtocolError:
    return ProtocolError(f"array count {n} exceeds what the remaining bytes can hold")


def bad_tag_size(tag: int) -> ProtocolError:
    return ProtocolError(f"tagged field {tag}: size does not match its content")
