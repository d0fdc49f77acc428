"""Conversion between legacy message sets (v0/v1) and RecordBatch v2.

The broker stores v2 only. :func:`upconvert` turns a produced v0/v1 message set into v2
batches: each compressed wrapper becomes one batch with the same codec, and each run of plain
messages one uncompressed batch. Offsets are kept (a new batch starts wherever they stop
increasing) unless ``base_offset`` is given, in which case messages are numbered from it.
v0 messages get NO_TIMESTAMP (-1); a LogAppendTime wrapper makes a LogAppendTime batch.

:func:`downconvert` serves old fetch versions: each v2 batch becomes plain messages, or one
wrapper with the batch's codec when compressed, keeping offsets, keys, values and (v1)
timestamps. Headers cannot be expressed in v0/v1 and are dropped; control batches are left out,
as Kafka does. zstd cannot be down-converted (UnsupportedCompressionError). Records are walked
one at a time (the reference walk, a generator), so a fetch's ``start_offset`` and
``max_bytes`` bound the work and the output, not the batch: records before ``start_offset`` are
left out (the client would drop them) and conversion stops once ``max_bytes`` of messages are
out (at least one message), so a batch that inflates to the decompression bound costs one
decompression and ``max_bytes`` of messages, and the client asks for the rest.

:func:`iter_record_set` reads any mix of the three formats, as a client reading a fetch
response must.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import _scan_py
from gregor.protocol.records.batch import (
    LOG_APPEND_TIME,
    Record,
    RecordBatchBuilder,
    batch_payload,
    decode_batch,
)
from gregor.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    UnsupportedCompressionError,
)
from gregor.protocol.records.header import crc_ok, iter_batches
from gregor.protocol.records.legacy import (
    TIMESTAMP_TYPE_MASK,
    LegacyMessage,
    MessageSetBuilder,
    deep_messages,
    encode_message,
    iter_shallow_messages,
    read_message,
)

Buffer = bytes | bytearray | memoryview
_I32 = struct.Struct(">i")
_MAX_DELTA = 0x7FFFFFFF
_MESSAGE_OVERHEAD = 34  # a v1 message set entry around its key and value


def upconvert(
    buf: Buffer,
    *,
    base_offset: int | None = None,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Convert a v0/v1 message set into v2 batches (concatenated)."""
    out: list[bytes] = []
    plain: list[LegacyMessage] = []
    next_offset = base_offset

    def emit(msgs: Sequence[LegacyMessage], codec: int, ts_type: int, max_ts: int | None) -> None:
        nonlocal next_offset
        offsets: Sequence[int]
        if next_offset is not None:
            offsets = range(next_offset, next_offset + len(msgs))
            next_offset += len(msgs)
        else:
            offsets = [m.offset for m in msgs]
        start = 0
        for i in range(1, len(msgs) + 1):
            if (
                i == len(msgs)
                or offsets[i] <= offsets[i - 1]
                or offsets[i] - offsets[start] > _MAX_DELTA
            ):
                out.append(_v2_batch(msgs[start:i], offsets[start:i], codec, ts_type, max_ts))
                start = i

    def flush_plain() -> None:
        # Plain v1 messages may differ in timestamp type; each run of one type is a batch.
        start = 0
        for i in range(1, len(plain) + 1):
            if i == len(plain) or plain[i].timestamp_type != plain[start].timestamp_type:
                emit(plain[start:i], 0, plain[start].timestamp_type, None)
                start = i
        plain.clear()

    for msg in iter_shallow_messages(
        buf, verify_crc=verify_crc, allow_partial_tail=allow_partial_tail
    ):
        if not msg.compression:
            plain.append(msg)
            continue
        flush_plain()
        inner = deep_messages(
            msg, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
        )
        ts_type = msg.timestamp_type
        emit(inner, msg.compression, ts_type, msg.timestamp if ts_type else None)
    flush_plain()
    return b"".join(out)


