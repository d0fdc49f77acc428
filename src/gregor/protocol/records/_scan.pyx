# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The per-record walk of RecordBatch v2, compiled: the accelerator of ``_scan_py``.

Same functions, same signatures, same results and the same ProtocolError messages as the
pure-Python reference ``_scan_py`` (read that module for the record layout and the order of
the checks); ``scan`` chooses between the two and ``GREGOR_NO_EXTENSIONS=1`` forces Python.

One parser, :func:`parse_record`, reads a record into a :c:type:`Fields` struct (positions
and lengths, no objects); the sinks below loop over it and write their own output: Record
tuples, consumer record tuples, Arrow column buffers (straight into the arrays' memory), or
nothing. Integers that could overflow int64 on crafted input (base + delta) fall back to
Python arithmetic, as the reference computes them.

At the end, the leader's Avro payload walk (``AvroValidator``, ``check_payloads``): schema
validation's ``decode`` level checks each record's Avro payload in place, on the bytes where
the record walk finds them.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_FromStringAndSize,
    PyByteArray_GET_SIZE,
    PyByteArray_Resize,
)
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.list cimport PyList_Append
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from cpython cimport array
from libc.stdint cimport int32_t, int64_t, uint64_t, INT32_MAX, INT64_MIN
from libc.string cimport memcpy

from gregor._tuples cimport fast_tuple, gregor_alloc_tuple, set_item

from gregor.protocol.exceptions import ProtocolError

IMPLEMENTATION = "cython"


def new_buffer(Py_ssize_t size):
    """See the reference: a bytearray of ``size`` bytes, not zeroed (the socket fills it)."""
    return PyByteArray_FromStringAndSize(NULL, size)

cdef extern from *:
    bint __builtin_add_overflow(int64_t a, int64_t b, int64_t* r) nogil
    bint __builtin_mul_overflow(int64_t a, int64_t b, int64_t* r) nogil

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(object o)

cdef extern from "_check_common.h":
    # the common batch's walk for check_records_c, in C (see the header); 0: walk it here
    bint gregor_check_common(const unsigned char* p, Py_ssize_t end, Py_ssize_t count,
                             int64_t base_ts, int64_t* min_ts, int64_t* max_ts,
                             Py_ssize_t* keyless, Py_ssize_t* bad_delta) noexcept nogil

cdef tuple _NO_HEADERS = ()


cdef struct Fields:
    int64_t offset_delta
    int64_t timestamp_delta
    Py_ssize_t key_pos
    Py_ssize_t key_len      # -1: null
    Py_ssize_t value_pos
    Py_ssize_t value_len    # -1: null
    Py_ssize_t headers_pos  # position of the header count varint
    Py_ssize_t header_count


#: Kafka's texts (see the reference)
cdef str PREMATURE_EOF = "Incorrect declared batch size, premature EOF reached"
cdef str RECORDS_REMAINING = "Incorrect declared batch size, records still remaining in file"
cdef str INVALID_STRUCTURE = "Found invalid record structure"


cdef inline int _truncated() except -1:
    raise ProtocolError(INVALID_STRUCTURE)


cdef int read_uvarint_long(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos,
                           uint64_t* out) except -1:
    """``varint.read_uvarint``: running off ``end`` is truncation."""
    cdef Py_ssize_t i = pos[0]
    cdef uint64_t u = 0
    cdef uint64_t b
    cdef int shift = 0
    while True:
        if i >= end:
            _truncated()
        b = p[i]
        i += 1
        if shift == 63:
            if b >= 0x80:
                raise ProtocolError("varint longer than 10 bytes")
            if b > 1:
                raise ProtocolError("varint does not fit 64 bits")
            u |= b << 63
            break
        u |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    pos[0] = i
    out[0] = u
    return 0


cdef inline int read_uvarint(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos,
                             uint64_t* out) except -1:
    """A varint of one or two bytes inline (every length field of a record under 8 KiB), any
    other through ``read_uvarint_long``."""
    cdef Py_ssize_t i = pos[0]
    cdef uint64_t b
    if i + 2 <= end:
        b = p[i]
        if b < 0x80:
            out[0] = b
            pos[0] = i + 1
            return 0
        if p[i + 1] < 0x80:
            out[0] = (b & 0x7F) | (<uint64_t>p[i + 1] << 7)
            pos[0] = i + 2
            return 0
    return read_uvarint_long(p, end, pos, out)


cdef inline int64_t unzigzag(uint64_t u) noexcept:
    return <int64_t>(u >> 1) ^ -<int64_t>(u & 1)


cdef int _bad_record(str message) except -1:
    raise ProtocolError(message)


cdef int _negative_length(str what) except -1:
    raise ProtocolError(f"negative record {what} length")


cdef inline int read_blob(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos,
                          Py_ssize_t* start, Py_ssize_t* length, str what) except -1:
    cdef uint64_t n
    read_uvarint(p, end, pos, &n)
    if n & 1:
        if n != 1:
            _negative_length(what)
        start[0] = pos[0]
        length[0] = -1
        return 0
    n >>= 1
    if n > <uint64_t>(end - pos[0]):
        _truncated()
    start[0] = pos[0]
    length[0] = <Py_ssize_t>n
    pos[0] += <Py_ssize_t>n
    return 0


