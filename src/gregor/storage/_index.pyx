# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The fields of an offset or time index that an append touches, compiled; ``_index_py.py`` is
the reference (see its docstring).

Beyond the reference's slots (here C fields, declared in ``_index.pxd``; the last entry,
``_last``, is two integers and a flag, seen from Python as the reference's tuple or None), this
module has the two appends the log's compiled append calls every ``index.interval.bytes``: the
offset index's ``append`` and the time index's ``maybe_append``, statement for statement as in
``index.py``, writing the big-endian entry straight into the map. Anything else (no map yet,
no room, the last entry not read yet, an entry out of order, a value beyond int32) is handed
to those Python methods, which map, grow, read or raise exactly as before.
"""

from cpython.buffer cimport PyBUF_WRITABLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy

IMPLEMENTATION = "cython"

cdef int64_t _INT32_MAX = 0x7FFFFFFF
cdef int64_t _INT32_MIN = -0x80000000


cdef inline void _put_u32(uint8_t* p, uint32_t u) noexcept nogil:
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u


cdef int _store(object mm, Py_ssize_t position, const uint8_t* entry, Py_ssize_t size) except -1:
    """Copy ``size`` bytes into the map at ``position``: 1, or 0 when the map is too short."""
    cdef Py_buffer view
    PyObject_GetBuffer(mm, &view, PyBUF_WRITABLE)
    try:
        if view.len < position + size:
            return 0
        memcpy(<uint8_t*>view.buf + position, entry, size)
        return 1
    finally:
        PyBuffer_Release(&view)


cdef class IndexCore:
    """The fields of an index the append path reads and writes (set by ``_MmapIndex``)."""

    @property
    def _last(self):
        """The last entry, (offset, position) or (timestamp, offset), once read or written."""
        if self._has_last:
            return (self._last_key, self._last_value)
        return None

    @_last.setter
    def _last(self, entry):
        if entry is None:
            self._has_last = False
        else:
            self._last_key, self._last_value = entry
            self._has_last = True

    cdef int offset_append(self, int64_t offset, int64_t position) except -1:
        """``OffsetIndex.append(offset, position)``."""
        cdef int64_t n = self._entries
        cdef int64_t rel = offset - self.base_offset
        cdef uint8_t entry[8]
        if (
            self._map is None
            or (n and (not self._has_last or offset <= self._last_key))
            or rel > _INT32_MAX or rel < _INT32_MIN
            or position > _INT32_MAX or position < _INT32_MIN
        ):
            self.append(offset, position)
            return 0
        _put_u32(entry, <uint32_t>rel)
        _put_u32(entry + 4, <uint32_t>position)
        if not _store(self._map, n * 8, entry, 8):
            self.append(offset, position)
            return 0
        self._entries = n + 1
        self._last_key = offset
        self._last_value = position
        self._has_last = True
        if self._keys is not None:
            self._keys.append(rel)
        return 1

    cdef int time_maybe_append(self, int64_t timestamp, int64_t offset) except -1:
        """``TimeIndex.maybe_append(timestamp, offset)``."""
        cdef int64_t n = self._entries
        cdef int64_t rel = offset - self.base_offset
        cdef uint8_t entry[12]
        cdef uint64_t ts = <uint64_t>timestamp
        cdef int i
        if n and self._has_last and timestamp <= self._last_key:
            return 0
        if (
            self._map is None
            or (n and (not self._has_last or offset < self._last_value))
            or rel > _INT32_MAX or rel < _INT32_MIN
        ):
            self.maybe_append(timestamp, offset)
            return 0
        for i in range(8):
            entry[i] = <uint8_t>(ts >> (56 - 8 * i))
        _put_u32(entry + 8, <uint32_t>rel)
        if not _store(self._map, n * 12, entry, 12):
            self.maybe_append(timestamp, offset)
            return 0
        self._entries = n + 1
        self._last_key = timestamp
        self._last_value = offset
        self._has_last = True
        return 1
