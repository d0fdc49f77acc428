"""A segment's sparse indexes in Kafka's byte layout: the offset index and the time index.

Theory of operation. The offset index (``.index``) and time index (``.timeindex``) are sparse:
the segment adds one entry per ``index.interval.bytes`` of log. Both are memory-mapped and
preallocated as Kafka does: an active segment's index file is extended to
``segment.index.bytes`` (rounded down to whole entries) when it is opened for writing, entries
are written straight into the map, and the file is trimmed to its real entries when the segment
rolls or the log closes. So a file's length is its entry count times the entry size for every
inactive segment, and a crash can only leave the *active* segment's index untrimmed (a zero
tail), which recovery rebuilds anyway. Preallocation keeps appends to a store into the map (no
system call), and lookups are binary searches over the map with no copying.

Trimming (:meth:`_MmapIndex.seal`) unmaps the file, truncates it and writes the roll's final
time-index entry with ``pwrite``: through the map, that one entry could fault in a fresh page of
the sparse preallocated file and the shrink would remap it, which costs milliseconds per
segment when a broker closes a thousand logs. A sealed index maps again on its next lookup.

Entries (big-endian, relative offsets are ``offset - base_offset``):
    offset index  8 bytes: relative_offset int32, position int32
                  The offset is the *last* offset of the batch starting at ``position``.
    time index   12 bytes: timestamp int64, relative_offset int32
                  The segment's max timestamp so far and the offset where it was reached;
                  appended only when the timestamp grows. One slot is kept free for the
                  entry written when the segment rolls (its final max timestamp).

The transaction index (``.txnindex``), a plain file of aborted transactions, is
:mod:`gregor.storage.transaction_index`.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from array import array
from bisect import bisect_right
from typing import TYPE_CHECKING

from gregor.protocol.extensions import load
from gregor.storage import _index_py

_core = load("gregor.storage._index", _index_py)  # compiled when built (``_index.pyx``)
if TYPE_CHECKING:
    from gregor.storage._index_py import IndexCore
else:
    IndexCore = _core.IndexCore


def core_implementation() -> str:
    """``"cython"`` or ``"python"``: which :class:`IndexCore` the indexes derive from."""
    name: str = _core.IMPLEMENTATION
    return name


OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
NO_TIMESTAMP = -1
_LITTLE_ENDIAN = sys.byteorder == "little"

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _map_file(fd: int, length: int) -> mmap.mmap:
    """Map ``length`` bytes of the index file. Without read-ahead: lookups are binary searches
    and appends touch one page at a time, so read-ahead would only fill (and, for the sparse
    preallocated tail of an active index, zero) pages no one reads."""
    mm = mmap.mmap(fd, length)
    mm.madvise(mmap.MADV_RANDOM)
    return mm


class CorruptIndexError(Exception):
    """An index file fails its sanity check; the segment rebuilds it."""


class _MmapIndex(IndexCore):
    """A fixed-entry-size index file mapped into memory, Kafka's AbstractIndex. The fields an
    append touches are :class:`IndexCore`'s (``storage._index_py``)."""

    ENTRY_SIZE = 0

    __slots__ = ("path", "_mapped", "_writable")

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        """Open (or create) the index. The file is mapped lazily, on first use, so a broker
        with many segments holds maps (and the file descriptors they keep) only for the
        indexes it touches, as Kafka's LazyIndex does."""
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max(
            max_index_size // self.ENTRY_SIZE * self.ENTRY_SIZE, self.ENTRY_SIZE
        )
        self._map: mmap.mmap | None = None
        self._mapped = False
        self._writable = False
        self._keys: array[int] | None = None  # the offset index's relative offsets, for bisect
        self._last: tuple[int, int] | None = None  # the last entry, once read or written
        try:
            length = os.stat(path).st_size
        except FileNotFoundError:
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
            length = 0
        self._entries = length // self.ENTRY_SIZE

    @property
    def _mm(self) -> mmap.mmap | None:
        if not self._mapped:
            self._mapped = True
            length = os.stat(self.path).st_size
            if length:
                fd = os.open(self.path, os.O_RDWR)
                try:
                    self._map = _map_file(fd, length)  # the map keeps its own descriptor
                finally:
                    os.close(fd)
        return self._map

    # --- size management ---

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def writable(self) -> bool:
        """Whether the file is preallocated for appends (the active segment's)."""
        return self._writable

    @property
    def max_entries(self) -> int:
        return self.max_index_size // self.ENTRY_SIZE

    @property
    def file_size(self) -> int:
        mm = self._map
        return len(mm) if mm is not None else os.stat(self.path).st_size

    @property
    def size_in_bytes(self) -> int:
        """Bytes of real entries."""
        return self._entries * self.ENTRY_SIZE

    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    def _resize(self, new_size: int) -> None:
        new_size = new_size // self.ENTRY_SIZE * self.ENTRY_SIZE
        mm = self._mm
        if mm is not None and len(mm) == new_size:
            return
        if new_size == 0:
            if mm is not None:
                mm.close()
                self._map = None
            os.truncate(self.path, 0)
            return
        if mm is None:
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.ftruncate(fd, new_size)
                self._map = _map_file(fd, new_size)
            finally:
                os.close(fd)
        else:
            mm.resize(new_size)

    def make_writable(self) -> None:
        """Preallocate to the maximum size (the segment became the active one)."""
        self._writable = True
        self._resize(max(self.max_index_size, self.size_in_bytes))

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its entries (the segment rolled or the log is closing)."""
        self.seal()

    def seal(self, final: bytes = b"") -> None:
        """The segment is no longer active: unmap the file, cut it to its entries and append
        ``final`` (one encoded entry, or nothing) with a plain write. The map comes back on
        the next lookup."""
        mm = self._map
        if mm is not None:
            length = len(mm)
            mm.close()
            self._map = None
        elif self._writable:
            length = os.stat(self.path).st_size
        else:
            length = self.size_in_bytes  # trimmed when it was sealed or loaded
        self._mapped = False
        self._writable = False
        size = self.size_in_bytes
        if length == size and not final:
            return
        fd = os.open(self.path, os.O_WRONLY)
        try:
            if length != size:
                os.ftruncate(fd, size)
            if final:
                if os.pwrite(fd, final, size) != len(final):
                    raise OSError(f"short write to {self.path}")
                self._entries += 1
        finally:
            os.close(fd)

    def _ensure_room(self) -> mmap.mmap:
        mm = self._mm
        need = (self._entries + 1) * self.ENTRY_SIZE
        if mm is None or len(mm) < need:
            self._resize(max(self.max_index_size, need))
            mm = self._mm
        assert mm is not None
        return mm

    def truncate_entries(self, n: int) -> None:
        """Keep the first ``n`` entries (the rest is zeroed, so a crash cannot revive them)."""
        if n >= self._entries:
            return
        mm = self._mm
        if mm is not None:
            start = n * self.ENTRY_SIZE
            end = self._entries * self.ENTRY_SIZE
            mm[start:end] = bytes(end - start)
        self._entries = n
        self._keys = None
        self._last = None
        if not self._writable:
            self._resize(n * self.ENTRY_SIZE)

    def reset(self) -> None:
        self.truncate_entries(0)

    def flush(self) -> None:
        if self._map is not None:
            self._map.flush()
        else:  # written through a map since released, or never mapped: fsync the file
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        self._mapped = True  # closed: nothing to map any more

    def release(self) -> None:
        """Unmap a trimmed (inactive) index until it is used again."""
        if not self._writable and self._map is not None:
            self._map.close()
            self._map = None
            self._mapped = False
            self._keys = None

    def rename(self, new_path: str) -> None:
        os.replace(self.path, new_path)
        self.path = new_path

    def sanity_check(self) -> None:
        if self.file_size % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self.path}: length {self.file_size} is not a multiple of {self.ENTRY_SIZE}"
            )


class OffsetIndex(_MmapIndex):
    ENTRY_SIZE = OFFSET_ENTRY_SIZE
    __slots__ = ()

    def entry(self, n: int) -> tuple[int, int]:
        """(offset, position) of entry ``n``."""
        assert self._mm is not None
        rel, pos = _OFFSET_ENTRY.unpack_from(self._mm, n * OFFSET_ENTRY_SIZE)
        return self.base_offset + rel, pos

    @property
    def last_offset(self) -> int:
        """The offset of the last entry (the base offset when empty)."""
        if not self._entries:
            return self.base_offset
        last = self._last
        if last is None:
            last = self._last = self.entry(self._entries - 1)
        return last[0]

    def append(self, offset: int, position: int) -> None:
        n = self._entries
        if n:
            last = self._last
            if last is None:
                last = self._last = self.entry(n - 1)
            if offset <= last[0]:
                raise ValueError(f"offset {offset} is not above the last indexed offset {last[0]}")
        mm = self._map
        if mm is None or len(mm) < (n + 1) * OFFSET_ENTRY_SIZE:
            mm = self._ensure_room()
        rel = offset - self.base_offset
        _OFFSET_ENTRY.pack_into(mm, n * OFFSET_ENTRY_SIZE, rel, position)
        self._entries = n + 1
        self._last = (offset, position)
        if self._keys is not None:
            self._keys.append(rel)

    def _relative_offsets(self) -> array[int]:
        """The entries' relative offsets as an in-memory int32 array (built once, then kept
        up to date by appends): binary search with ``bisect`` instead of Python probes."""
        keys = self._keys
        if keys is None:
            keys = array("i")
            if self._entries and self._mm is not None:
                pairs = array("i")
                pairs.frombytes(self._mm[: self._entries * OFFSET_ENTRY_SIZE])
                if _LITTLE_ENDIAN:
                    pairs.byteswap()
                keys = pairs[::2]
            self._keys = keys
        return keys

    def lookup(self, target: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= ``target``, or
        (base_offset, 0) if there is none."""
        n = self._entries
        mm = self._mm
        if not n or mm is None:
            return self.base_offset, 0
        rel = target - self.base_offset
        last_rel, last_pos = _OFFSET_ENTRY.unpack_from(mm, (n - 1) * OFFSET_ENTRY_SIZE)
        if last_rel <= rel:
            return self.base_offset + last_rel, last_pos
        i = bisect_right(self._relative_offsets(), rel) - 1
        if i < 0:
            return self.base_offset, 0
        r, p = _OFFSET_ENTRY.unpack_from(mm, i * OFFSET_ENTRY_SIZE)
        return self.base_offset + r, p

    def lookup_by_position(self, position: int) -> int | None:
        """The offset of the first entry at or after ``position`` (None if none): an upper
        bound for the offsets of a region ending there."""
        n = self._entries
        mm = self._mm
        if not n or mm is None:
            return None
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            if _I32.unpack_from(mm, mid * OFFSET_ENTRY_SIZE + 4)[0] < position:
                lo = mid + 1
            else:
                hi = mid
        return None if lo == n else self.entry(lo)[0]

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        n = self._entries
        mm = self._mm
        if not n or mm is None:
            return
        rel = offset - self.base_offset
        lo, hi = 0, n  # first entry with rel_offset >= rel
        while lo < hi:
            mid = (lo + hi) >> 1
            if _I32.unpack_from(mm, mid * OFFSET_ENTRY_SIZE)[0] < rel:
                lo = mid + 1
            else:
                hi = mid
        self.truncate_entries(lo)

    def sanity_check(self) -> None:
        super().sanity_check()
        n = self._entries
        if n and self.last_offset < self.base_offset:
            raise CorruptIndexError(f"{self.path}: last offset is below the base offset")
        if n > 1:
            first_off, first_pos = self.entry(0)
            last_off, last_pos = self.entry(n - 1)
            if last_off <= first_off or last_pos <= first_pos:
                raise CorruptIndexError(f"{self.path}: entries are not increasing")


