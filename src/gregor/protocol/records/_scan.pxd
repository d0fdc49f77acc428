# The record walk's C interface for other compiled modules (``storage._append``, the log's
# produce fast path, checks each batch's records with it). See ``_scan.pyx``.

from libc.stdint cimport int64_t


cdef struct RecordFacts:
    int64_t min_timestamp   # the smallest record timestamp other than -1, else -1
    int64_t max_timestamp   # the largest record timestamp (at least -1)
    Py_ssize_t keyless      # records without a key
    Py_ssize_t bad_delta    # the first record whose offset delta is not its index, else -1


cdef int check_records_c(const unsigned char* p, Py_ssize_t end, Py_ssize_t count,
                         int64_t base_timestamp, RecordFacts* out) except -1
