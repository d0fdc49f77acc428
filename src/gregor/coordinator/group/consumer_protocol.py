"""The embedded "consumer" protocol: what consumers put in JoinGroup metadata and SyncGroup
assignments.

The coordinator passes these bytes through untouched; it only reads the subscribed topics
(OffsetDelete refuses to delete offsets of a topic an active group subscribes to, and offsets
of subscribed topics do not expire) and writes them when it describes a KIP-848 group through
the classic DescribeGroups API.

Subscription (every version starts with int16 version, then int32-counted topic strings;
later versions append user data, owned partitions, generation and rack, which we skip).
Assignment: int16 version, [topic string, [int32 partition]], nullable user data bytes.
"""

from __future__ import annotations

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.primitives import Reader, Writer

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes | memoryview) -> list[str]:
    """Topics named in a ConsumerProtocolSubscription; raises ProtocolError if malformed."""
    r = Reader(metadata)
    version = r.int16()
    if version < 0:
        raise ProtocolError(f"invalid consumer subscription version {version}")
    return r.array(r.string) or []


def encode_subscription(topics: list[str], version: int = 0) -> bytes:
    w = Writer()
    w.int16(version)
    w.array(sorted(topics), w.string)
    w.nullable_bytes(None)
    return w.getvalue()


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    w = Writer()
    w.int16(version)

    def topic(item: tuple[str, list[int]]) -> None:
        w.string(item[0])
        w.array(sorted(item[1]), w.int32)

    w.array(sorted(partitions.items()), topic)
    w.nullable_bytes(None)
    return w.getvalue()


def decode_assignment(data: bytes | memoryview) -> dict[str, list[int]]:
    r = Reader(data)
    version = r.int16()
    if version < 0:
        raise ProtocolError(f"invalid consumer assignment version {version}")
    out: dict[str, list[int]] = {}

    def topic() -> None:
        name = r.string()
        out[name] = r.array(r.int32) or []

    r.array(topic)
    return out