cdef int parse_headers(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos,
                       Py_ssize_t rec_end, Py_ssize_t* count_out, list out) except -1:
    """Validate the headers at ``pos``; append (key, value) tuples to ``out`` unless None."""
    cdef uint64_t n
    cdef int64_t count, klen, vlen
    cdef Py_ssize_t i
    cdef object hkey, hvalue
    read_uvarint(p, end, pos, &n)
    count = unzigzag(n)
    if count < 0:
        raise ProtocolError(f"Found invalid number of record headers {count}")
    if count > rec_end - pos[0]:
        raise ProtocolError(
            f"Found invalid number of record headers. {count} is larger than the remaining size "
            "of the buffer"
        )
    for i in range(count):
        read_uvarint(p, end, pos, &n)
        klen = unzigzag(n)
        if klen < 0:
            raise ProtocolError(f"Invalid negative header key size {klen}")
        if klen > rec_end - pos[0]:
            _truncated()
        try:
            hkey = PyUnicode_DecodeUTF8(<const char*>p + pos[0], klen, NULL)
        except UnicodeDecodeError:
            raise ProtocolError("record header key is not UTF-8") from None
        pos[0] += klen
        read_uvarint(p, end, pos, &n)
        vlen = unzigzag(n)
        if vlen == -1:
            hvalue = None
        elif vlen < 0 or vlen > rec_end - pos[0]:
            raise ProtocolError("invalid record header value length")
        else:
            if out is not None:
                hvalue = PyBytes_FromStringAndSize(<const char*>p + pos[0], vlen)
            pos[0] += vlen
        if out is not None:
            out.append((hkey, hvalue))
    count_out[0] = count
    return 0


cdef inline int parse_record(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos, Fields* f,
                             list headers) except -1:
    """One record at ``pos`` into ``f``; ``pos`` moves past it. The reference's ``walk``."""
    cdef uint64_t n
    cdef int64_t length
    cdef Py_ssize_t rec_end
    if pos[0] >= end:
        _bad_record(PREMATURE_EOF)
    read_uvarint(p, end, pos, &n)
    length = unzigzag(n)
    if length > end - pos[0]:
        raise ProtocolError(
            f"Invalid record size: expected {length} bytes in record payload, but instead the "
            f"buffer has only {end - pos[0]} remaining bytes."
        )
    if length < 6:
        raise ProtocolError(f"Invalid record size {length}: a record takes at least 6 bytes")
    rec_end = pos[0] + <Py_ssize_t>length
    pos[0] += 1  # attributes
    read_uvarint(p, end, pos, &n)
    f.timestamp_delta = unzigzag(n)
    read_uvarint(p, end, pos, &n)
    f.offset_delta = unzigzag(n)
    read_blob(p, end, pos, &f.key_pos, &f.key_len, "key")
    read_blob(p, end, pos, &f.value_pos, &f.value_len, "value")
    if pos[0] >= end:
        _truncated()
    f.headers_pos = pos[0]
    if p[pos[0]] == 0:
        f.header_count = 0
        pos[0] += 1
    else:
        parse_headers(p, end, pos, rec_end, &f.header_count, headers)
    if pos[0] != rec_end:
        raise ProtocolError(
            f"Invalid record size: expected to read {length} bytes in record payload, but "
            f"instead read {pos[0] - rec_end + length}"
        )
    return 0


cdef inline bint short_uvarint(const unsigned char* p, Py_ssize_t limit, Py_ssize_t* i,
                               uint64_t* out) noexcept:
    """A varint of at most three bytes that ends before ``limit``; false (``i`` unmoved) for
    anything else."""
    cdef Py_ssize_t k = i[0]
    cdef uint64_t b0, b1, b2
    if k >= limit:
        return 0
    b0 = p[k]
    if b0 < 0x80:
        out[0] = b0
        i[0] = k + 1
        return 1
    if k + 1 >= limit:
        return 0
    b1 = p[k + 1]
    if b1 < 0x80:
        out[0] = (b0 & 0x7F) | (b1 << 7)
        i[0] = k + 2
        return 1
    if k + 2 >= limit:
        return 0
    b2 = p[k + 2]
    if b2 < 0x80:
        out[0] = (b0 & 0x7F) | ((b1 & 0x7F) << 7) | (b2 << 14)
        i[0] = k + 3
        return 1
    return 0


cdef inline bint short_blob(const unsigned char* p, Py_ssize_t limit, Py_ssize_t* i,
                            Py_ssize_t* start, Py_ssize_t* length) noexcept:
    cdef uint64_t n
    if not short_uvarint(p, limit, i, &n):
        return 0
    if n & 1:
        if n != 1:  # a negative length other than -1 (null)
            return 0
        start[0] = i[0]
        length[0] = -1
        return 1
    n >>= 1
    if n > <uint64_t>(limit - i[0]):
        return 0
    start[0] = i[0]
    length[0] = <Py_ssize_t>n
    i[0] += <Py_ssize_t>n
    return 1


