"""The fields of an offset or time index that an append touches, pure-Python reference;
``_index.pyx`` compiles the same.

Theory of operation. :class:`IndexCore` is the base of ``index._MmapIndex`` and holds the state
one index append reads and writes: the base offset, the entry count, the file's map, the last
entry and the relative offsets kept for lookups. Here it is only those slots: the index's own
``append`` / ``maybe_append`` (``index.py``) are the reference for the compiled module's, which
the log's compiled append (``_append.pyx``) calls with C integers and which fall back to those
Python methods for anything but a plain append into room already mapped.
"""

from __future__ import annotations

import mmap
from array import array

IMPLEMENTATION = "python"


class IndexCore:
    """The fields of an index the append path reads and writes (set by ``_MmapIndex``)."""

    __slots__ = ("base_offset", "max_index_size", "_entries", "_map", "_last", "_keys")

    base_offset: int
    max_index_size: int
    _entries: int
    _map: mmap.mmap | None
    _last: tuple[int, int] | None
    _keys: array[int] | None
