"""The ``_schemas`` topic as the registry's store: a reader that applies every record to the
state, and the writer's appends, each answered only once read back.

Theory of operation. ``KafkaStore.start`` makes sure the topic exists (one partition,
``cleanup.policy=compact``, the replication factor waited for while a cluster's brokers are
still too few, up to ``timeout_s``; an existing topic with more than one partition or another cleanup
policy stops the registry, since its order or its history would be lost), assigns its only
partition to a consumer without a group, seeks to the beginning and reads up to the end offset
it found, applying each record to ``RegistryState``. A reader task then goes on reading as
records arrive, so registries sharing the topic converge.

``write`` appends one record with a producer using ``acks=all``, learns the
record's offset from the broker's answer, and waits until the reader has applied that offset:
Confluent's rule that a write is answered only once it has been read back, so the answer and
every later read see it. ``start`` does the same with a NOOP record, which proves the reader has
seen everything written before this registry started. A write the broker does not confirm,
or the reader does not see, within ``timeout_s`` is a store error (50001/50002), never a
half-answered success.

Every registry reads the topic; one writes it. The registries sharing a topic elect the
writer through a Kafka group (``election``): only the elected writer allocates ids and appends
schemas, configs and modes, the others forward such requests to it (``forwarding``). A newly
elected writer first writes a NOOP and waits for it (``sync``), so it has applied everything
the previous writer appended before it allocates an id. A non-writer that forwarded a write
waits with ``catch_up`` until its reader has reached the end offset the topic had after the
writer's answer, so its own later reads see the write. NOOPs (a registry's start, a writer's
election) change no state and any registry may append them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from gregor.client import AIOAdminClient, AIOConsumer, AIOProducer, NewTopic, TopicPartition
from gregor.client import KafkaError as ClientKafkaError
from gregor.schema_registry import errors
from gregor.schema_registry.records import Key, decode_key
from gregor.schema_registry.state import RegistryState

log = logging.getLogger("gregor.schema_registry")


class StoreConfigError(Exception):
    """The topic cannot serve as the store (wrong partitions or cleanup policy)."""


class _TooFewBrokers(Exception):
    """The topic's replication factor is over the live brokers (for now)."""


