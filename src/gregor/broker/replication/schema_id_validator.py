"""Confluent Server's schema ID validation on produce: the leader refuses a batch of a topic
with ``confluent.value.schema.validation`` (or ``.key.``) on when a record's value (key) is not
null and not framed as Confluent's serializers frame it (magic byte 0, a 4-byte big-endian
schema id) with an id registered under the subject the topic's strategy names.

Theory of operation. ``ReplicaManager`` calls ``check`` on the leader after Kafka's own checks
of the request and before the append (followers copy the leader's log and never validate).
The topic's policy is read from the metadata image (``config.schema_validation.SchemaPolicy``);
a topic without one costs a dict lookup. The batches are walked with the compiled record walk
(compressed ones from the payload the request's scan already inflated), each checked key or
value's id is collected, the distinct ids are asked of ``SchemaLookup`` (cached, bounded), and
each record is judged: TopicNameStrategy's subject is ``<topic>-value`` (``-key``),
RecordNameStrategy's the schema's record name, TopicRecordNameStrategy's
``<topic>-<record name>``. Faults come back as Kafka's LogValidator reports record faults:
INVALID_RECORD with KIP-467's ``record_errors`` (the record's index in the request's records
and why) and the same summary message. A batch whose records do not walk is left to the log,
which refuses it with Kafka's own error.

The registry unreachable (or the lookup budget spent) refuses the batch with
REQUEST_TIMED_OUT, a retriable error: the producer retries, nothing is accepted unchecked. A
topic with validation on and no registry this broker can ask (``confluent.schema.registry.url``
unset and no ``schema.registry.listener``; creating or altering such a topic is refused, but a
broker may be restarted without its registry) refuses every batch with INVALID_RECORD.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gregor.broker.config.schema_validation import (
    RECORD_NAME,
    TOPIC_NAME,
    SchemaPolicy,
)
from gregor.broker.replication.schema_registry_lookup import (
    RegistryUnavailable,
    SchemaFacts,
    SchemaLookup,
)
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import RequestTimedOutError
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import batch_payload, decode_records
from gregor.protocol.records.header import HEADER_SIZE, iter_batches
from gregor.storage.errors import InvalidRecordError, RecordError
from gregor.storage.validator import MAX_DECOMPRESSED_SIZE, ScannedBatch
from gregor.storage.validator import _summary as record_errors_summary

Buffer = bytes | bytearray | memoryview
MAGIC_BYTE = 0
#: (record index, "key" or "value", schema id or -1 for a record not framed)
_Checked = tuple[int, str, int]


def schema_id_of(data: bytes) -> int:
    """The schema id of Confluent's wire format, or -1 when ``data`` is not framed so."""
    if len(data) < 5 or data[0] != MAGIC_BYTE:
        return -1
    return int.from_bytes(data[1:5], "big")


class SchemaIdValidator:
    """The leader's schema ID check of produced records (see the module's theory)."""

    def __init__(self, urls: tuple[str, ...], image: Callable[[], MetadataImage]) -> None:
        self.lookup = SchemaLookup(urls) if urls else None
        self._image = image

    async def close(self) -> None:
        if self.lookup is not None:
            await self.lookup.close()

    def policy(self, topic: str) -> SchemaPolicy | None:
        t = self._image().topic(topic)
        return None if t is None else SchemaPolicy.of(t.configs)

    async def check(
        self, topic: str, records: Buffer, scanned: Sequence[ScannedBatch] | None
    ) -> None:
        """Raise INVALID_RECORD (with record errors) or a retriable error; return if valid."""
        policy = self.policy(topic)
        if policy is None:
            return
        if self.lookup is None:
            raise InvalidRecordError(
                f"Topic {topic} has schema validation on but this broker has no schema registry "
                "(confluent.schema.registry.url)"
            )
        checked = _framing(records, scanned, policy)
        if checked is None:
            return  # the records do not walk: the log refuses them with Kafka's error
        named = any(s is not None and s != TOPIC_NAME for s in (policy.key, policy.value))
        ids = {schema_id for _, _, schema_id in checked if schema_id >= 0}
        try:
            facts = await self.lookup.facts(ids, named) if ids else {}
            errors, elsewhere = _judge(topic, policy, checked, facts)
            if elsewhere and self.lookup.forget_stale(elsewhere):
                facts = await self.lookup.facts(ids, named)
                errors, _ = _judge(topic, policy, checked, facts)
        except RegistryUnavailable as e:
            raise RequestTimedOutError(
                f"Schema validation of {topic} could not complete: {e}"
            ) from None
        if errors:
            raise InvalidRecordError(record_errors_summary(errors), errors)


def _framing(
    records: Buffer, scanned: Sequence[ScannedBatch] | None, policy: SchemaPolicy
) -> list[_Checked] | None:
    """(index, side, schema id) of every checked non-null key/value; None if a batch does not
    walk."""
    out: list[_Checked] = []
    index = 0
    mv = memoryview(records)
    try:
        for n, (pos, h) in enumerate(iter_batches(mv)):
            if h.is_control:
                continue
            payload: Buffer
            if scanned is not None and n < len(scanned) and h.compression:
                if scanned[n].error is not None:
                    return None
                payload = scanned[n].payload
            elif h.compression:
                payload = batch_payload(mv, pos, h, MAX_DECOMPRESSED_SIZE)
            else:
                payload = mv[pos + HEADER_SIZE : pos + h.size]
            for record in decode_records(payload, h.records_count):
                if policy.key is not None and record.key is not None:
                    out.append((index, "key", schema_id_of(record.key)))
                if policy.value is not None and record.value is not None:
                    out.append((index, "value", schema_id_of(record.value)))
                index += 1
    except ProtocolError:
        return None
    return out


def _judge(
    topic: str, policy: SchemaPolicy, checked: list[_Checked], facts: dict[int, SchemaFacts]
) -> tuple[list[RecordError], set[int]]:
    """The record errors, and the ids registered but not under the subject needed."""
    errors: list[RecordError] = []
    elsewhere: set[int] = set()
    for index, side, schema_id in checked:
        if schema_id < 0:
            errors.append(
                (
                    index,
                    f"The {side} has no schema id: it does not start with magic byte 0 and a "
                    "4-byte schema id (Confluent's wire format)",
                )
            )
            continue
        fact = facts[schema_id]
        if fact.subjects is None:
            errors.append((index, f"Schema id {schema_id} of the {side} is not registered"))
            continue
        strategy = policy.key if side == "key" else policy.value
        if strategy == TOPIC_NAME:
            subject: str | None = f"{topic}-{side}"
        elif fact.record_name is None:
            errors.append(
                (
                    index,
                    f"Schema id {schema_id} of the {side} has no record name, which {strategy} "
                    "needs",
                )
            )
            continue
        elif strategy == RECORD_NAME:
            subject = fact.record_name
        else:
            subject = f"{topic}-{fact.record_name}"
        if subject not in fact.subjects:
            elsewhere.add(schema_id)
            errors.append(
                (
                    index,
                    f"Schema id {schema_id} of the {side} is not registered under subject "
                    f"{subject} ({strategy})",
                )
            )
    return errors, elsewhere
