"""Column buffers that the record walk fills for the bulk (Arrow) reader.

Theory of operation. One :class:`ArrowColumns` collects the records of many batches of one
partition as plain buffers in Arrow's own layout, so ``gregor.client.arrow`` wraps them into
arrays without touching a record again:

* ``offsets``, ``timestamps``: int64 per record; ``timestamp_types`` int32 per record. A
  timestamp is the record's milliseconds times ``timestamp_scale`` (1000 gives the microseconds
  of Spark's TimestampType; a product past int64 is the walk's "out of range" error).
* key and value: a binary column each: int32 ``*_offsets`` (one more entry than records,
  starting at 0), the bytes in ``*_data``, and ``*_valid`` (one byte per record, 0 = null);
  all of them ``array`` objects (the compiled walk grows them in place, amortized). Each
  ``*_valid`` has a count of its zeros beside it (``key_nulls``, ``value_nulls``,
  ``header_nulls``, ``hvalue_nulls``), so a column without nulls needs no bitmap.
* headers (only when the walk is asked for them): ``header_offsets`` (int32, cumulative
  header count per record, starting at 0) and ``header_valid`` (0 where a record has no
  headers: Spark's Kafka source returns null there, not an empty list); the header entries
  are a string column ``hkey_*`` and a binary column ``hvalue_*`` laid out like keys.

Both walk implementations (``_scan_py`` and the compiled ``_scan``) append to these buffers
and must leave identical bytes. After a ProtocolError the buffers are undefined.

The arrays come from ``make`` (new ones by default; ``spares.new_arrow_columns`` reuses the
arrays of batches no one holds any more).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from gregor.protocol.exceptions import ProtocolError

#: Makes the empty array of one column: (column name, array typecode, starts with a 0 entry).
ArrayMaker = Callable[[str, str, bool], "array[int]"]


def new_array(column: str, typecode: str, first_zero: bool) -> array[int]:
    """A new empty array for ``column`` (``[0]`` for an offsets column)."""
    return array(typecode, [0] if first_zero else [])


class ArrowColumns:
    __slots__ = (
        "offsets",
        "timestamps",
        "timestamp_types",
        "key_offsets",
        "key_data",
        "key_valid",
        "value_offsets",
        "value_data",
        "value_valid",
        "header_offsets",
        "header_valid",
        "hkey_offsets",
        "hkey_data",
        "hvalue_offsets",
        "hvalue_data",
        "hvalue_valid",
        "timestamp_scale",
        "key_nulls",
        "value_nulls",
        "header_nulls",
        "hvalue_nulls",
    )

    def __init__(self, timestamp_scale: int = 1, make: ArrayMaker = new_array) -> None:
        self.offsets = make("offsets", "q", False)
        self.timestamps = make("timestamps", "q", False)
        self.timestamp_types = make("timestamp_types", "i", False)
        self.key_offsets = make("key_offsets", "i", True)
        self.key_data = make("key_data", "B", False)
        self.key_valid = make("key_valid", "B", False)
        self.value_offsets = make("value_offsets", "i", True)
        self.value_data = make("value_data", "B", False)
        self.value_valid = make("value_valid", "B", False)
        self.header_offsets = make("header_offsets", "i", True)
        self.header_valid = make("header_valid", "B", False)
        self.hkey_offsets = make("hkey_offsets", "i", True)
        self.hkey_data = make("hkey_data", "B", False)
        self.hvalue_offsets = make("hvalue_offsets", "i", True)
        self.hvalue_data = make("hvalue_data", "B", False)
        self.hvalue_valid = make("hvalue_valid", "B", False)
        self.timestamp_scale = timestamp_scale
        self.key_nulls = 0
        self.value_nulls = 0
        self.header_nulls = 0
        self.hvalue_nulls = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def add_record(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        include_headers: bool,
    ) -> None:
        """Append one record given as objects (the legacy message path and the reference)."""
        try:
            self.offsets.append(offset)
            self.timestamps.append(timestamp * self.timestamp_scale)
        except OverflowError:
            raise _out_of_range() from None
        self.timestamp_types.append(timestamp_type)
        self.key_nulls += _add_binary(self.key_offsets, self.key_data, self.key_valid, key)
        self.value_nulls += _add_binary(
            self.value_offsets, self.value_data, self.value_valid, value
        )
        if include_headers:
            if headers is None:
                self.header_valid.append(0)
                self.header_nulls += 1
            else:
                self.header_valid.append(1)
                for hkey, hvalue in headers:
                    _add_binary(self.hkey_offsets, self.hkey_data, None, hkey.encode())
                    self.hvalue_nulls += _add_binary(
                        self.hvalue_offsets, self.hvalue_data, self.hvalue_valid, hvalue
                    )
            _append_i32(self.header_offsets, len(self.hvalue_valid))


def _out_of_range() -> ProtocolError:
    return ProtocolError("record offset, timestamp or column size out of range")


def _append_i32(arr: array[int], n: int) -> None:
    try:
        arr.append(n)
    except OverflowError:
        raise _out_of_range() from None


def _add_binary(
    offsets: array[int], data: array[int], valid: array[int] | None, blob: bytes | None
) -> int:
    """Append one entry; 1 when it is null."""
    if blob is None:
        assert valid is not None
        valid.append(0)
    else:
        data.frombytes(blob)
        if valid is not None:
            valid.append(1)
    _append_i32(offsets, len(data))
    return 1 if blob is None else 0