class KafkaStore:
    def __init__(
        self,
        client_config: dict[str, Any],
        state: RegistryState,
        *,
        topic: str = "_schemas",
        replication_factor: int = -1,
        timeout_s: float = 30.0,
    ) -> None:
        self.client_config = dict(client_config)
        self.state = state
        self.topic = topic
        self.replication_factor = replication_factor
        self.timeout_s = timeout_s
        self.tp = TopicPartition(topic, 0)
        self._producer: AIOProducer | None = None
        self._consumer: AIOConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self._position = 0
        self._progress = asyncio.Condition()
        self._closed = False

    @property
    def position(self) -> int:
        """The next offset the reader will apply."""
        return self._position

    async def start(self) -> None:
        await self._ensure_topic()
        self._consumer = AIOConsumer(
            {**self.client_config, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        )
        await self._consumer.start()
        self._consumer.assign([self.tp])
        await self._consumer.seek_to_beginning(self.tp)
        # One record in flight at a time (each write waits for its read-back), so order needs no
        # idempotence; without it the registry needs no producer id (nor the IDEMPOTENT_WRITE
        # ACL, nor a transaction coordinator on a new cluster). A retried write that lands
        # twice is the same record twice: applying it again changes nothing.
        self._producer = AIOProducer(
            {
                **self.client_config,
                "acks": "all",
                "linger.ms": 0,
                "enable.idempotence": False,
                "max.in.flight.requests.per.connection": 1,
            }
        )
        await self._producer.start()
        self._reader = asyncio.get_running_loop().create_task(
            self._read_loop(), name="schema-registry-reader"
        )
        end = (await self._consumer.end_offsets([self.tp]))[self.tp]
        await self.wait_for(end - 1)
        await self._started()

    async def sync(self) -> None:
        """Until everything appended before now is applied: a NOOP written and read back."""
        await self.write(Key("NOOP"), None)

    async def catch_up(self) -> None:
        """Until the reader has applied everything up to the topic's end offset as it is now."""
        assert self._consumer is not None
        try:
            end = (await asyncio.wait_for(self._consumer.end_offsets([self.tp]), self.timeout_s))[
                self.tp
            ]
        except TimeoutError:
            raise errors.store_timeout("the end offset was not known in time") from None
        except ClientKafkaError as e:
            raise errors.store_error(str(e) or type(e).__name__) from None
        await self.wait_for(end - 1)

    async def _started(self) -> None:
        """Read to the end found at start: prove it with a NOOP written and read back."""
        await self.sync()
        log.info(
            "schema registry store ready: %s at offset %d, %d subjects, highest id %d",
            self.topic,
            self._position,
            len(self.state.subjects),
            self.state.max_id,
        )

    async def _ensure_topic(self) -> None:
        """The topic, created if missing. A cluster's brokers starting one by one may be too
        few for the replication factor yet: the creation is tried again until ``timeout_s``."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return await self._ensure_topic_once(waited=time.monotonic() >= deadline)
            except _TooFewBrokers as e:
                log.info("schema registry: waiting for brokers to create %s: %s", self.topic, e)
                await asyncio.sleep(0.5)

    async def _ensure_topic_once(self, waited: bool) -> None:
        async with AIOAdminClient(self.client_config) as admin:
            found = (await admin.describe_topics([self.topic])).get(self.topic)
            if (
                isinstance(found, ClientKafkaError)
                and getattr(found, "name", "") != "UNKNOWN_TOPIC_OR_PARTITION"
            ):
                raise found  # not allowed to see it, for one: say so rather than try to create it
            if not isinstance(found, ClientKafkaError) and found is not None:
                if len(found.partitions) != 1:
                    raise StoreConfigError(
                        f"the topic {self.topic} has {len(found.partitions)} partitions; the schema registry "
                        "needs exactly one (its records are ordered)"
                    )
            else:
                result = await admin.create_topics(
                    [
                        NewTopic(
                            self.topic, 1, self.replication_factor, {"cleanup.policy": "compact"}
                        )
                    ]
                )
                err = result.get(self.topic)
                if getattr(err, "name", "") == "INVALID_REPLICATION_FACTOR" and not waited:
                    raise _TooFewBrokers(str(err))
                if err is not None and getattr(err, "name", "") != "TOPIC_ALREADY_EXISTS":
                    raise err
                log.info("created the schema registry topic %s", self.topic)
            configs = (await admin.describe_configs([("topic", self.topic)])).get((2, self.topic))
            if isinstance(configs, dict):
                policy = configs.get("cleanup.policy")
                if (
                    policy is not None
                    and policy.value is not None
                    and "compact" not in policy.value
                ):
                    raise StoreConfigError(
                        f"the topic {self.topic} has cleanup.policy={policy.value}; the schema registry needs "
                        "compact (deleting old records would lose schemas)"
                    )

    async def close(self) -> None:
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass
        if self._producer is not None:
            await self._producer.close()
        if self._consumer is not None:
            await self._consumer.close(autocommit=False)

    async def _read_loop(self) -> None:
        assert self._consumer is not None
        consumer = self._consumer
        while not self._closed:
            try:
                records = await consumer.poll(timeout_ms=500)
                for rec in records:
                    self._apply(rec.key, rec.value)
                    self._position = rec.offset + 1
                position = await consumer.position(self.tp)
                if position is not None and position > self._position:
                    self._position = position  # past compacted gaps and control records
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the reader must outlive a broker's bad moment
                log.warning("schema registry reader: %s; retrying", e)
                await asyncio.sleep(1.0)
                continue
            async with self._progress:
                self._progress.notify_all()

    def _apply(self, key: bytes | None, value: bytes | None) -> None:
        self.state.apply(decode_key(key), value)

    async def wait_for(self, offset: int) -> None:
        """Until the reader has applied ``offset`` (a store timeout error otherwise)."""
        deadline = time.monotonic() + self.timeout_s
        async with self._progress:
            while self._position <= offset:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise errors.store_timeout(
                        f"the reader is at offset {self._position}, waiting for {offset}"
                    )
                try:  # asyncio.timeout keeps a cancellation that races the wake-up (3.11)
                    async with asyncio.timeout(left):
                        await self._progress.wait()
                except TimeoutError:
                    pass

    async def write(self, key: Key | bytes, value: bytes | None) -> int:
        """Append a record, wait until it is read back; its offset."""
        assert self._producer is not None
        raw_key = key if isinstance(key, bytes) else key.encode()
        try:
            meta = await asyncio.wait_for(
                self._producer.send_and_wait(self.topic, value=value, key=raw_key, partition=0),
                self.timeout_s,
            )
        except TimeoutError:
            raise errors.store_timeout("the broker did not confirm the write") from None
        except ClientKafkaError as e:
            raise errors.store_error(str(e) or type(e).__name__) from None
        await self.wait_for(meta.offset)
        return int(meta.offset)
