"""Fuzz invariant: every reader decodes or raises ProtocolError, nothing else.

Random bytes rarely get past a CRC, so besides raw bytes the tests mutate valid batches and
message sets and then repair the CRC (or turn CRC checking off), to reach the record parser
and the codecs. Every prefix of valid input is fed too (a byte-by-byte arrival).
"""

import struct
import zlib

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import (
    MessageSetBuilder,
    RecordBatchBuilder,
    build_control_batch,
    count_records,
    decode_batch,
    decode_batches,
    decompress,
    downconvert,
    iter_batches,
    iter_legacy_messages,
    iter_record_set,
    iter_records,
    parse_control_record,
    read_header,
    upconvert,
    valid_prefix_size,
    validate_batches,
)
from gregor.protocol.records.batch import decode_records
from gregor.protocol.records.legacy import iter_shallow_messages, read_message

CAP = 1 << 20

READERS = {
    "read_header": lambda b: read_header(b),
    "iter_batches": lambda b: list(iter_batches(b)),
    "iter_batches_partial": lambda b: list(iter_batches(b, allow_partial_tail=True)),
    "validate_batches": lambda b: validate_batches(b),
    "count_records": lambda b: count_records(b),
    "decode_batch": lambda b: decode_batch(b, max_decompressed_size=CAP),
    "decode_batch_nocrc": lambda b: decode_batch(b, verify_crc=False, max_decompressed_size=CAP),
    "decode_batches": lambda b: decode_batches(
        b, verify_crc=False, allow_partial_tail=True, max_decompressed_size=CAP
    ),
    "iter_records": lambda b: list(iter_records(b, verify_crc=False, max_decompressed_size=CAP)),
    "decode_records": lambda b: decode_records(bytes(b), b[0] if b else 0),
    "control": lambda b: [parse_control_record(r) for r in iter_records(b, verify_crc=False)],
    "read_message": lambda b: read_message(b, verify_crc=False),
    "iter_shallow": lambda b: list(iter_shallow_messages(b, verify_crc=False)),
    "iter_legacy": lambda b: list(
        iter_legacy_messages(b, verify_crc=False, max_decompressed_size=CAP)
    ),
    "iter_legacy_partial": lambda b: list(
        iter_legacy_messages(b, allow_partial_tail=True, max_decompressed_size=CAP)
    ),
    "upconvert": lambda b: upconvert(b, verify_crc=False, max_decompressed_size=CAP),
    "downconvert0": lambda b: downconvert(b, 0, verify_crc=False, max_decompressed_size=CAP),
    "downconvert1": lambda b: downconvert(b, 1, verify_crc=False, max_decompressed_size=CAP),
    "iter_record_set": lambda b: list(
        iter_record_set(b, verify_crc=False, allow_partial_tail=True, max_decompressed_size=CAP)
    ),
    "valid_prefix_size": lambda b: valid_prefix_size(b),
    **{
        f"decompress{codec}": (lambda b, codec=codec: decompress(codec, b, max_size=CAP))
        for codec in range(8)
    },
}


def _run_all(data: bytes) -> None:
    for name, reader in READERS.items():
        for buf in (data, bytearray(data), memoryview(data)):
            try:
                reader(buf)
            except ProtocolError:
                pass
            except Exception as e:  # pragma: no cover - the failure being tested for
                raise AssertionError(f"{name} raised {type(e).__name__}: {e}") from e


def _seeds() -> list[bytes]:
    seeds = []
    for codec in range(5):
        b = RecordBatchBuilder(
            base_offset=3, compression=codec, producer_id=9, producer_epoch=1, base_sequence=0
        )
        for i in range(6):
            b.append(1000 - i * 3, b"k%d" % i if i % 2 else None, b"value-%d" % i, [("h", b"x")])
        seeds.append(b.build())
    seeds.append(build_control_batch(5, 0, True, 2, base_offset=9, timestamp=5))
    for magic in (0, 1):
        for codec in range(4):
            mb = MessageSetBuilder(magic, codec, base_offset=20)
            for i in range(4):
                mb.append(2000 + i, b"k", b"legacy-%d" % i)
            seeds.append(mb.build())
    return seeds


SEEDS = _seeds()


def _fix_checksums(buf: bytearray) -> bytearray:
    """Repair the outer CRC of a mutated v2 batch or legacy message, if its framing allows."""
    if len(buf) >= 21 and buf[16] == 2:
        buf[17:21] = struct.pack(">I", crc32c(bytes(buf[21:])))
    elif len(buf) >= 17 and buf[16] in (0, 1):
        (size,) = struct.unpack_from(">i", buf, 8)
        end = 12 + size
        if 16 <= end <= len(buf):
            buf[12:16] = struct.pack(">I", zlib.crc32(bytes(buf[16:end])))
    return buf


@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data):
    _run_all(data)


@pytest.mark.slow
@settings(max_examples=examples(300), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    seed=st.sampled_from(SEEDS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    fix=st.booleans(),
)
def test_mutated_valid_input(seed, edits, fix):
    buf = bytearray(seed)
    for where, value in edits:
        buf[where % len(buf)] = value
    if fix:
        _fix_checksums(buf)
    _run_all(bytes(buf))


@settings(max_examples=examples(100), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(seed=st.sampled_from(SEEDS), where=st.integers(0, 10_000), data=st.binary(max_size=12))
def test_inserted_and_deleted_bytes(seed, where, data):
    at = where % len(seed)
    _run_all(bytes(_fix_checksums(bytearray(seed[:at] + data + seed[at:]))))
    _run_all(bytes(_fix_checksums(bytearray(seed[:at] + seed[at + len(data) :]))))


@pytest.mark.parametrize("seed", range(len(SEEDS)))
def test_every_prefix(seed):
    data = SEEDS[seed]
    for n in range(len(data)):
        _run_all(data[:n])
    _run_all(data)


def test_seeds_decode_whole():
    # The seeds themselves are valid: each decodes to the records it was built with.
    for seed in SEEDS:
        assert len(list(iter_record_set(seed))) in (1, 4, 6)