cdef inline bint common_record(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos,
                               Fields* f) noexcept:
    """The common record (no headers, every varint at most three bytes) read into ``f`` with
    the checks of ``parse_record`` folded into one bound, ``pos`` moved past it; false (and
    nothing moved) for any other record, valid or not, which ``parse_record`` then reads and
    judges. A record read here is one that ``parse_record`` reads the same and accepts."""
    cdef Py_ssize_t i = pos[0]
    cdef Py_ssize_t rec_end
    cdef uint64_t n
    if not short_uvarint(p, end, &i, &n) or n & 1:
        return 0
    n >>= 1
    if n < 6 or n > <uint64_t>(end - i):
        return 0
    rec_end = i + <Py_ssize_t>n
    i += 1  # attributes
    if not short_uvarint(p, rec_end, &i, &n):
        return 0
    f.timestamp_delta = unzigzag(n)
    if not short_uvarint(p, rec_end, &i, &n):
        return 0
    f.offset_delta = unzigzag(n)
    if not short_blob(p, rec_end, &i, &f.key_pos, &f.key_len):
        return 0
    if not short_blob(p, rec_end, &i, &f.value_pos, &f.value_len):
        return 0
    if i + 1 != rec_end or p[i] != 0:  # no headers, and nothing after them
        return 0
    f.headers_pos = i
    f.header_count = 0
    pos[0] = rec_end
    return 1


cdef inline int next_record(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos, Fields* f,
                            list headers) except -1:
    if common_record(p, end, pos, f):
        return 0
    return parse_record(p, end, pos, f, headers)


cdef inline object add_i64(int64_t a, int64_t b):
    cdef int64_t r
    if __builtin_add_overflow(a, b, &r):
        return <object>a + <object>b
    return r


cdef inline object blob(const unsigned char* p, Py_ssize_t start, Py_ssize_t length):
    if length < 0:
        return None
    return PyBytes_FromStringAndSize(<const char*>p + start, length)


cdef class _View:
    """A held buffer of the caller's data (bytes, bytearray or memoryview)."""
    cdef Py_buffer view
    cdef const unsigned char* p
    cdef Py_ssize_t end

    def __cinit__(self, object data):
        PyObject_GetBuffer(data, &self.view, PyBUF_SIMPLE)
        self.p = <const unsigned char*>self.view.buf
        self.end = self.view.len

    def __dealloc__(self):
        PyBuffer_Release(&self.view)


def decode_records(data, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
                   object log_append_time, object record_type):
    cdef _View v = _View(data)
    cdef Fields f
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t i
    cdef list out = []
    cdef list headers
    cdef bint fast = fast_tuple(record_type)
    cdef object offset, ts, key, value, rec
    for i in range(count):
        headers = []
        next_record(v.p, v.end, &pos, &f, headers)
        offset = add_i64(base_offset, f.offset_delta)
        if log_append_time is None:
            ts = add_i64(base_timestamp, f.timestamp_delta)
        else:
            ts = log_append_time
        key = blob(v.p, f.key_pos, f.key_len)
        value = blob(v.p, f.value_pos, f.value_len)
        if fast:
            rec = gregor_alloc_tuple(record_type, 5)
            set_item(rec, 0, offset)
            set_item(rec, 1, ts)
            set_item(rec, 2, key)
            set_item(rec, 3, value)
            set_item(rec, 4, headers)
        else:
            rec = tuple.__new__(record_type, (offset, ts, key, value, headers))
        PyList_Append(out, rec)
    if pos != v.end:
        raise ProtocolError(RECORDS_REMAINING)
    return out


def consumer_records(data, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
                     object log_append_time, object start, object topic, object partition,
                     object leader_epoch, object record_type, list out):
    cdef _View v = _View(data)
    cdef Fields f
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t i
    cdef list headers = []
    cdef bint fast = fast_tuple(record_type)
    cdef object ts_type = 0 if log_append_time is None else 1
    cdef object offset, ts, hs, key, value, rec
    cdef int64_t off
    cdef bint start_fits = -(1 << 63) <= start < (1 << 63)
    cdef int64_t start_i = start if start_fits else 0
    # the items that do not come from the record can hold no reference back to it either
    cdef bint untrack = all(type(x) in (str, int) for x in (topic, partition, leader_epoch))
    for i in range(count):
        next_record(v.p, v.end, &pos, &f, headers)
        if f.header_count:
            hs = tuple(headers)
            headers = []
        else:
            hs = _NO_HEADERS
        if __builtin_add_overflow(base_offset, f.offset_delta, &off):
            offset = <object>base_offset + <object>f.offset_delta
            if offset < start:
                continue
        else:
            if start_fits:
                if off < start_i:
                    continue
            elif off < start:
                continue
            offset = off
        if log_append_time is None:
            ts = add_i64(base_timestamp, f.timestamp_delta)
        else:
            ts = log_append_time
        key = blob(v.p, f.key_pos, f.key_len)
        value = blob(v.p, f.value_pos, f.value_len)
        if fast:
            rec = gregor_alloc_tuple(record_type, 9)
            set_item(rec, 0, topic)
            set_item(rec, 1, partition)
            set_item(rec, 2, offset)
            set_item(rec, 3, ts)
            set_item(rec, 4, ts_type)
            set_item(rec, 5, key)
            set_item(rec, 6, value)
            set_item(rec, 7, hs)
            set_item(rec, 8, leader_epoch)
            if hs is _NO_HEADERS and untrack:
                # nothing in it can refer back to it (str, int, bytes, None and the empty
                # tuple; no __dict__): out of the collector's sight, as CPython's own
                # collector leaves such tuples, so a poll of many records sets off no
                # collection that walks them all
                PyObject_GC_UnTrack(rec)
        else:
            rec = tuple.__new__(
                record_type,
                (topic, partition, offset, ts, ts_type, key, value, hs, leader_epoch),
            )
        PyList_Append(out, rec)
    if pos != v.end:
        raise ProtocolError(RECORDS_REMAINING)


