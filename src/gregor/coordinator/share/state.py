"""Share-partition state (KIP-932) as the share coordinator keeps it in ``__share_group_state``.

One record per share partition (group id, topic id, partition), keyed by those three; the
topic is compacted, so the newest record is the whole state and a tombstone forgets the
partition. Layouts (big-endian, int16-length strings):

    key   = key version int16 (0) | group_id string | topic_id uuid | partition int32
    value = value version int16 (0) | snapshot_epoch int32 | state_epoch int32
            | leader_epoch int32 | start_offset int64
            | state_batches: int32 count of (first_offset int64 | last_offset int64
                                             | delivery_state int8 | delivery_count int16)

``start_offset`` is the share-partition start offset (SPSO): every offset below it is done.
A state batch records, for offsets at or above it, a state other than "available, never
delivered": ACQUIRED is not kept (a lock does not survive its leader), so the batches hold
AVAILABLE with a delivery count, ACKNOWLEDGED and ARCHIVED. Gregor's share-partition leader
writes its whole state each time, so each record is a snapshot (Kafka's ShareSnapshot); the
coordinator never merges deltas.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.primitives import Reader, Writer

KEY_VERSION = 0
VALUE_VERSION = 0

#: Record states on the wire (ReadShareGroupState / WriteShareGroupState ``delivery_state``).
AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4

ShareKey = tuple[str, uuid.UUID, int]  # (group id, topic id, partition)


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int = 0


def encode_key(key: ShareKey) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    w.string(key[0])
    w.uuid(key[1])
    w.int32(key[2])
    return w.getvalue()


def decode_key(data: bytes | memoryview | None) -> ShareKey | None:
    """None for a key version this coordinator does not know (skipped, as Kafka skips them)."""
    if data is None:
        raise ProtocolError("__share_group_state record without a key")
    r = Reader(data)
    if r.int16() != KEY_VERSION:
        return None
    return (r.string(), r.uuid(), r.int32())


def encode_value(s: ShareSnapshot) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    w.int32(s.snapshot_epoch)
    w.int32(s.state_epoch)
    w.int32(s.leader_epoch)
    w.int64(s.start_offset)
    w.int32(len(s.state_batches))
    for b in s.state_batches:
        w.int64(b.first_offset)
        w.int64(b.last_offset)
        w.int8(b.delivery_state)
        w.int16(b.delivery_count)
    return w.getvalue()


def decode_value(data: bytes | memoryview | None) -> ShareSnapshot | None:
    """None for a tombstone; ProtocolError for bytes that are not a version-0 value."""
    if data is None:
        return None
    r = Reader(data)
    if r.int16() != VALUE_VERSION:
        raise ProtocolError("unknown __share_group_state value version")
    snapshot_epoch, state_epoch, leader_epoch, start = r.int32(), r.int32(), r.int32(), r.int64()
    n = r.int32()
    if n < 0 or n > r.remaining // 19:
        raise ProtocolError(f"bad state batch count {n}")
    batches = tuple(StateBatch(r.int64(), r.int64(), r.int8(), r.int16()) for _ in range(n))
    return ShareSnapshot(state_epoch, leader_epoch, start, batches, snapshot_epoch)
