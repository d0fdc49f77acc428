"""The leader checks every record of a batch (issue 35); a follower and a log being loaded do
not: they keep the leader's bytes, and whatever a log already holds stays readable as it is.

The batches that the leader refuses here are written byte by byte (``raw``): a batch that
declares one record and holds three is the issue's first case.
"""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c
from storage_helpers import T0, check_log, config, kv

from gregor.protocol.records import decode_batches
from gregor.protocol.records.header import iter_batches
from gregor.protocol.records.varint import encode_varint
from gregor.storage import InvalidRecordError, InvalidTimestampError, Log, RecordTooLargeError
from gregor.storage.errors import CorruptRecordError


def record(offset_delta: int, key: bytes | None, value: bytes, ts_delta: int = 0) -> bytes:
    k = encode_varint(-1) if key is None else encode_varint(len(key)) + key
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta) + k
    body += encode_varint(len(value)) + value + b"\x00"
    return encode_varint(len(body)) + body


def raw(
    records: bytes,
    count: int,
    *,
    base_offset: int = 0,
    epoch: int = -1,
    ts: int = T0,
    attributes: int = 0,
) -> bytes:
    out = bytearray(61) + records
    struct.pack_into(
        ">qiibIhiqqqhii",
        out,
        0,
        base_offset,
        len(out) - 12,
        epoch,
        2,
        0,
        attributes,
        count - 1,
        ts,
        ts,
        -1,
        -1,
        -1,
        count,
    )
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


THREE_IN_ONE = raw(b"".join(record(i, b"k%d" % i, b"v%d" % i) for i in range(3)), 1)


def open_log(path: str, **props: object) -> Log:
    return Log(path, config(**props), clock=lambda: T0)


def test_the_leader_refuses_what_the_records_contradict(log_dir: str) -> None:
    log = open_log(log_dir)
    with pytest.raises(
        InvalidRecordError, match="^Incorrect declared batch size, records still remaining in file$"
    ):
        log.append(THREE_IN_ONE)
    with pytest.raises(
        InvalidRecordError, match="^Incorrect declared batch size, premature EOF reached$"
    ):
        log.append(raw(record(0, b"k", b"v"), 1000))
    assert log.log_end_offset == 0
    assert log.append(kv(2)).first_offset == 0
    check_log(log)


def test_record_errors_name_each_record_at_fault(log_dir: str) -> None:
    log = open_log(log_dir, cleanup_policy="compact", message_timestamp_before_max_ms="1000")
    records = record(0, b"k", b"a") + record(1, None, b"b") + record(2, b"k", b"c", ts_delta=-5000)
    with pytest.raises(InvalidTimestampError) as e:
        log.append(raw(records, 3))
    assert e.value.message == "One or more records have been rejected due to invalid timestamp"
    assert e.value.record_errors == [
        (1, "Compacted topic cannot accept message without key in topic partition orders-0"),
        (
            2,
            f"Timestamp {T0 - 5000} of message with offset 2 is out of range. The timestamp should be "
            f"within [{T0 - 1000}, {T0 + (1 << 62)}]",
        ),
    ]


def test_a_follower_appends_the_leaders_bytes_unchanged(log_dir: str) -> None:
    # What a leader before issue 35 accepted and stored, a follower copies as it is (it does
    # not judge records), also a record without a key on a compacted topic.
    leader_bytes = raw(b"".join(record(i, b"k%d" % i, b"v%d" % i) for i in range(3)), 1, epoch=3)
    keyless = raw(record(0, None, b"no key"), 1, base_offset=1, epoch=3)
    follower = open_log(log_dir, cleanup_policy="compact")
    follower.append_as_follower(leader_bytes)
    follower.append_as_follower(keyless)
    assert follower.log_end_offset == 2
    with open(follower.active_segment.log_path, "rb") as f:
        assert f.read() == leader_bytes + keyless


def test_stored_batches_are_loaded_and_read_as_they_are(log_dir: str) -> None:
    # A log written before issue 35 may hold such a batch: recovery (no clean shutdown) and
    # reads keep it, byte for byte, and the log goes on from where it was.
    log = open_log(log_dir)
    log.append(kv(2), leader_epoch=1)
    old = raw(
        b"".join(record(i, b"k%d" % i, b"v%d" % i) for i in range(3)), 1, base_offset=2, epoch=1
    )
    log.append_as_follower(old)
    with open(log.active_segment.log_path, "rb") as f:
        before = f.read()
    log.close()
    for clean in (False, True):
        reopened = Log(log_dir, config(), clock=lambda: T0, had_clean_shutdown=clean)
        assert reopened.log_end_offset == 3
        with open(reopened.active_segment.log_path, "rb") as f:
            assert f.read() == before
        data = reopened.read(0, 1 << 20).read_bytes()
        assert [h.base_offset for _, h in iter_batches(data)] == [0, 2]
        reopened.close()
    reopened = Log(log_dir, config(), clock=lambda: T0, had_clean_shutdown=False)
    assert reopened.append(kv(1)).first_offset == 3
    check_log(reopened)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_checked_after_decompressing(log_dir: str, codec: int) -> None:
    from gregor.protocol.records.compression import compress

    log = open_log(log_dir)
    payload = compress(codec, b"".join(record(i, b"k", b"v" * 100) for i in range(3)))
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        log.append(raw(payload, 1, attributes=codec))
    with pytest.raises(CorruptRecordError, match="^Failed to decompress record stream: "):
        log.append(raw(b"\x01\x02\x03" * 40, 1, attributes=codec))
    good = log.append(raw(payload, 3, attributes=codec))
    assert (good.first_offset, good.last_offset) == (0, 2)
    assert [r.value for b in decode_batches(log.read(0, 1 << 20).read_bytes()) for r in b] == [
        b"v" * 100
    ] * 3


def test_scanning_first_gives_the_same_answers(log_dir: str) -> None:
    # The broker may decompress and walk a batch in a worker thread and hand the log the
    # result: the refusal (or the append) is the same, and the bound applies there too.
    from gregor.protocol.records.compression import compress
    from gregor.storage.validator import MAX_DECOMPRESSED_SIZE, scan_batches

    log = open_log(log_dir)
    bomb = raw(compress(4, record(0, b"k", b"\0" * (MAX_DECOMPRESSED_SIZE + 1))), 1, attributes=4)
    scanned = scan_batches(bomb)
    assert scanned is not None and isinstance(scanned[0].error, RecordTooLargeError)
    with pytest.raises(
        RecordTooLargeError,
        match=f"^The record batch decompresses to more than {MAX_DECOMPRESSED_SIZE} bytes$",
    ):
        log.append(bomb, scanned=scanned)
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        log.append(THREE_IN_ONE, scanned=scan_batches(THREE_IN_ONE))
    good = raw(compress(1, record(0, b"k", b"a") + record(1, b"k", b"b")), 2, attributes=1)
    assert log.append(good, scanned=scan_batches(good)).last_offset == 1
    assert os.path.getsize(log.active_segment.log_path) == len(good)
