"""The produce fast path of the log, pure-Python reference; ``_append.pyx`` compiles the same.

Theory of operation. :class:`LogCore` and :class:`SegmentCore` are the bases of ``Log`` and
``LogSegment`` and hold the state one common append touches: the log end offset, recovery
point and log start offset; the active segment's size, index counters, largest timestamp and
next offset. Three more cores hold the one field each that an append reads or writes in another
object: the active segment of ``LogSegments`` (:class:`SegmentsCore`), the latest epoch of
``LeaderEpochCache`` (:class:`LeaderEpochCacheCore`) and the map end offset of
``ProducerStateManager`` (:class:`ProducerStateCore`); compiled, they are C fields, so the
append touches no attribute dictionary. ``LogCore.append`` takes one plain v2 batch (no
producer id, not transactional, not control, CreateTime, on a topic that is neither compacted
nor LogAppendTime) through header and CRC checks and the record walk's ``check_records`` (a
compressed one decompressed first, unless the broker did that already: ``scanned``; every
record well formed, as many as the header says, offset deltas 0, 1, 2, ..., timestamps within
the topic's bounds and the header's max timestamp the records'), stamps its base offset and
leader epoch, writes it with one system call and indexes it; anything else, and anything that
needs a segment roll, goes to the general path ``Log._append`` (``validator``), which handles
or rejects it with Kafka's error. ``storage.fast_append``
picks this module or the compiled one (``GREGOR_NO_EXTENSIONS=1`` forces this one); both must
leave the same bytes on disk and return the same :class:`LogAppendInfo`
(``tests/storage/test_storage_fast_append.py``).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Sequence
from typing import Any

from crc32c import crc32c

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE, decompress
from gregor.protocol.records.header import ATTRIBUTES_OFFSET, HEADER_SIZE, LOG_OVERHEAD
from gregor.protocol.records.walk import check_records
from gregor.storage.append_types import AppendOrigin
from gregor.storage.clock import Clock
from gregor.storage.clock import now_ms as wall_clock_ms
from gregor.storage.config import LogConfig
from gregor.storage.errors import KafkaStorageError
from gregor.storage.index import OffsetIndex, TimeIndex
from gregor.storage.log_info import LogAppendInfo

IMPLEMENTATION = "python"

INT32_MAX = 0x7FFFFFFF
_COPY_LIMIT = 16 * 1024  # above this, writev the header apart instead of copying the batch
_PREFIX = struct.Struct(">qii")  # base_offset, batch_length, partition_leader_epoch
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the v2 batch header (see records.header)
_new_tuple = tuple.__new__
_time_ns = time.time_ns


def _record_facts(
    mv: memoryview, codec: int, count: int, base_ts: int, scanned: Sequence[Any] | None
) -> tuple[int, int, int] | None:
    """(min timestamp, max timestamp, first offset delta out of order) of the records of the
    batch ``mv``: the broker's scan of them (``scanned``), else the record walk's, after
    decompressing; None when the batch must go to the general path (which then says why)."""
    if scanned is not None:
        if len(scanned) != 1 or scanned[0].error is not None:
            return None
        batch = scanned[0]
        return batch.min_timestamp, batch.max_timestamp, batch.bad_delta
    try:
        payload: memoryview | bytes = mv[HEADER_SIZE:]
        if codec:
            payload = decompress(codec, payload, max_size=DEFAULT_MAX_DECOMPRESSED_SIZE)
        lo, hi, _, bad_delta = check_records(payload, count, base_ts)
    except ProtocolError:
        return None
    return lo, hi, bad_delta


class SegmentCore:
    """The fields of a segment the append path reads and writes (set by ``LogSegment``)."""

    __slots__ = (
        "fd",
        "base_offset",
        "size",
        "offset_index",
        "time_index",
        "index_interval_bytes",
        "bytes_since_last_index_entry",
        "max_timestamp_so_far",
        "offset_of_max_timestamp_so_far",
        "next_offset",
        "created_ms",
        "_rolling_based_timestamp",
    )

    fd: int
    base_offset: int
    size: int
    offset_index: OffsetIndex
    time_index: TimeIndex
    index_interval_bytes: int
    bytes_since_last_index_entry: int
    max_timestamp_so_far: int
    offset_of_max_timestamp_so_far: int
    next_offset: int
    created_ms: int
    _rolling_based_timestamp: int | None

    log_path: str

    def _undo_write(self, size: int) -> None:
        raise NotImplementedError

    def append_unchecked(
        self,
        mv: memoryview,
        n: int,
        base_offset: int,
        leader_epoch: int,
        last_offset: int,
        max_timestamp: int,
        now_ms: int,
        config: LogConfig,
    ) -> bool:
        """Append one batch whose header and CRC the caller validated (the produce fast
        path): stamp its base offset and partition leader epoch, write it with one system call
        and index it. A writable buffer is stamped in place; a read-only one is copied when
        small, else written in two pieces (new header prefix, rest of the batch).

        Returns False, writing nothing, when the segment must roll first: the batch would pass
        ``segment.bytes`` or a relative offset, the index entry it may add has no room, or
        ``segment.ms`` passed (also when that cannot be told without I/O: the general append
        path then decides). ``n`` is ``len(mv)``, which the caller knows."""
        size = self.size
        since = self.bytes_since_last_index_entry
        index_now = since > self.index_interval_bytes
        if (
            size + n > config.segment_bytes
            or last_offset - self.base_offset > INT32_MAX
            or (index_now and (self.offset_index.is_full() or self.time_index.is_full()))
        ):
            return False
        if size:
            rolling = self._rolling_based_timestamp
            if rolling is None:
                return False
            waited = max_timestamp - rolling if rolling >= 0 else now_ms - self.created_ms
            if waited > config.segment_ms:
                return False
        fd = self.fd
        batch_length = n - LOG_OVERHEAD
        try:
            if not mv.readonly:
                _PREFIX.pack_into(mv, 0, base_offset, batch_length, leader_epoch)
                written = os.write(fd, mv)
            elif n <= _COPY_LIMIT:
                buf = bytearray(mv)
                _PREFIX.pack_into(buf, 0, base_offset, batch_length, leader_epoch)
                written = os.write(fd, buf)
            else:
                prefix = _PREFIX.pack(base_offset, batch_length, leader_epoch)
                written = os.writev(fd, [prefix, mv[_PREFIX.size :]])
            if written != n:
                raise OSError(f"short write: {written} of {n} bytes")
        except OSError as e:
            self._undo_write(size)
            raise KafkaStorageError(f"write to {self.log_path} failed: {e}") from e
        self.size = size + n
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = last_offset
        if index_now:
            self.offset_index.append(last_offset, size)
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
            )
            since = 0
        self.bytes_since_last_index_entry = since + n
        self.next_offset = last_offset + 1
        if not size:
            self._rolling_based_timestamp = max_timestamp
        return True


class SegmentsCore:
    """The field of a log's segment list the append path reads (set by ``LogSegments``)."""

    __slots__ = ("active",)

    active: SegmentCore


