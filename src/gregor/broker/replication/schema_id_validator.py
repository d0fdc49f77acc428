"""Confluent Server's schema ID validation on produce: the leader refuses a batch of a topic
with ``confluent.value.schema.validation`` (or ``.key.``) on when a record's value (key) is not
null and not framed as Confluent's serializers frame it (magic byte 0, a 4-byte big-endian
schema id) with an id registered under the subject the topic's strategy names.

Theory of operation. ``ReplicaManager`` calls ``check`` on the leader after Kafka's own checks
of the request and before the append (followers copy the leader's log and never validate).
The topic's policy is read from the metadata image (``config.schema_validation.SchemaPolicy``);
a topic without one costs a dict lookup. The batches are walked with the compiled record walk
(``walk.schema_ids``: one id per record, no objects per record; compressed batches from the
payload the request's scan already inflated), the distinct ids are asked of ``SchemaLookup``
(cached, bounded), and each distinct (side, id) is judged once: TopicNameStrategy's subject
is ``<topic>-value`` (``-key``), RecordNameStrategy's the schema's record name,
TopicRecordNameStrategy's ``<topic>-<record name>``; only a batch with a fault is walked record by record in Python, to
name them. Faults come back as Kafka's LogValidator reports record faults:
INVALID_RECORD with KIP-467's ``record_errors`` (the record's index in the request's records
and why) and the same summary message. A batch whose records do not walk is left to the log,
which refuses it with Kafka's own error.

With ``gregor.value.schema.validation.level=decode`` (or ``.key.``) the side's payloads are
then decoded against their ids' schemas (``schema_decoder``), after every cheaper check has
passed (each batch's CRC, checked here at this level; the record walk; the ids): the walk
checks each record's payload with the decoder cached with its id's facts
(``walk.check_payloads``: Avro in place in the compiled walk, no object per record), and a payload that does not decode completely is a record fault like a bad id, with the
decoder's reason. A batch whose CRC does not match is not decoded (the log refuses it with
CORRUPT_MESSAGE); a request of more than ``INLINE_DECODE_BYTES`` is decoded in a worker thread.
Only the leader decodes, as it alone validates.

The registry unreachable (or the lookup budget spent) refuses the batch with
REQUEST_TIMED_OUT, a retriable error: the producer retries, nothing is accepted unchecked. A
topic with validation on and no registry this broker can ask (``confluent.schema.registry.url``
unset and no ``schema.registry.listener``; creating or altering such a topic is refused, but a
broker may be restarted without its registry) refuses every batch with INVALID_RECORD.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from gregor.broker.config.schema_registry_security import RegistryClient
from gregor.broker.config.schema_validation import (
    RECORD_NAME,
    TOPIC_NAME,
    SchemaPolicy,
)
from gregor.broker.replication.schema_decoder import PayloadDecoder
from gregor.broker.replication.schema_registry_lookup import (
    RegistryUnavailable,
    SchemaFacts,
    SchemaLookup,
)
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import RequestTimedOutError
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.batch import batch_payload
from gregor.protocol.records.header import HEADER_SIZE, crc_ok, iter_batches
from gregor.protocol.records.walk import check_payloads, schema_ids
from gregor.storage.errors import InvalidRecordError, RecordError
from gregor.storage.validator import MAX_DECOMPRESSED_SIZE, ScannedBatch
from gregor.storage.validator import _summary as record_errors_summary

Buffer = bytes | bytearray | memoryview
NULL = -2  # walk.schema_ids' null key/value
UNFRAMED = -1  # ... and its bytes not in Confluent's wire format
#: a request's records decoded (level ``decode``) on the event loop up to this many bytes (about
#: a millisecond of Avro); more in a worker thread, as the request's scan decompresses them
INLINE_DECODE_BYTES = 1 << 20
#: the ids of one side of one batch: (side, index of its first record, id per record, the
#: batch's records and their count)
_Side = tuple[str, int, list[int], Buffer, int]


class SchemaIdValidator:
    """The leader's schema ID check of produced records (see the module's theory)."""

    def __init__(
        self,
        urls: tuple[str, ...],
        image: Callable[[], MetadataImage],
        client: RegistryClient | None = None,
    ) -> None:
        client = client or RegistryClient()
        self.lookup = SchemaLookup(urls, client.login, client.ssl_context) if urls else None
        self._image = image

    def served_at(self, url: str) -> None:
        """The registry beside this broker listens at ``url``: asked instead of the configured
        ``schema.registry.listener`` address, whose port may be 0 (any free one)."""
        if self.lookup is not None:
            self.lookup.urls = (url,)

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
        sides = _schema_ids(records, scanned, policy)
        if sides is None:
            return  # the records do not walk: the log refuses them with Kafka's error
        wanted: dict[tuple[str, int], None] = {}
        for side, _, side_ids, _, _ in sides:
            for schema_id in set(side_ids):
                wanted[(side, schema_id)] = None
        ids = {schema_id for _, schema_id in wanted if schema_id >= 0}
        named = any(s is not None and s != TOPIC_NAME for s in (policy.key, policy.value))
        try:
            facts = await self.lookup.facts(ids, named, policy.decodes) if ids else {}
            verdicts = {k: _verdict(topic, policy, k[0], k[1], facts) for k in wanted}
            elsewhere = {k[1] for k, v in verdicts.items() if v is not None and v[1]}
            if elsewhere and self.lookup.forget_stale(elsewhere):
                facts = await self.lookup.facts(ids, named, policy.decodes)
                verdicts = {k: _verdict(topic, policy, k[0], k[1], facts) for k in wanted}
        except RegistryUnavailable as e:
            raise RequestTimedOutError(
                f"Schema validation of {topic} could not complete: {e}"
            ) from None
        if all(v is None for v in verdicts.values()):
            if policy.decodes:
                if sum(len(side[3]) for side in sides) <= INLINE_DECODE_BYTES:
                    _decode(policy, sides, facts)
                else:  # a large request: the loop keeps serving between the GIL's turns
                    loop = asyncio.get_running_loop()
                    await loop.run_in_executor(None, _decode, policy, sides, facts)
            return
        errors: list[RecordError] = []
        for side, first, side_ids, _, _ in sides:
            for i, schema_id in enumerate(side_ids):
                verdict = verdicts[(side, schema_id)]
                if verdict is not None:
                    errors.append((first + i, verdict[0]))
        errors.sort(key=lambda e: e[0])
        raise InvalidRecordError(record_errors_summary(errors), errors)


def _schema_ids(
    records: Buffer, scanned: Sequence[ScannedBatch] | None, policy: SchemaPolicy
) -> list[_Side] | None:
    """The schema ids of each checked side of each batch (the compiled record walk); None if a
    batch does not walk."""
    out: list[_Side] = []
    index = 0
    mv = memoryview(records)
    try:
        for n, (pos, h) in enumerate(iter_batches(mv)):
            if h.is_control:
                continue
            if policy.decodes and not crc_ok(mv, pos, h):
                return None  # decode nothing of a corrupt batch: the log refuses it
            payload: Buffer
            if scanned is not None and n < len(scanned) and h.compression:
                if scanned[n].error is not None:
                    return None
                payload = scanned[n].payload
            elif h.compression:
                payload = batch_payload(mv, pos, h, MAX_DECOMPRESSED_SIZE)
            else:
                payload = mv[pos + HEADER_SIZE : pos + h.size]
            count = h.records_count
            if policy.key is not None:
                out.append(("key", index, schema_ids(payload, count, False), payload, count))
            if policy.value is not None:
                out.append(("value", index, schema_ids(payload, count, True), payload, count))
            index += h.records_count
    except ProtocolError:
        return None
    return out


def _decode(policy: SchemaPolicy, sides: list[_Side], facts: dict[int, SchemaFacts]) -> None:
    """Decode the payloads of each side at level ``decode`` (their ids all valid); raise
    INVALID_RECORD naming each record that does not decode."""
    errors: list[RecordError] = []
    for side, first, side_ids, records, count in sides:
        if not (policy.decode_value if side == "value" else policy.decode_key):
            continue
        decoders: dict[int, PayloadDecoder] = {}
        for schema_id in set(side_ids):
            if schema_id >= 0:
                decoder = facts[schema_id].decoder
                if decoder is None:  # not asked for (cannot happen at level decode): fail closed
                    raise InvalidRecordError(f"Schema id {schema_id} has no decoder")
                decoders[schema_id] = decoder
        if not decoders:
            continue
        checks = {i: d.walker or d.check for i, d in decoders.items()}
        for i, schema_id, why in check_payloads(records, count, side == "value", side_ids, checks):
            errors.append((first + i, f"The {side} {decoders[schema_id].reason(why)}"))
    if errors:
        errors.sort(key=lambda e: e[0])
        raise InvalidRecordError(record_errors_summary(errors), errors)


def _verdict(
    topic: str, policy: SchemaPolicy, side: str, schema_id: int, facts: dict[int, SchemaFacts]
) -> tuple[str, bool] | None:
    """None if a record's ``side`` with ``schema_id`` is valid, else (why, whether the id is
    registered but not under the subject needed)."""
    if schema_id == NULL:
        return None
    if schema_id == UNFRAMED:
        return (
            f"The {side} has no schema id: it does not start with magic byte 0 and a 4-byte "
            "schema id (Confluent's wire format)",
            False,
        )
    fact = facts[schema_id]
    if fact.subjects is None:
        return f"Schema id {schema_id} of the {side} is not registered", False
    strategy = policy.key if side == "key" else policy.value
    if strategy == TOPIC_NAME:
        subject = f"{topic}-{side}"
    elif fact.record_name is None:
        return (
            f"Schema id {schema_id} of the {side} has no record name, which {strategy} needs",
            False,
        )
    elif strategy == RECORD_NAME:
        subject = fact.record_name
    else:
        subject = f"{topic}-{fact.record_name}"
    if subject in fact.subjects:
        return None
    return (
        f"Schema id {schema_id} of the {side} is not registered under subject {subject} "
        f"({strategy})",
        True,
    )
