"""Records of the ``__transaction_state`` topic: one key per transactional id.

The topic is compacted: every state change of a transactional id appends a record keyed by
the id, so the newest record is the whole current state and a tombstone (null value) forgets
an expired id. Layouts, as Kafka writes them (big-endian, int16-length strings):

    key   = key version int16 (0) | transactional_id string
    value = value version int16 | producer_id int64 | producer_epoch int16
            | transaction_timeout_ms int32 | transaction_status int8
            | partitions: array of (topic string, array of int32) - nullable
            | last_update_timestamp_ms int64 | start_timestamp_ms int64

Value version 1 is the flexible form of the same fields (compact strings and arrays, a tag
buffer per struct) with tagged fields previous producer id (tag 0), next producer id (tag 1)
and client transaction version (tag 2), each written only when it is not its default (-1, -1,
0). Which one is written follows the cluster's ``transaction.version`` as Kafka's does
(``TransactionVersion.transactionLogValueVersion``): version 0 below level 1, version 1 from
level 1 on. Readers accept both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.primitives import Reader, Writer

KEY_VERSION = 0

TopicPartition = tuple[str, int]


@dataclass
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: int
    partitions: list[TopicPartition] = field(default_factory=list)
    last_update_timestamp_ms: int = -1
    start_timestamp_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(KEY_VERSION)
    w.string(transactional_id)
    return w.getvalue()


def decode_key(data: bytes | memoryview | None) -> str | None:
    """The transactional id of a key; None for a key version this coordinator does not know
    (skipped on load, as Kafka skips unknown record types)."""
    if data is None:
        raise ProtocolError("__transaction_state record without a key")
    r = Reader(data)
    version = r.int16()
    if version != KEY_VERSION:
        return None
    return r.string()


def _grouped(partitions: list[TopicPartition]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    return [(t, sorted(ps)) for t, ps in sorted(by_topic.items())]


def value_version(transaction_version: int) -> int:
    """The value version a cluster at ``transaction.version`` writes (0 or 1)."""
    return 1 if transaction_version >= 1 else 0


def encode_value(v: TxnLogValue, version: int = 0) -> bytes:
    """Value version 0 or 1 (see the module docstring)."""
    if version not in (0, 1):
        raise ValueError(f"no __transaction_state value version {version}")
    flexible = version >= 1
    w = Writer()
    w.int16(version)
    w.int64(v.producer_id)
    w.int16(v.producer_epoch)
    w.int32(v.transaction_timeout_ms)
    w.int8(v.state)

    def topic(entry: tuple[str, list[int]]) -> None:
        if flexible:
            w.compact_string(entry[0])
            w.compact_array(entry[1], w.int32)
            w.tagged_fields(None)
        else:
            w.string(entry[0])
            w.array(entry[1], w.int32)

    if flexible:
        w.compact_array(_grouped(v.partitions), topic)
    else:
        w.array(_grouped(v.partitions), topic)
    w.int64(v.last_update_timestamp_ms)
    w.int64(v.start_timestamp_ms)
    if flexible:
        tags: dict[int, bytes] = {}
        if v.previous_producer_id != -1:
            tags[0] = _packed(Writer.int64, v.previous_producer_id)
        if v.next_producer_id != -1:
            tags[1] = _packed(Writer.int64, v.next_producer_id)
        if v.client_transaction_version != 0:
            tags[2] = _packed(Writer.int16, v.client_transaction_version)
        w.tagged_fields(tags)
    return w.getvalue()


def _packed(write: Callable[[Writer, int], None], value: int) -> bytes:
    w = Writer()
    write(w, value)
    return w.getvalue()


def decode_value(data: bytes | memoryview | None) -> TxnLogValue | None:
    """None for a tombstone; ProtocolError for bytes that are not a value of version 0 or 1."""
    if data is None:
        return None
    r = Reader(data)
    version = r.int16()
    if version not in (0, 1):
        raise ProtocolError(f"unknown __transaction_state value version {version}")
    flexible = version >= 1
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout = r.int32()
    state = r.int8()
    partitions: list[TopicPartition] = []

    def topic() -> None:
        name = r.compact_string() if flexible else r.string()
        ids = r.compact_array(r.int32) if flexible else r.array(r.int32)
        partitions.extend((name, p) for p in ids or ())
        if flexible:
            r.tagged_fields()

    if flexible:
        r.compact_array(topic)
    else:
        r.array(topic)
    last_update = r.int64()
    start = r.int64()
    value = TxnLogValue(producer_id, producer_epoch, timeout, state, partitions, last_update, start)
    if flexible:
        tags = r.tagged_fields()
        if 0 in tags:
            value.previous_producer_id = Reader(tags[0]).int64()
        if 1 in tags:
            value.next_producer_id = Reader(tags[1]).int64()
        if 2 in tags:
            value.client_transaction_version = Reader(tags[2]).int16()
    return value
