"""ConsumerGroupHeartbeat v1 on top of the generated v0 codec.

The protocol guide the codecs are generated from stops at ConsumerGroupHeartbeat v0, but
librdkafka 2.16 (confluent-kafka's ``group.protocol=consumer``) will not use a broker without
v1. The difference is small (facts from Kafka's message definitions, as carried by kio 0.6.5's
schemas): the v1 request adds ``subscribed_topic_regex`` (compact nullable string) right after
``subscribed_topic_names``, and members generate their own member id (KIP-1082); the v1
response has exactly the v0 layout.

:func:`install` adds v1 request and response codecs to the generated classes' version tables
(``setdefault``: once the generator knows v1, its codecs win). The broker calls it when it
builds its group runtime, so only a broker process carries the extension; importing this
module changes nothing. Decoded v1 requests are :class:`ConsumerGroupHeartbeatRequestV1`,
which also carries the regex. The proper home of these facts is the code generator (the
guide lacks v1); this module is a stopgap until it learns versions beyond the guide.
"""

from __future__ import annotations

from typing import Any

from gregor.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from gregor.protocol.primitives import Reader, Writer

V1 = 1


class ConsumerGroupHeartbeatRequestV1(ConsumerGroupHeartbeatRequest):
    __slots__ = ("subscribed_topic_regex",)

    def __init__(self, *, subscribed_topic_regex: str | None = None, **fields: Any) -> None:
        super().__init__(**fields)
        self.subscribed_topic_regex = subscribed_topic_regex

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConsumerGroupHeartbeatRequestV1):
            return NotImplemented
        return super().__eq__(other) and self.subscribed_topic_regex == other.subscribed_topic_regex

    __hash__ = None  # type: ignore[assignment]


def decode_request_v1(buf: Any, pos: int) -> tuple[ConsumerGroupHeartbeatRequestV1, int]:
    r = Reader(buf, pos)
    group_id = r.compact_string()
    member_id = r.compact_string()
    member_epoch = r.int32()
    instance_id = r.compact_nullable_string()
    rack_id = r.compact_nullable_string()
    rebalance_timeout_ms = r.int32()
    names = r.compact_array(r.compact_string)
    regex = r.compact_nullable_string()
    assignor = r.compact_nullable_string()

    def topic_partitions() -> Any:
        tp = ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=r.uuid())
        tp.partitions = r.compact_array(r.int32) or []
        tp.unknown_tags = r.tagged_fields()
        return tp

    owned = r.compact_array(topic_partitions)
    tags = r.tagged_fields()
    req = ConsumerGroupHeartbeatRequestV1(
        group_id=group_id, member_id=member_id, member_epoch=member_epoch,
        instance_id=instance_id, rack_id=rack_id, rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=names, subscribed_topic_regex=regex, server_assignor=assignor,
        topic_partitions=owned, unknown_tags=tags,
    )
    return req, r.pos


def encode_request_v1(req: ConsumerGroupHeartbeatRequest) -> bytes:
    """The v1 request body (for tests and clients); ``subscribed_topic_regex`` if present."""
    w = Writer()
    w.compact_string(req.group_id)
    w.compact_string(req.member_id)
    w.int32(req.member_epoch)
    w.compact_nullable_string(req.instance_id)
    w.compact_nullable_string(req.rack_id)
    w.int32(req.rebalance_timeout_ms)
    w.compact_array(req.subscribed_topic_names, w.compact_string)
    w.compact_nullable_string(getattr(req, "subscribed_topic_regex", None))
    w.compact_nullable_string(req.server_assignor)

    def tp(t: Any) -> None:
        w.uuid(t.topic_id)
        w.compact_array(t.partitions, w.int32)
        w.tagged_fields(t.unknown_tags)

    w.compact_array(req.topic_partitions, tp)
    w.tagged_fields(req.unknown_tags)
    return w.getvalue()


def _encode_request_v1(req: ConsumerGroupHeartbeatRequest, append: Any) -> None:
    append(encode_request_v1(req))


def install() -> None:
    """Teach the generated ConsumerGroupHeartbeat classes v1 (idempotent)."""
    ConsumerGroupHeartbeatRequest._DECODERS.setdefault(V1, decode_request_v1)
    ConsumerGroupHeartbeatRequest._ENCODERS.setdefault(V1, _encode_request_v1)
    ConsumerGroupHeartbeatResponse._ENCODERS.setdefault(V1, ConsumerGroupHeartbeatResponse._ENCODERS[0])
    ConsumerGroupHeartbeatResponse._DECODERS.setdefault(V1, ConsumerGroupHeartbeatResponse._DECODERS[0])