def validate_records(data, Py_ssize_t count):
    cdef _View v = _View(data)
    cdef Fields f
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t i
    for i in range(count):
        next_record(v.p, v.end, &pos, &f, None)
    if pos != v.end:
        raise ProtocolError(RECORDS_REMAINING)


def schema_ids(data, Py_ssize_t count, bint value):
    """See the reference."""
    cdef _View v = _View(data)
    cdef Fields f
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t i, at, n
    cdef const unsigned char* q
    cdef list out = []
    for i in range(count):
        next_record(v.p, v.end, &pos, &f, None)
        if value:
            at, n = f.value_pos, f.value_len
        else:
            at, n = f.key_pos, f.key_len
        if n < 0:
            PyList_Append(out, -2)
        elif n < 5 or v.p[at] != 0:
            PyList_Append(out, -1)
        else:
            q = v.p + at
            PyList_Append(
                out,
                (<int64_t>q[1] << 24) | (<int64_t>q[2] << 16) | (<int64_t>q[3] << 8) | <int64_t>q[4],
            )
    if pos != v.end:
        raise ProtocolError(RECORDS_REMAINING)
    return out


cdef int check_records_c(const unsigned char* p, Py_ssize_t end, Py_ssize_t count,
                         int64_t base_timestamp, RecordFacts* out) except -1:
    """The reference's ``check_records`` into ``out``, for the log's compiled fast path
    (``storage._append`` cimports it): the same walk, errors and facts, no objects."""
    cdef Fields f
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t i
    cdef int64_t ts
    cdef int64_t lo = -1, hi = -1  # (in locals, not through ``out``: registers in the loop)
    cdef Py_ssize_t keyless = 0, bad_delta = -1
    cdef bint has_min = False
    if gregor_check_common(p, end, count, base_timestamp, &out.min_timestamp, &out.max_timestamp,
                           &out.keyless, &out.bad_delta):
        return 0
    for i in range(count):
        next_record(p, end, &pos, &f, None)
        if f.offset_delta != i and bad_delta < 0:
            bad_delta = i
        if f.key_len < 0:
            keyless += 1
        if __builtin_add_overflow(base_timestamp, f.timestamp_delta, &ts):
            raise ProtocolError(f"Timestamp of record {i} does not fit 64 bits")
        if ts > hi:
            hi = ts
        if ts != -1 and (not has_min or ts < lo):
            lo = ts
            has_min = True
    if pos != end:
        raise ProtocolError(RECORDS_REMAINING)
    out.min_timestamp = lo
    out.max_timestamp = hi
    out.keyless = keyless
    out.bad_delta = bad_delta
    return 0


def check_records(data, Py_ssize_t count, int64_t base_timestamp):
    """See the reference."""
    cdef _View v = _View(data)
    cdef RecordFacts facts
    check_records_c(v.p, v.end, count, base_timestamp, &facts)
    return (facts.min_timestamp, facts.max_timestamp, facts.keyless, facts.bad_delta)


# --- Arrow column buffers ---

cdef inline int _out_of_range() except -1:
    raise ProtocolError("record offset, timestamp or column size out of range")


cdef struct BinCol:
    int32_t* offsets    # offsets[n] is the end of entry n-1; offsets[0..n0] already set
    char* data
    char* valid         # NULL for a column without nulls (header keys)
    Py_ssize_t n        # entries written (absolute, in the whole column)
    Py_ssize_t size     # data bytes written
    Py_ssize_t nulls    # null entries written by this walk


cdef extern from *:
    # the fields of CPython's array object that room-making needs (Cython's own utility
    # code defines the struct; its array.pxd declares neither the allocation nor the exports)
    ctypedef struct ArrayDescr "struct arraydescr":
        int itemsize
    ctypedef struct ArrayObject "arrayobject":
        Py_ssize_t ob_size
        char* ob_item "data.ob_item"
        Py_ssize_t allocated
        ArrayDescr* ob_descr
        int ob_exports
    void* PyMem_Realloc(void* p, size_t n)
    const Py_ssize_t PY_SSIZE_T_MAX


