# The C layout of IndexCore (``_index.pyx``), cimported by the log's append (``_append.pyx``).
from libc.stdint cimport int64_t


cdef class IndexCore:
    cdef public int64_t base_offset
    cdef public int64_t max_index_size
    cdef public int64_t _entries
    cdef public object _map
    cdef bint _has_last  # _last, (_last_key, _last_value), is set
    cdef int64_t _last_key
    cdef int64_t _last_value
    cdef public object _keys

    cdef int offset_append(self, int64_t offset, int64_t position) except -1
    cdef int time_maybe_append(self, int64_t timestamp, int64_t offset) except -1
