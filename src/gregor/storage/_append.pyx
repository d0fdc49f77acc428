# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The produce fast path of the log, compiled; ``_append_py.py`` is the reference.

Same behaviour as the reference, statement for statement (see its docstring for the theory of
operation); here the fields the path touches are C fields of the base classes (so an append
reads or writes no attribute dictionary), the batch header is read straight from the buffer,
and the write is one ``write(2)`` (a writable buffer, stamped in place; a read-only one up to
16 KiB copied on the stack with its new prefix) or ``writev(2)`` (a larger read-only one: the
new 16-byte prefix, then the rest of the batch, so nothing is copied). The GIL is released
around the system call only for batches above 16 KiB: a smaller write into the page cache
takes about a microsecond, less than handing the GIL to another thread and back would cost.
The CRC32C is computed in C with the CPU's instruction (``_crc32c.h``) where there is one, else
by the ``crc32c`` package as in the reference. An exact ``bytes`` object (what the broker
appends) is read in place, without the buffer protocol.
"""

from cpython.buffer cimport PyBUF_READ, PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from cpython.memoryview cimport PyMemoryView_FromMemory
from cpython.object cimport PyObject
from libc.errno cimport EINTR, errno
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, strerror
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec
from posix.uio cimport iovec, writev
from posix.unistd cimport write

from gregor._tuples cimport fast_tuple, gregor_alloc_tuple, replace_item, set_item
from gregor.protocol.records._scan cimport RecordFacts, check_records_c
from gregor.storage._index cimport IndexCore


cdef extern from "_crc32c.h":
    int gregor_crc32c_available()
    uint32_t gregor_crc32c(const uint8_t* p, size_t n) noexcept nogil

from crc32c import crc32c as _crc32c

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE as _MAX_DECOMPRESSED,
    decompress as _decompress,
)

from gregor.storage.clock import now_ms as _wall_clock_ms_py
from gregor.storage.errors import KafkaStorageError
from gregor.storage.log_info import LogAppendInfo
from gregor.storage.append_types import AppendOrigin

IMPLEMENTATION = "cython"

cdef object _CLIENT = AppendOrigin.CLIENT
cdef object _wall_clock_ms = _wall_clock_ms_py
cdef int64_t _INT32_MAX = 0x7FFFFFFF
cdef int64_t _INT64_MAX = 0x7FFFFFFFFFFFFFFF
cdef Py_ssize_t _HEADER_SIZE = 61
cdef Py_ssize_t _LOG_OVERHEAD = 12
cdef Py_ssize_t _ATTRIBUTES_OFFSET = 21
cdef Py_ssize_t _COPY_LIMIT = 16384  # above this, writev the prefix apart instead of copying
cdef bint _HW_CRC = gregor_crc32c_available()


cdef uint32_t _crc(const uint8_t* p, Py_ssize_t n) except? 0:
    """The CRC32C of ``n`` bytes at ``p``: the CPU's instruction, else the crc32c package."""
    if _HW_CRC:
        return gregor_crc32c(p, n)
    return _crc32c(PyMemoryView_FromMemory(<char*>p, n, PyBUF_READ))


def batch_crc(data):
    """The CRC32C the fast path computes for ``data`` (a bytes-like object); for its tests."""
    cdef Py_buffer view
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        return _crc(<const uint8_t*>view.buf, view.len)
    finally:
        PyBuffer_Release(&view)


cdef Py_ssize_t _write_batch(int fd, uint8_t* buf, Py_ssize_t n, bint readonly,
                             const uint8_t* prefix, int* err) noexcept nogil:
    """Write the batch with its new 16-byte ``prefix``: stamped in place when writable, else
    copied with it on the stack (up to _COPY_LIMIT bytes) or written in two pieces. Returns
    what the system call returned, with ``errno`` in ``err`` on failure."""
    cdef uint8_t small[16384]
    cdef iovec iov[2]
    cdef Py_ssize_t written
    if not readonly:
        memcpy(buf, prefix, 16)
        while True:
            written = write(fd, buf, n)
            if written >= 0 or errno != EINTR:
                break
    elif n <= _COPY_LIMIT:  # one copy on the stack beats a two-piece writev
        memcpy(small, prefix, 16)
        memcpy(small + 16, buf + 16, n - 16)
        while True:
            written = write(fd, small, n)
            if written >= 0 or errno != EINTR:
                break
    else:
        iov[0].iov_base = <void*>prefix
        iov[0].iov_len = 16
        iov[1].iov_base = buf + 16
        iov[1].iov_len = n - 16
        while True:
            written = writev(fd, iov, 2)
            if written >= 0 or errno != EINTR:
                break
    if written < 0:
        err[0] = errno
    return written