class LeaderEpochCacheCore:
    """The field of a leader epoch cache the append path reads (kept by ``LeaderEpochCache``)."""

    __slots__ = ("latest",)

    latest: int

    def assign(self, epoch: int, start_offset: int) -> bool:
        raise NotImplementedError


class ProducerStateCore:
    """The field of a producer state the append path writes (``ProducerStateManager``)."""

    __slots__ = ("map_end_offset",)

    map_end_offset: int


class LogCore:
    """The fields of a log the append path reads and writes (set by ``LocalLog`` and ``Log``)."""

    _config: LogConfig
    _fast: bool
    _clock: Clock
    _segments: SegmentsCore
    producer_state: ProducerStateCore
    leader_epoch_cache: LeaderEpochCacheCore
    log_end_offset: int
    recovery_point: int
    log_start_offset: int

    def _set_fast_config(self, config: LogConfig) -> None:
        """Take a new config (and what the fast path needs of it)."""
        self._config = config
        self._fast = not config.compact and not config.log_append_time

    def _append(
        self,
        records: bytes | bytearray | memoryview,
        origin: AppendOrigin,
        leader_epoch: int,
        assign: bool,
        now_ms: int | None,
        scanned: Sequence[Any] | None = None,
    ) -> LogAppendInfo:
        raise NotImplementedError

    def flush(self, offset: int | None = None) -> None:
        raise NotImplementedError

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        leader_epoch: int = 0,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        now_ms: int | None = None,
        scanned: Sequence[Any] | None = None,
    ) -> LogAppendInfo:
        """Append as the leader: validate, assign offsets from the log end offset, stamp
        ``leader_epoch`` (and LogAppendTime if configured), write. A writable buffer
        (bytearray) is rewritten in place; other buffers are copied first (or, when large,
        written from two pieces with ``writev``).

        The common produce, one plain batch (no producer id, not transactional, uncompressed,
        not a compacted or LogAppendTime topic) that needs no roll, is done right here with the
        fewest steps; anything unusual goes to the general path (``_append``), which
        handles or rejects it. ``scanned``: the batches' records already decompressed and
        walked (``validator.scan_batches``, in the broker)."""
        if origin is not AppendOrigin.CLIENT or not self._fast:
            return self._append(records, origin, leader_epoch, True, now_ms, scanned)
        n = len(records)
        if n < HEADER_SIZE:
            return self._append(records, origin, leader_epoch, True, now_ms, scanned)
        (_, blen, _, magic, crc, attributes, delta, base_ts, max_ts, pid, _, _, count) = (
            _HEADER.unpack_from(records)
        )
        cfg = self._config
        if (
            blen + LOG_OVERHEAD != n
            or magic != 2
            or pid >= 0
            or attributes & 0x38  # LogAppendTime, transactional or control
            or count != delta + 1
            or count <= 0
            or n > cfg.max_message_bytes
            or base_ts < 0
            or base_ts > max_ts
        ):
            return self._append(records, origin, leader_epoch, True, now_ms, scanned)
        if now_ms is None:
            clock = self._clock
            now_ms = _time_ns() // 1_000_000 if clock is wall_clock_ms else clock()
        mv = records if type(records) is memoryview else memoryview(records)
        offset = self.log_end_offset
        last = offset + delta
        if (
            now_ms - base_ts > cfg.message_timestamp_before_max_ms
            or crc32c(mv[ATTRIBUTES_OFFSET:]) != crc
        ):
            return self._append(records, origin, leader_epoch, True, now_ms, scanned)
        facts = _record_facts(mv, attributes & 0x07, count, base_ts, scanned)
        if facts is None:
            return self._append(records, origin, leader_epoch, True, now_ms, scanned)
        lo, hi, bad_delta = facts
        if (
            bad_delta >= 0
            or hi != max_ts
            or (lo != -1 and now_ms - lo > cfg.message_timestamp_before_max_ms)
            or max_ts - now_ms > cfg.message_timestamp_after_max_ms
            or not self._segments.active.append_unchecked(
                mv, n, offset, leader_epoch, last, max_ts, now_ms, cfg
            )
        ):
            return self._append(records, origin, leader_epoch, True, now_ms, scanned)
        self.log_end_offset = last + 1
        self.producer_state.map_end_offset = last + 1
        if leader_epoch > self.leader_epoch_cache.latest:
            self.leader_epoch_cache.assign(leader_epoch, offset)
        if last + 1 - self.recovery_point >= cfg.flush_messages:
            self.flush()
        return _new_tuple(
            LogAppendInfo, (offset, last, -1, self.log_start_offset, max_ts, last, count, n, False)
        )