class TimeIndex(_MmapIndex):
    ENTRY_SIZE = TIME_ENTRY_SIZE
    __slots__ = ()

    def entry(self, n: int) -> tuple[int, int]:
        """(timestamp, offset) of entry ``n``."""
        assert self._mm is not None
        ts, rel = _TIME_ENTRY.unpack_from(self._mm, n * TIME_ENTRY_SIZE)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        """The last (timestamp, offset), or (NO_TIMESTAMP, base_offset) when empty."""
        if not self._entries:
            return NO_TIMESTAMP, self.base_offset
        last = self._last
        if last is None:
            last = self._last = self.entry(self._entries - 1)
        return last

    def is_full(self) -> bool:
        # One slot stays free for the entry a roll appends.
        return self._entries >= self.max_entries - 1

    def _accepts(self, timestamp: int, offset: int) -> bool:
        """Whether an entry (timestamp, offset) would be appended: its timestamp grows."""
        n = self._entries
        if n:
            last = self._last
            if last is None:
                last = self._last = self.entry(n - 1)
            if timestamp <= last[0]:
                return False
            if offset < last[1]:
                raise ValueError(f"time index offset {offset} is below {last[1]}")
        return True

    def seal_with(self, timestamp: int, offset: int) -> None:
        """:meth:`seal`, appending the segment's final (max timestamp, offset) entry if it
        is above the last one (Kafka's roll-time ``maybeAppend``)."""
        if timestamp < 0 or not self._accepts(timestamp, offset):
            self.seal()
            return
        self.seal(_TIME_ENTRY.pack(timestamp, offset - self.base_offset))
        self._last = (timestamp, offset)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append if ``timestamp`` is above the last entry's (:meth:`_accepts`, inline: this
        runs on the append path)."""
        n = self._entries
        if n:
            last = self._last
            if last is None:
                last = self._last = self.entry(n - 1)
            if timestamp <= last[0]:
                return
            if offset < last[1]:
                raise ValueError(f"time index offset {offset} is below {last[1]}")
        mm = self._map
        if mm is None or len(mm) < (n + 1) * TIME_ENTRY_SIZE:
            mm = self._ensure_room()
        _TIME_ENTRY.pack_into(mm, n * TIME_ENTRY_SIZE, timestamp, offset - self.base_offset)
        self._entries = n + 1
        self._last = (timestamp, offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target, or
        (NO_TIMESTAMP, base_offset) when there is none."""
        n = self._entries
        mm = self._mm
        if not n or mm is None:
            return NO_TIMESTAMP, self.base_offset
        unpack = _I64.unpack_from
        if unpack(mm, 0)[0] > target_timestamp:
            return NO_TIMESTAMP, self.base_offset
        lo, hi = 0, n  # entry lo <= target < entry hi
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            if unpack(mm, mid * TIME_ENTRY_SIZE)[0] <= target_timestamp:
                lo = mid
            else:
                hi = mid
        return self.entry(lo)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        n = self._entries
        mm = self._mm
        if not n or mm is None:
            return
        rel = offset - self.base_offset
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) >> 1
            if _I32.unpack_from(mm, mid * TIME_ENTRY_SIZE + 8)[0] < rel:
                lo = mid + 1
            else:
                hi = mid
        self.truncate_entries(lo)

    def sanity_check(self) -> None:
        super().sanity_check()
        n = self._entries
        if n:
            first_ts, _ = self.entry(0)
            last_ts, last_off = self.entry(n - 1)
            if last_ts < first_ts:
                raise CorruptIndexError(f"{self.path}: last timestamp is below the first")
            if last_off < self.base_offset:
                raise CorruptIndexError(f"{self.path}: last offset is below the base offset")
