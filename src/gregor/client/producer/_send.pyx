# cython: language_level=3
"""The producer's per-record path, compiled; ``_send_py.py`` is the reference (its docstring
has the theory of operation).

``ProducerCore.send_nowait`` takes the common case here: a producer that is open, not
transactional and not failed; bytes (or no) key and value; no headers; a topic whose
partitions are cached for the current metadata; an int partition in range (or a key hash, or
the sticky partitioner). Anything else goes to the reference's ``send_nowait``, which also
raises its errors. ``AccumulatorCore.append`` is the reference's statement for statement with
its counters in C; the record itself is encoded by the compiled ``RecordAppender``.
"""

from libc.stdint cimport int64_t
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec

from gregor._tuples cimport fast_tuple, gregor_alloc_tuple, set_item

from gregor.client.producer import _send_py
from gregor.client.producer.futures import ProduceFuture
from gregor.client.producer.partitioner import partition_for_key

IMPLEMENTATION = "cython"

cdef extern from "Python.h":
    unsigned long PyThread_get_thread_ident()

cdef bint _FAST_FUTURE = fast_tuple(ProduceFuture)
cdef object _py_send_nowait = _send_py.ProducerCore.send_nowait
cdef object _new_queue = _send_py.PartitionQueue
cdef Py_ssize_t RECORD_OVERHEAD = _send_py.RECORD_OVERHEAD


cdef class AccumulatorCore:
    """The fields of the accumulator ``append`` reads and writes (set by ``RecordAccumulator``)."""

    cdef public int64_t batch_size
    cdef public int64_t buffer_memory
    cdef public int64_t bytes_used
    cdef public object lock
    cdef public dict queues
    cdef public object _wakeup

    def append(self, tp, timestamp, key, value, headers, double max_block):
        """See the reference."""
        return self._append_c(tp, timestamp, key, value, headers, max_block)

    cdef object _append_c(self, object tp, object timestamp, object key, object value,
                          object headers, double max_block):
        cdef Py_ssize_t size = RECORD_OVERHEAD
        cdef Py_ssize_t ksize, vsize, bsize
        cdef bint wake = False
        cdef object q, batches, batch, index, fut
        if key is None:
            ksize = -1
        else:
            ksize = len(key)
            size += ksize
        if value is None:
            vsize = -1
        else:
            vsize = len(value)
            size += vsize
        if headers:
            size += sum(len(k) + (len(v) if v is not None else 0) + 4 for k, v in headers)
        lock = self.lock
        lock.acquire()
        try:
            if self.bytes_used + size > self.buffer_memory and self.bytes_used > 0:
                self._wait_for_room(size, max_block)
            q = self.queues.get(tp)
            if q is None:
                q = _new_queue()
                self.queues[tp] = q
            batches = q.batches
            batch = batches[-1] if batches else None
            if batch is None or batch.closed:
                batch = self._new_batch(tp, q)
                if len(batches) == 1:
                    wake = True  # the sender must arm a linger timer
            else:
                bsize = batch.size
                if bsize + size > self.batch_size and bsize > 0:
                    wake = True  # the previous batch is full: ready now
                    batch = self._new_batch(tp, q)
            index = batch.append(timestamp, key, value, headers)
            batch.size += size
            self.bytes_used += size
        finally:
            lock.release()
        if wake:
            self._wakeup()
        if not _FAST_FUTURE:
            return tuple.__new__(ProduceFuture, (batch.result, index, timestamp, ksize, vsize))
        fut = gregor_alloc_tuple(ProduceFuture, 5)
        set_item(fut, 0, batch.result)
        set_item(fut, 1, index)
        set_item(fut, 2, timestamp)
        set_item(fut, 3, ksize)
        set_item(fut, 4, vsize)
        return fut


cdef class ProducerCore:
    """The fields of the producer ``send_nowait`` reads (set by ``AIOProducer``)."""

    cdef public bint _closed
    cdef public object _fatal
    cdef public object transactional_id
    cdef public object _txn
    cdef public dict _tps
    cdef public object _tps_version
    cdef public object _client
    cdef public bint _ignore_keys
    cdef public object _sticky
    cdef public double _max_block
    cdef public unsigned long _loop_thread
    cdef public AccumulatorCore accumulator

    def send_nowait(self, topic, value=None, key=None, partition=None, timestamp_ms=None,
                    headers=None, *, block=True):
        """See the reference."""
        cdef Py_ssize_t n, p
        cdef int64_t ts
        cdef timespec spec
        cdef double wait
        cdef object tps, tp
        if (
            self._closed
            or self._fatal is not None
            or self.transactional_id
            or (key is not None and type(key) is not bytes)
            or (value is not None and type(value) is not bytes)
            or headers
            or (partition is not None and type(partition) is not int)
            or (timestamp_ms is not None and type(timestamp_ms) is not int)
        ):
            return _py_send_nowait(self, topic, value, key, partition, timestamp_ms, headers, block=block)
        tps = self._tps.get(topic)
        if tps is None or self._tps_version != self._client.cluster.version:
            return _py_send_nowait(self, topic, value, key, partition, timestamp_ms, headers, block=block)
        n = len(tps)
        if partition is None:
            if key is not None and not self._ignore_keys:
                p = partition_for_key(key, n)
            else:
                p = self._sticky.partition(
                    topic, self._client.cluster, n, (len(value) if value is not None else 0) + 12
                )
        else:
            if not 0 <= partition < n:
                return _py_send_nowait(self, topic, value, key, partition, timestamp_ms, headers, block=block)
            p = partition
        if timestamp_ms is None:
            clock_gettime(CLOCK_REALTIME, &spec)
            ts = <int64_t>spec.tv_sec * 1000 + spec.tv_nsec // 1000000
            timestamp_ms = ts
        tp = tps[p]
        if self._txn is not None:
            self._txn.touch(tp)
        # Waiting for room is for other threads; on the loop it would stall the sender itself.
        wait = self._max_block if block and PyThread_get_thread_ident() != self._loop_thread else 0.0
        return self.accumulator._append_c(tp, timestamp_ms, key, value, (), wait)