def _v2_batch(
    msgs: Sequence[LegacyMessage],
    offsets: Sequence[int],
    codec: int,
    ts_type: int,
    max_ts: int | None,
) -> bytes:
    base = offsets[0]
    b = RecordBatchBuilder(base_offset=base, compression=codec, timestamp_type=ts_type)
    try:
        for m, off in zip(msgs, offsets, strict=True):
            b.append(m.timestamp, m.key, m.value, offset_delta=off - base)
    except ValueError as e:
        raise ProtocolError(f"cannot up-convert message set: {e}") from None
    return b.build(max_timestamp=max_ts)


def downconvert(
    buf: Buffer,
    magic: int,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    start_offset: int | None = None,
    max_bytes: int | None = None,
) -> bytes:
    """Convert v2 batches into a v0 or v1 message set: the records from ``start_offset`` on,
    until ``max_bytes`` of messages (uncompressed) are out, at least one (see the module
    docstring)."""
    if magic not in (0, 1):
        raise ValueError(f"can down-convert only to magic 0 or 1, not {magic}")
    parts: list[bytes] = []
    out = 0  # bytes of messages converted so far (before a wrapper compresses them)
    budget = max_bytes if max_bytes is not None else -1
    start = start_offset if start_offset is not None else -(1 << 63)
    for pos, h in iter_batches(buf, allow_partial_tail=allow_partial_tail):
        if h.is_control or h.last_offset < start:
            continue
        if 0 <= budget <= out:
            break
        codec = h.compression
        if codec == Compression.ZSTD:
            raise UnsupportedCompressionError("zstd batches cannot be down-converted to v0/v1")
        if verify_crc and not crc_ok(buf, pos, h):
            raise ProtocolError(f"record batch at byte {pos} fails its CRC32C check")
        payload = batch_payload(buf, pos, h, max_decompressed_size)
        log_append = h.timestamp_type == LOG_APPEND_TIME
        v1_log_append = magic == 1 and log_append
        attributes = TIMESTAMP_TYPE_MASK if v1_log_append and not codec else 0
        mb = None
        if codec:
            mb = MessageSetBuilder(
                magic, codec, base_offset=-1, timestamp_type=1 if v1_log_append else 0
            )
        for offset_delta, ts_delta, key, value, _headers in _scan_py.walk(payload, h.records_count):
            offset = h.base_offset + offset_delta
            if offset < start:
                continue
            ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
            if mb is None:
                message = encode_message(offset, magic, attributes, ts, key, value)
                out += len(message)
                parts.append(message)
            else:
                out += _MESSAGE_OVERHEAD + len(key or b"") + len(value or b"")
                if mb.base_offset < 0:
                    mb.base_offset = offset
                try:
                    mb.append(ts, key, value, offset_delta=offset - mb.base_offset)
                except ValueError as e:  # offsets that do not increase: a malformed batch
                    raise ProtocolError(
                        f"record batch at byte {pos} cannot be down-converted: {e}"
                    ) from None
            if 0 <= budget <= out:
                break
        if mb is not None and len(mb):
            parts.append(mb.build(wrapper_timestamp=h.max_timestamp if v1_log_append else None))
    return b"".join(parts)


def iter_record_set(
    buf: Buffer,
    *,
    skip_control: bool = False,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[Record]:
    """Records from a record set mixing v2 batches and v0/v1 messages (legacy ones get no
    headers, and NO_TIMESTAMP for v0)."""
    pos = 0
    end = len(buf)
    while pos < end:
        if end - pos < 17:
            if allow_partial_tail:
                return
            raise ProtocolError("record set truncated")
        (size,) = _I32.unpack_from(buf, pos + 8)
        if size < 0:
            raise ProtocolError(f"negative record set entry size {size}")
        entry_end = pos + 12 + size
        if entry_end > end:
            if allow_partial_tail:
                return
            raise ProtocolError("record set truncated")
        magic = buf[pos + 16]
        if magic == 2:
            batch = decode_batch(
                buf, pos, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
            )
            if not (skip_control and batch.is_control):
                yield from batch.records
        elif magic in (0, 1):
            msg, _ = read_message(buf, pos, verify_crc=verify_crc)
            for m in deep_messages(
                msg, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size
            ):
                yield Record(m.offset, m.timestamp, m.key, m.value, [])
        else:
            raise ProtocolError(f"unknown record magic {magic}")
        pos = entry_end
