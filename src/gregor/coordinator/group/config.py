"""The group coordinator's settings (Kafka's broker keys) and its view of the topics."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol


class TopicsView(Protocol):
    """What the coordinator needs to know about topics (the broker's metadata image)."""

    def partition_count(self, topic: str) -> int | None: ...

    def topic_id(self, topic: str) -> uuid.UUID | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def topic_names(self) -> Iterable[str]:
        """Every non-internal topic (what a regex subscription can match)."""
        ...


#: Kafka 4.0's default for group.coordinator.append.linger.ms.
APPEND_LINGER_MS_DEFAULT = 5
#: A lingering batch is appended early once its records reach this many bytes (Kafka flushes
#: a full batch; __consumer_offsets takes batches up to message.max.bytes, about 1 MiB).
APPEND_MAX_BATCH_BYTES = 512 * 1024


@dataclass
class CoordinatorConfig:
    num_partitions: int = 50
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_group_size: int = 2**31 - 1
    consumer_heartbeat_interval_ms: int = 5000
    consumer_session_timeout_ms: int = 45000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_max_group_size: int = 2**31 - 1
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    new_member_join_timeout_ms: int = 300000
    # group.coordinator.append.linger.ms: how long writes wait to be appended together in one
    # batch. 0 here (a coordinator built directly, as in tests, writes at once); a broker
    # reads the key, whose default is Kafka 4.0's, 5 ms.
    append_linger_ms: int = 0

    @classmethod
    def from_props(cls, get: Callable[[str, Any], Any]) -> CoordinatorConfig:
        """Build from Kafka broker keys; ``get(key, default)`` reads the broker config."""

        def i(key: str, default: int) -> int:
            return int(get(key, default))

        assignors = get("group.consumer.assignors", "uniform,range")
        if isinstance(assignors, str):
            assignors = [a.strip() for a in assignors.split(",") if a.strip()]
        names = tuple(a.rsplit(".", 1)[-1].replace("Assignor", "").lower() for a in assignors)
        return cls(
            num_partitions=i("offsets.topic.num.partitions", 50),
            initial_rebalance_delay_ms=i("group.initial.rebalance.delay.ms", 3000),
            min_session_timeout_ms=i("group.min.session.timeout.ms", 6000),
            max_session_timeout_ms=i("group.max.session.timeout.ms", 1800000),
            max_group_size=i("group.max.size", 2**31 - 1),
            consumer_heartbeat_interval_ms=i("group.consumer.heartbeat.interval.ms", 5000),
            consumer_session_timeout_ms=i("group.consumer.session.timeout.ms", 45000),
            consumer_assignors=names or ("uniform", "range"),
            consumer_max_group_size=i("group.consumer.max.size", 2**31 - 1),
            offsets_retention_ms=i("offsets.retention.minutes", 10080) * 60000,
            offsets_retention_check_interval_ms=i("offsets.retention.check.interval.ms", 600000),
            offset_metadata_max_bytes=i("offset.metadata.max.bytes", 4096),
            append_linger_ms=i("group.coordinator.append.linger.ms", APPEND_LINGER_MS_DEFAULT),
        )