cdef inline int64_t _i64(const uint8_t* p) noexcept nogil:
    return <int64_t>(
        (<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40)
        | (<uint64_t>p[3] << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
        | (<uint64_t>p[6] << 8) | <uint64_t>p[7]
    )


cdef inline uint32_t _u32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline void _put_i64(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    cdef int i
    for i in range(8):
        p[i] = <uint8_t>(u >> (56 - 8 * i))


cdef inline void _put_i32(uint8_t* p, int32_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = <uint8_t>(u >> 24)
    p[1] = <uint8_t>(u >> 16)
    p[2] = <uint8_t>(u >> 8)
    p[3] = <uint8_t>u



cdef bint _FAST_INFO = fast_tuple(LogAppendInfo)


cdef object _append_info(object offset, int64_t last, object log_start_offset, int64_t max_ts,
                         int64_t count, object n):
    """LogAppendInfo(offset, last, -1, log_start_offset, max_ts, last, count, n, False), made
    as tuple.__new__ makes a tuple subclass (allocate, fill) without its argument parsing."""
    cdef object last_obj = last
    if not _FAST_INFO:
        return tuple.__new__(
            LogAppendInfo, (offset, last_obj, -1, log_start_offset, max_ts, last_obj, count, n, False)
        )
    cdef object t = gregor_alloc_tuple(LogAppendInfo, 9)
    set_item(t, 2, -1)
    set_item(t, 8, False)
    _fill_info(t, offset, last, log_start_offset, max_ts, count, n)
    return t


cdef void _fill_info(object t, object offset, int64_t last, object log_start_offset,
                     int64_t max_ts, int64_t count, object n):
    """Set the items of a LogAppendInfo that vary (see _append_info) in a tuple no one else
    holds: a new one, or the last one refilled."""
    cdef object last_obj = last
    replace_item(t, 0, offset)
    replace_item(t, 1, last_obj)
    replace_item(t, 3, log_start_offset)
    replace_item(t, 4, max_ts)
    replace_item(t, 5, last_obj)
    replace_item(t, 6, count)
    replace_item(t, 7, n)


cdef int64_t _clamp(object v):
    """A config number as int64 (a larger one means "never", as int64 max does)."""
    if v > _INT64_MAX:
        return _INT64_MAX
    if v < -_INT64_MAX:
        return -_INT64_MAX
    return v


cdef class SegmentCore:
    """The fields of a segment the append path reads and writes (set by ``LogSegment``)."""

    cdef public int fd
    cdef public int64_t base_offset
    cdef public int64_t size
    cdef public IndexCore offset_index
    cdef public IndexCore time_index
    cdef public int64_t index_interval_bytes
    cdef public int64_t bytes_since_last_index_entry
    cdef public int64_t max_timestamp_so_far
    cdef public int64_t offset_of_max_timestamp_so_far
    cdef public int64_t next_offset
    cdef public int64_t created_ms
    cdef public object _rolling_based_timestamp

    def append_unchecked(self, mv, Py_ssize_t n, int64_t base_offset, int32_t leader_epoch,
                         int64_t last_offset, int64_t max_timestamp, int64_t now_ms, config):
        """See the reference. ``mv`` is any buffer of ``n`` bytes."""
        cdef Py_buffer view
        PyObject_GetBuffer(mv, &view, PyBUF_SIMPLE)
        try:
            if view.len != n:
                raise ValueError("n is not the buffer's length")
            return self._append_c(&view, base_offset, leader_epoch, last_offset, max_timestamp,
                                  now_ms, _clamp(config.segment_bytes), _clamp(config.segment_ms))
        finally:
            PyBuffer_Release(&view)

    cdef int _append_c(self, Py_buffer* view, int64_t base_offset, int32_t leader_epoch,
                       int64_t last_offset, int64_t max_timestamp, int64_t now_ms,
                       int64_t segment_bytes, int64_t segment_ms) except -1:
        cdef int64_t size = self.size
        cdef Py_ssize_t n = view.len
        cdef int64_t since = self.bytes_since_last_index_entry
        cdef bint index_now = since > self.index_interval_bytes
        cdef int64_t rolling, waited
        cdef uint8_t prefix[16]
        cdef uint8_t* buf = <uint8_t*>view.buf
        cdef Py_ssize_t written
        cdef int fd = self.fd
        cdef int err = 0
        if (
            size + n > segment_bytes
            or last_offset - self.base_offset > _INT32_MAX
            or (index_now and (
                # OffsetIndex.is_full(), TimeIndex.is_full() (which keeps a slot for the roll)
                self.offset_index._entries >= self.offset_index.max_index_size // 8
                or self.time_index._entries >= self.time_index.max_index_size // 12 - 1
            ))
        ):
            return 0
        if size:
            if self._rolling_based_timestamp is None:
                return 0
            rolling = self._rolling_based_timestamp
            waited = max_timestamp - rolling if rolling >= 0 else now_ms - self.created_ms
            if waited > segment_ms:
                return 0
        _put_i64(prefix, base_offset)
        _put_i32(prefix + 8, <int32_t>(n - _LOG_OVERHEAD))
        _put_i32(prefix + 12, leader_epoch)
        if n > _COPY_LIMIT:
            with nogil:
                written = _write_batch(fd, buf, n, view.readonly, prefix, &err)
        else:
            written = _write_batch(fd, buf, n, view.readonly, prefix, &err)
        if written != n:
            (<object>self)._undo_write(size)
            if written < 0:
                msg = f"[Errno {err}] {strerror(err).decode()}"
            else:
                msg = f"short write: {written} of {n} bytes"
            raise KafkaStorageError(f"write to {(<object>self).log_path} failed: {msg}")
        self.size = size + n
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = last_offset
        if index_now:
            self.offset_index.offset_append(last_offset, size)
            self.time_index.time_maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
            )
            since = 0
        self.bytes_since_last_index_entry = since + n
        self.next_offset = last_offset + 1
        if not size:
            self._rolling_based_timestamp = max_timestamp
        return 1


cdef class SegmentsCore:
    """The field of a log's segment list the append path reads (set by ``LogSegments``)."""

    cdef public SegmentCore active


cdef class LeaderEpochCacheCore:
    """The field of a leader epoch cache the append path reads (kept by ``LeaderEpochCache``)."""

    cdef public int64_t latest


cdef class ProducerStateCore:
    """The field of a producer state the append path writes (``ProducerStateManager``)."""

    cdef public int64_t map_end_offset


cdef bint _record_facts(const uint8_t* p, Py_ssize_t n, int codec, int32_t count, int64_t base_ts,
                       object scanned, RecordFacts* facts) except -1:
    """What the records of the batch at ``p`` say (see the reference's ``_record_facts``); false
    when the batch must go to the general path."""
    cdef Py_buffer payload
    if scanned is not None:
        if len(scanned) != 1 or scanned[0].error is not None:
            return False
        batch = scanned[0]
        facts.min_timestamp = batch.min_timestamp
        facts.max_timestamp = batch.max_timestamp
        facts.keyless = batch.keyless
        facts.bad_delta = batch.bad_delta
        return True
    try:
        if not codec:
            check_records_c(p + _HEADER_SIZE, n - _HEADER_SIZE, count, base_ts, facts)
            return True
        data = _decompress(
            codec, PyMemoryView_FromMemory(<char*>p + _HEADER_SIZE, n - _HEADER_SIZE, PyBUF_READ),
            max_size=_MAX_DECOMPRESSED,
        )
        PyObject_GetBuffer(data, &payload, PyBUF_SIMPLE)
        try:
            check_records_c(<const unsigned char*>payload.buf, payload.len, count, base_ts, facts)
        finally:
            PyBuffer_Release(&payload)
    except ProtocolError:
        return False
    return True


cdef class LogCore:
    """The fields of a log the append path reads and writes (set by ``LocalLog`` and ``Log``)."""

    cdef public object _config
    cdef public bint _fast
    cdef public object _clock
    cdef public SegmentsCore _segments
    cdef public ProducerStateCore producer_state
    cdef public LeaderEpochCacheCore leader_epoch_cache
    cdef public int64_t log_end_offset
    cdef public int64_t recovery_point
    cdef public int64_t log_start_offset
    cdef int64_t _max_message_bytes
    cdef int64_t _ts_before_max
    cdef int64_t _ts_after_max
    cdef int64_t _flush_messages
    cdef int64_t _segment_bytes
    cdef int64_t _segment_ms
    cdef object _info  # the last LogAppendInfo returned (see _result)
    cdef object _size_obj  # the int object of the last fast append's size

    def _set_fast_config(self, config):
        """Take a new config (and what the fast path needs of it)."""
        self._config = config
        self._fast = not config.compact and not config.log_append_time
        self._max_message_bytes = _clamp(config.max_message_bytes)
        self._ts_before_max = _clamp(config.message_timestamp_before_max_ms)
        self._ts_after_max = _clamp(config.message_timestamp_after_max_ms)
        self._flush_messages = _clamp(config.flush_messages)
        self._segment_bytes = _clamp(config.segment_bytes)
        self._segment_ms = _clamp(config.segment_ms)

    def append(self, records, *, int32_t leader_epoch=0, origin=_CLIENT, now_ms=None,
               scanned=None):
        """See the reference."""
        cdef Py_buffer view
        cdef object result
        if origin is not _CLIENT or not self._fast:
            return self._append(records, origin, leader_epoch, True, now_ms, scanned)
        if PyBytes_CheckExact(records):  # the common case: its bytes, no buffer to release
            view.buf = PyBytes_AS_STRING(records)
            view.len = PyBytes_GET_SIZE(records)
            view.readonly = 1
            result = self._append_fast(&view, leader_epoch, now_ms, scanned)
        else:
            PyObject_GetBuffer(records, &view, PyBUF_SIMPLE)
            try:
                result = self._append_fast(&view, leader_epoch, now_ms, scanned)
            finally:
                PyBuffer_Release(&view)
        if result is None:
            return self._append(records, origin, leader_epoch, True, now_ms, scanned)
        return result

    cdef object _append_fast(self, Py_buffer* view, int32_t leader_epoch, object now_obj,
                             object scanned):
        cdef Py_ssize_t n = view.len
        cdef const uint8_t* p = <const uint8_t*>view.buf
        cdef int64_t now_ms, offset, last, base_ts, max_ts, pid
        cdef int32_t blen, delta, count
        cdef int16_t attributes
        cdef uint32_t crc
        cdef timespec ts
        cdef RecordFacts facts
        cdef SegmentCore seg
        cdef ProducerStateCore producer_state = self.producer_state
        cdef LeaderEpochCacheCore epochs = self.leader_epoch_cache
        if n < _HEADER_SIZE:
            return None
        blen = <int32_t>_u32(p + 8)
        crc = _u32(p + 17)
        attributes = <int16_t>((p[21] << 8) | p[22])
        delta = <int32_t>_u32(p + 23)
        base_ts = _i64(p + 27)
        max_ts = _i64(p + 35)
        pid = _i64(p + 43)
        count = <int32_t>_u32(p + 57)
        if (
            blen + _LOG_OVERHEAD != n
            or p[16] != 2
            or pid >= 0
            or attributes & 0x38  # LogAppendTime, transactional or control
            or <int64_t>count != <int64_t>delta + 1
            or count <= 0
            or n > self._max_message_bytes
            or base_ts < 0
            or base_ts > max_ts
        ):
            return None
        if now_obj is None:
            if self._clock is _wall_clock_ms:
                clock_gettime(CLOCK_REALTIME, &ts)
                now_ms = <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000
            else:
                now_ms = self._clock()
        else:
            now_ms = now_obj
        offset = self.log_end_offset
        last = offset + delta
        if now_ms - base_ts > self._ts_before_max or max_ts - now_ms > self._ts_after_max:
            return None
        if _crc(p + _ATTRIBUTES_OFFSET, n - _ATTRIBUTES_OFFSET) != crc:
            return None
        if not _record_facts(p, n, attributes & 0x07, count, base_ts, scanned, &facts):
            return None  # the general path refuses it with Kafka's message
        if (
            facts.bad_delta >= 0
            or facts.max_timestamp != max_ts
            # (now - min > before, without overflow: now and before are not negative)
            or (facts.min_timestamp != -1 and facts.min_timestamp < now_ms - self._ts_before_max)
        ):
            return None
        if self._segments is None or producer_state is None or epochs is None:
            return None  # not set up (the general path says what is missing)
        seg = self._segments.active
        if seg is None or not seg._append_c(view, offset, leader_epoch, last, max_ts, now_ms,
                                            self._segment_bytes, self._segment_ms):
            return None
        self.log_end_offset = last + 1
        producer_state.map_end_offset = last + 1
        if leader_epoch > epochs.latest:
            epochs.assign(leader_epoch, offset)
        if last + 1 - self.recovery_point >= self._flush_messages:
            self.flush()
        return self._result(offset, last, max_ts, count, n)

    cdef object _result(self, int64_t offset, int64_t last, int64_t max_ts, int64_t count,
                        Py_ssize_t n):
        """This append's LogAppendInfo. The previous one is refilled in place when only the log
        holds it (so no one can see it change), as ``zip`` and ``enumerate`` refill their
        result tuple; the size is the previous size's object when equal."""
        cdef object n_obj = self._size_obj
        cdef PyObject* info = <PyObject*>self._info
        if n_obj is None or <Py_ssize_t>n_obj != n:
            n_obj = self._size_obj = n
        # Only the tuple layout with no hash cache (_FAST_INFO) may be refilled.
        if _FAST_INFO and self._info is not None and info.ob_refcnt == 1:
            _fill_info(self._info, offset, last, self.log_start_offset, max_ts, count, n_obj)
        else:
            self._info = _append_info(offset, last, self.log_start_offset, max_ts, count, n_obj)
        return self._info
