"""The ``_schemas`` topic as the registry's store: a reader that applies every record to the
state, and the writer's appends, each answered only once read back.

Theory of operation. ``KafkaStore.start`` makes sure the topic exists (one partition,
``cleanup.policy=compact``; an existing topic with more than one partition or another cleanup
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

One registry process is the writer: the registry serializes writes and allocates ids from the
state's highest id. A cluster-wide election of the writer (with forwarding from the others) is
a later part of issue 38; until then run one ``gregor schema-registry`` per ``_schemas`` topic.
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

    async def _started(self) -> None:
        """Read to the end found at start: prove it with a NOOP written and read back."""
        await self.write(Key("NOOP"), None)
        log.info(
            "schema registry store ready: %s at offset %d, %d subjects, highest id %d",
            self.topic,
            self._position,
            len(self.state.subjects),
            self.state.max_id,
        )

    async def _ensure_topic(self) -> None:
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