cdef int array_capacity(array.array arr, Py_ssize_t n) except -1:
    """Room for ``n`` items in ``arr``, its length left alone: the allocation grows to ``n`` at
    least, by half again at least (appending batch after batch stays amortized O(1)), and
    never shrinks. An array whose buffer is exported cannot move."""
    cdef ArrayObject* a = <ArrayObject*><void*>arr
    cdef size_t itemsize = <size_t>a.ob_descr.itemsize
    cdef Py_ssize_t cap
    cdef char* items
    if n <= a.allocated:
        return 0
    if a.ob_exports > 0:
        raise BufferError("cannot resize an array that is exporting buffers")
    cap = max(n, a.allocated + a.allocated // 2)
    if <size_t>cap > <size_t>PY_SSIZE_T_MAX // itemsize:
        raise MemoryError()
    items = <char*>PyMem_Realloc(a.ob_item, <size_t>cap * itemsize)
    if items == NULL:
        raise MemoryError()
    a.ob_item = items
    a.allocated = cap
    return 0


cdef inline int array_set_len(array.array arr, Py_ssize_t n) except -1:
    """``arr``'s length becomes ``n``, with room made first when it grows (never given back).
    Like ``array`` itself, an array whose buffer is exported keeps its length."""
    cdef ArrayObject* a = <ArrayObject*><void*>arr
    if n != a.ob_size and a.ob_exports > 0:
        raise BufferError("cannot resize an array that is exporting buffers")
    array_capacity(arr, n)
    a.ob_size = n
    return 0


def clear_array(array.array arr):
    """Empty ``arr`` for reuse, its room kept (a recycled column, see ``spares``)."""
    array_set_len(arr, 0)


def reserve_columns(object columns, Py_ssize_t records, Py_ssize_t value_bytes):
    """Make room in ``columns`` for ``records`` more records with ``value_bytes`` more value
    bytes (a record set's count and size, read from its batch headers), so the walk over the
    set's batches writes into place instead of regrowing (and copying) the columns batch by
    batch. Only a hint: the walk makes any further room it needs; lengths do not change."""
    cdef array.array a
    if records < 0 or value_bytes < 0:
        raise ValueError("a reservation cannot be negative")
    for a in (columns.offsets, columns.timestamps, columns.timestamp_types, columns.key_offsets,
              columns.key_valid, columns.value_offsets, columns.value_valid):
        array_capacity(a, len(a) + records)
    a = columns.value_data
    array_capacity(a, len(a) + value_bytes)


cdef class _Column:
    """A binary column of ``ArrowColumns`` opened for direct writing.

    ``reserve`` makes room (``array_capacity``) and sets the arrays' lengths to it, and
    ``finish`` sets them to what was written without giving the room back, which keeps it for
    the next batch: appending batch after batch costs amortized O(1) per byte."""
    cdef array.array offsets
    cdef array.array data
    cdef array.array valid
    cdef BinCol c

    def __cinit__(self, array.array offsets, array.array data, array.array valid):
        self.offsets = offsets
        self.data = data
        self.valid = valid
        self.c.n = len(offsets) - 1
        self.c.size = len(data)
        self.c.nulls = 0
        self._pointers()

    cdef void _pointers(self):
        self.c.offsets = <int32_t*>self.offsets.data.as_ints
        self.c.data = self.data.data.as_chars
        self.c.valid = self.valid.data.as_chars if self.valid is not None else NULL

    cdef int reserve(self, Py_ssize_t entries, Py_ssize_t size) except -1:
        array_set_len(self.offsets, self.c.n + entries + 1)
        if self.valid is not None:
            array_set_len(self.valid, self.c.n + entries)
        array_set_len(self.data, self.c.size + size)
        self._pointers()
        return 0

    cdef int finish(self) except -1:
        array_set_len(self.offsets, self.c.n + 1)
        if self.valid is not None:
            array_set_len(self.valid, self.c.n)
        array_set_len(self.data, self.c.size)
        self._pointers()
        return 0


cdef inline int put(BinCol* col, const unsigned char* p, Py_ssize_t start,
                    Py_ssize_t length) except -1:
    """Entry ``n`` of a column: null when ``length`` < 0 (callers reserved the room)."""
    if length < 0:
        col.valid[col.n] = 0
        col.nulls += 1
    else:
        if col.valid != NULL:
            col.valid[col.n] = 1
        memcpy(col.data + col.size, p + start, length)
        col.size += length
    if col.size > INT32_MAX:
        _out_of_range()
    col.n += 1
    col.offsets[col.n] = <int32_t>col.size
    return 0


def arrow_records(data, Py_ssize_t count, int64_t base_offset, int64_t base_timestamp,
                  object log_append_time, object columns, bint include_headers):
    cdef _View v = _View(data)
    cdef Fields f
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t i, hpos, j
    cdef uint64_t n
    cdef int64_t klen, vlen, ts_fixed = 0, off, ts
    cdef int64_t scale = columns.timestamp_scale
    cdef bint log_append = log_append_time is not None
    cdef bint ts_fits
    cdef int32_t ts_type = 1 if log_append else 0
    cdef array.array offsets = columns.offsets
    cdef array.array timestamps = columns.timestamps
    cdef array.array ts_types = columns.timestamp_types
    cdef Py_ssize_t n0 = len(offsets)
    cdef Py_ssize_t nmax = min(count, v.end // 7 + 1) if count > 0 else 0
    cdef Py_ssize_t done = 0
    cdef _Column keys = _Column(columns.key_offsets, columns.key_data, columns.key_valid)
    cdef _Column values = _Column(columns.value_offsets, columns.value_data, columns.value_valid)
    cdef _Column hoffs = None
    cdef _Column hkeys = None
    cdef _Column hvalues = None
    cdef bint hreserved = False
    cdef int64_t* off_p
    cdef int64_t* ts_p
    cdef int32_t* tt_p
    ts_fits = not log_append or -(1 << 63) <= log_append_time < (1 << 63)
    if log_append and ts_fits:
        ts_fixed = log_append_time
    if include_headers:
        # header_offsets/header_valid form a column with no data bytes: the count goes in
        hoffs = _Column(columns.header_offsets, array.array("B"), columns.header_valid)
        hkeys = _Column(columns.hkey_offsets, columns.hkey_data, None)
        hvalues = _Column(columns.hvalue_offsets, columns.hvalue_data, columns.hvalue_valid)
    try:  # the lengths are set back to what was written whatever happens (a column lent out)
        array_set_len(offsets, n0 + nmax)
        array_set_len(timestamps, n0 + nmax)
        array_set_len(ts_types, n0 + nmax)
        off_p = <int64_t*>offsets.data.as_longlongs + n0
        ts_p = <int64_t*>timestamps.data.as_longlongs + n0
        tt_p = <int32_t*>ts_types.data.as_ints + n0
        keys.reserve(nmax, v.end)
        values.reserve(nmax, v.end)
        if include_headers:
            hoffs.reserve(nmax, 0)
        for i in range(count):
            next_record(v.p, v.end, &pos, &f, None)
            if __builtin_add_overflow(base_offset, f.offset_delta, &off):
                _out_of_range()
            if log_append:
                if not ts_fits:
                    _out_of_range()
                ts = ts_fixed
            elif __builtin_add_overflow(base_timestamp, f.timestamp_delta, &ts):
                _out_of_range()
            if scale != 1 and __builtin_mul_overflow(ts, scale, &ts):
                _out_of_range()
            off_p[done] = off
            ts_p[done] = ts
            tt_p[done] = ts_type
            done += 1
            put(&keys.c, v.p, f.key_pos, f.key_len)
            put(&values.c, v.p, f.value_pos, f.value_len)
            if include_headers:
                if f.header_count:
                    if not hreserved:
                        hkeys.reserve(v.end // 2, v.end)
                        hvalues.reserve(v.end // 2, v.end)
                        hreserved = True
                    hpos = f.headers_pos
                    read_uvarint(v.p, v.end, &hpos, &n)
                    for j in range(f.header_count):
                        read_uvarint(v.p, v.end, &hpos, &n)
                        klen = unzigzag(n)
                        put(&hkeys.c, v.p, hpos, klen)
                        hpos += klen
                        read_uvarint(v.p, v.end, &hpos, &n)
                        vlen = unzigzag(n)
                        put(&hvalues.c, v.p, hpos, vlen)
                        if vlen > 0:
                            hpos += vlen
                    hoffs.c.valid[hoffs.c.n] = 1
                else:
                    hoffs.c.valid[hoffs.c.n] = 0
                    hoffs.c.nulls += 1
                hoffs.c.n += 1
                hoffs.c.offsets[hoffs.c.n] = <int32_t>hvalues.c.n
        if pos != v.end:
            raise ProtocolError(RECORDS_REMAINING)
    finally:
        columns.key_nulls += keys.c.nulls
        columns.value_nulls += values.c.nulls
        if include_headers:
            columns.header_nulls += hoffs.c.nulls
            columns.hvalue_nulls += hvalues.c.nulls
        array_set_len(offsets, n0 + done)
        array_set_len(timestamps, n0 + done)
        array_set_len(ts_types, n0 + done)
        keys.finish()
        values.finish()
        if include_headers:
            hoffs.finish()
            hkeys.finish()
            hvalues.finish()


# --- building ---

cdef inline Py_ssize_t put_varint(unsigned char* out, int64_t n) noexcept:
    cdef uint64_t u = (<uint64_t>n << 1) ^ <uint64_t>(n >> 63)
    cdef Py_ssize_t i = 0
    while u >= 0x80:
        out[i] = <unsigned char>((u & 0x7F) | 0x80)
        u >>= 7
        i += 1
    out[i] = <unsigned char>u
    return i + 1


cdef inline int64_t to_varlong(object n) except? -1:
    try:
        return n
    except OverflowError:
        raise ValueError(f"{n} does not fit a varlong") from None


cdef bytes encode_headers(object headers):
    cdef bytearray out = bytearray()
    cdef unsigned char tmp[10]
    cdef Py_ssize_t k
    k = put_varint(tmp, len(headers))
    out += tmp[:k]
    for hkey, hvalue in headers:
        kb = hkey.encode() if isinstance(hkey, str) else bytes(hkey)
        k = put_varint(tmp, len(kb))
        out += tmp[:k]
        out += kb
        if hvalue is None:
            out += b"\x01"
        else:
            k = put_varint(tmp, len(hvalue))
            out += tmp[:k]
            out += bytes(hvalue)
    return bytes(out)


cpdef encode_record(bytearray buf, offset_delta, timestamp_delta, key, value, headers):
    cdef int64_t td = to_varlong(timestamp_delta)
    cdef int64_t od = to_varlong(offset_delta)
    cdef unsigned char pre[32]
    cdef unsigned char lenbuf[10]
    cdef Py_ssize_t npre = 1, nkl, nvl, body, nlen, at
    cdef Py_buffer kv, vv
    cdef bint has_k = key is not None, has_v = value is not None
    cdef Py_ssize_t klen = 0, vlen = 0
    cdef unsigned char klen_enc[10]
    cdef unsigned char vlen_enc[10]
    cdef bytes hdrs = encode_headers(headers) if headers else None
    cdef char* dst
    pre[0] = 0
    npre += put_varint(pre + npre, td)
    npre += put_varint(pre + npre, od)
    if has_k:
        PyObject_GetBuffer(key, &kv, PyBUF_SIMPLE)
        klen = kv.len
    try:
        if has_v:
            PyObject_GetBuffer(value, &vv, PyBUF_SIMPLE)
            vlen = vv.len
        try:
            nkl = put_varint(klen_enc, klen if has_k else -1)
            nvl = put_varint(vlen_enc, vlen if has_v else -1)
            body = npre + nkl + klen + nvl + vlen + (len(hdrs) if hdrs is not None else 1)
            nlen = put_varint(lenbuf, body)
            at = PyByteArray_GET_SIZE(buf)
            PyByteArray_Resize(buf, at + nlen + body)
            dst = PyByteArray_AS_STRING(buf) + at
            memcpy(dst, lenbuf, nlen)
            dst += nlen
            memcpy(dst, pre, npre)
            dst += npre
            memcpy(dst, klen_enc, nkl)
            dst += nkl
            if klen:
                memcpy(dst, kv.buf, klen)
                dst += klen
            memcpy(dst, vlen_enc, nvl)
            dst += nvl
            if vlen:
                memcpy(dst, vv.buf, vlen)
                dst += vlen
            if hdrs is not None:
                memcpy(dst, <const char*>hdrs, len(hdrs))
            else:
                dst[0] = 0
        finally:
            if has_v:
                PyBuffer_Release(&vv)
    finally:
        if has_k:
            PyBuffer_Release(&kv)


cdef class RecordAppender:
    """See the reference (``_scan_py.RecordAppender``): the same, with C counters."""

    cdef public bytearray buf
    cdef public int64_t count
    cdef public object base_timestamp
    cdef public object max_timestamp
    cdef public int64_t next_delta

    def __init__(self):
        self.buf = bytearray()
        self.count = 0
        self.base_timestamp = None
        self.max_timestamp = -1
        self.next_delta = 0

    def append(self, timestamp, key, value, headers=(), offset_delta=None):
        cdef int64_t od
        if offset_delta is None:
            od = self.next_delta
        else:
            if offset_delta < self.next_delta:
                raise ValueError(f"offset delta {offset_delta} does not increase")
            if offset_delta > 0x7FFFFFFF:
                raise ValueError("offset delta does not fit int32")
            od = offset_delta
        if od > 0x7FFFFFFF:
            raise ValueError("offset delta does not fit int32")
        base_ts = self.base_timestamp
        if base_ts is None:
            self.base_timestamp = base_ts = self.max_timestamp = timestamp
        elif timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        encode_record(self.buf, od, timestamp - base_ts, key, value, headers)
        self.count += 1
        self.next_delta = od + 1
        return od


# --- the leader's Avro payload walk (see the reference's AvroValidator) ---

cdef enum:
    AVRO_NULL = 0
    AVRO_BOOLEAN = 1
    AVRO_INT = 2
    AVRO_LONG = 3
    AVRO_FLOAT = 4
    AVRO_DOUBLE = 5
    AVRO_BYTES = 6
    AVRO_STRING = 7
    AVRO_FIXED = 8
    AVRO_ENUM = 9
    AVRO_UNION = 10
    AVRO_ARRAY = 11
    AVRO_MAP = 12
    AVRO_RECORD = 13
    AVRO_MAX_DEPTH_C = 200

AVRO_MAX_DEPTH = AVRO_MAX_DEPTH_C
_AVRO_EOF = "the payload ends too early"


class _AvroInvalid(Exception):
    pass


cdef inline Py_ssize_t avro_long(const unsigned char* p, Py_ssize_t end, Py_ssize_t pos,
                                 int64_t* out) except -1:
    cdef uint64_t n = 0
    cdef int shift = 0
    cdef Py_ssize_t i
    cdef unsigned char byte
    for i in range(pos, pos + 10):
        if i >= end:
            raise _AvroInvalid(_AVRO_EOF)
        byte = p[i]
        n |= (<uint64_t>(byte & 0x7F)) << shift
        if not byte & 0x80:
            out[0] = <int64_t>(n >> 1) ^ -<int64_t>(n & 1)
            return i + 1
        shift += 7
    raise _AvroInvalid("a long takes more than 10 bytes")


cdef class AvroValidator:
    """See the reference."""
    cdef array.array _kinds, _a, _b, _children
    cdef int64_t* kinds
    cdef int64_t* a
    cdef int64_t* b
    cdef int64_t* children
    cdef Py_ssize_t n_nodes, n_children

    def __init__(self, kinds, a, b, children):
        self._kinds = array.array("q", kinds)
        self._a = array.array("q", a)
        self._b = array.array("q", b)
        self._children = array.array("q", children)
        self.n_nodes = len(self._kinds)
        self.n_children = len(self._children)
        if not self.n_nodes or len(self._a) != self.n_nodes or len(self._b) != self.n_nodes:
            raise ValueError("an Avro program needs one kind and two arguments per node")
        for i in range(self.n_nodes):  # every index the walk follows is checked once here
            k = self._kinds[i]
            if not 0 <= k <= AVRO_RECORD:
                raise ValueError(f"node {i}: unknown kind {k}")
            if k in (AVRO_UNION, AVRO_RECORD):
                if self._a[i] < 0 or self._b[i] < 0 or self._a[i] + self._b[i] > self.n_children:
                    raise ValueError(f"node {i}: children out of range")
            if k in (AVRO_ARRAY, AVRO_MAP) and not 0 <= self._a[i] < self.n_nodes:
                raise ValueError(f"node {i}: item out of range")
            if k in (AVRO_FIXED, AVRO_ENUM) and self._a[i] < 0:
                raise ValueError(f"node {i}: negative size")
        for c in self._children:
            if not 0 <= c < self.n_nodes:
                raise ValueError("a child out of range")
        self.kinds = <int64_t*>self._kinds.data.as_voidptr
        self.a = <int64_t*>self._a.data.as_voidptr
        self.b = <int64_t*>self._b.data.as_voidptr
        self.children = <int64_t*>self._children.data.as_voidptr

    def check(self, bytes payload):
        """See the reference."""
        return self.check_at(<const unsigned char*>(<char*>payload), len(payload))

    def __call__(self, bytes payload):
        return self.check_at(<const unsigned char*>(<char*>payload), len(payload))

    cdef object check_at(self, const unsigned char* p, Py_ssize_t end):
        cdef Py_ssize_t pos
        if end < 5:
            return _AVRO_EOF
        try:
            pos = self._skip(p, end, 5, 0, 0)
        except _AvroInvalid as e:
            return str(e)
        if pos != end:
            return f"{end - pos} bytes left over after the datum"
        return None

    cdef Py_ssize_t _skip(self, const unsigned char* p, Py_ssize_t end, Py_ssize_t pos,
                          int64_t node, int depth) except -1:
        cdef int64_t kind, value, count, size, index, item, i, first, block
        cdef bint is_map
        if depth > AVRO_MAX_DEPTH_C:
            raise _AvroInvalid(f"the datum is nested more than {AVRO_MAX_DEPTH_C} levels deep")
        kind = self.kinds[node]
        if kind == AVRO_NULL:
            return pos
        if kind == AVRO_BOOLEAN:
            size = 1
        elif kind == AVRO_INT or kind == AVRO_LONG:
            pos = avro_long(p, end, pos, &value)
            if kind == AVRO_INT and not (-2147483648 <= value <= 2147483647):
                raise _AvroInvalid("an int out of 32 bits")
            return pos
        elif kind == AVRO_FLOAT:
            size = 4
        elif kind == AVRO_DOUBLE:
            size = 8
        elif kind == AVRO_FIXED:
            size = self.a[node]
        elif kind == AVRO_BYTES or kind == AVRO_STRING:
            pos = avro_long(p, end, pos, &size)
            if size < 0:
                raise _AvroInvalid("a negative length")
            if kind == AVRO_STRING and size <= end - pos:
                avro_utf8(p, pos, size)
        elif kind == AVRO_ENUM or kind == AVRO_UNION:
            pos = avro_long(p, end, pos, &index)
            count = self.a[node] if kind == AVRO_ENUM else self.b[node]
            if not (0 <= index < count):
                what = "an enum symbol" if kind == AVRO_ENUM else "a union branch"
                raise _AvroInvalid(f"{what} index {index} out of range")
            if kind == AVRO_ENUM:
                return pos
            return self._skip(p, end, pos, self.children[self.a[node] + index], depth + 1)
        elif kind == AVRO_ARRAY or kind == AVRO_MAP:
            is_map = kind == AVRO_MAP
            item = self.a[node]
            while True:
                pos = avro_long(p, end, pos, &count)
                if count == 0:
                    return pos
                if count < 0:
                    if count == INT64_MIN:
                        raise _AvroInvalid(_AVRO_EOF)
                    count = -count
                    pos = avro_long(p, end, pos, &block)  # the block's size in bytes
                if not is_map and self.b[node]:
                    continue  # items of no bytes: nothing to read
                if count > end - pos:  # every item takes a byte at least
                    raise _AvroInvalid(_AVRO_EOF)
                for i in range(count):
                    if is_map:
                        pos = avro_long(p, end, pos, &size)
                        if size < 0:
                            raise _AvroInvalid("a negative length")
                        if size > end - pos:
                            raise _AvroInvalid(_AVRO_EOF)
                        avro_utf8(p, pos, size)
                        pos += size
                    pos = self._skip(p, end, pos, item, depth + 1)
        else:
            first = self.a[node]
            for i in range(first, first + self.b[node]):
                pos = self._skip(p, end, pos, self.children[i], depth + 1)
            return pos
        if size > end - pos:
            raise _AvroInvalid(_AVRO_EOF)
        return pos + size



cdef inline int avro_utf8(const unsigned char* p, Py_ssize_t pos, Py_ssize_t size) except -1:
    cdef Py_ssize_t i = pos
    cdef Py_ssize_t stop = pos + size
    cdef uint64_t word
    cdef bint ascii = True
    while i + 8 <= stop:  # ASCII needs no decoder: eight bytes at a time
        memcpy(&word, p + i, 8)
        if word & 0x8080808080808080ULL:
            ascii = False
            break
        i += 8
    if ascii:
        while i < stop:
            if p[i] & 0x80:
                ascii = False
                break
            i += 1
    if ascii:
        return 0
    try:
        PyUnicode_DecodeUTF8(<const char*>p + pos, size, NULL)
    except UnicodeDecodeError:
        raise _AvroInvalid("a string is not UTF-8") from None
    return 0


def check_payloads(data, Py_ssize_t count, bint value, list ids, dict checks):
    """See the reference."""
    cdef _View v = _View(data)
    cdef Fields f
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t i, at, n
    cdef list out = []
    cdef object schema_id, check, why
    if len(ids) != count:
        raise ValueError("one schema id per record")
    for i in range(count):
        next_record(v.p, v.end, &pos, &f, None)
        if value:
            at, n = f.value_pos, f.value_len
        else:
            at, n = f.key_pos, f.key_len
        if n < 0:
            continue
        schema_id = ids[i]
        check = checks[schema_id]
        if type(check) is AvroValidator:
            why = (<AvroValidator>check).check_at(v.p + at, n)
        else:
            why = check(PyBytes_FromStringAndSize(<const char*>v.p + at, n))
        if why is not None:
            PyList_Append(out, (i, schema_id, why))
    if pos != v.end:
        raise ProtocolError(RECORDS_REMAINING)
    return out
