"""Topic administration: the one place that checks and makes topic changes.

Theory of operation. CreateTopics, DeleteTopics, CreatePartitions, the configs APIs,
auto-creation on Metadata and the coordinators' internal topics all come here. Each method
checks the request against Kafka's rules (legal and non-colliding names, partition counts,
replication factors, replica assignments over the live brokers, topic configs, internal
topics, ``delete.topic.enable``) and raises the generated Kafka exception for the first rule
broken; otherwise it makes the change through the metadata store. The store's publisher has
applied the change to this broker (logs created or deleted, configs set) by the time the
store call returns, and a structured log line records it. ``validate_only`` runs every check
and changes nothing.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec

from gregor.broker.common.events import log_event
from gregor.broker.common.topics import INTERNAL_TOPICS, assign_replicas, topic_name_error
from gregor.broker.config.broker_config import BrokerConfig
from gregor.broker.config.schema_validation import (
    KEY_LEVEL,
    KEY_VALIDATION,
    VALUE_LEVEL,
    VALUE_VALIDATION,
    SchemaPolicy,
)
from gregor.broker.config.topic_config_validator import validate_overrides
from gregor.broker.coordination.coordinator_runtime import InternalTopic
from gregor.cluster.image import MetadataImage, TopicImage
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    TopicDeletionDisabledError,
    UnknownTopicOrPartitionError,
)
from gregor.storage.config import LogConfig
from gregor.storage.errors import InvalidConfigError as StorageInvalidConfigError
from gregor.tables.settings import MODE as TABLE_MODE
from gregor.tables.settings import UPSERT as TABLE_UPSERT
from gregor.tables.settings import (
    TopicTableConfig,
    registry_error,
    shared_catalog_error,
    upsert_error,
)

log = logging.getLogger("gregor.broker.admin")


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    """A created (or, with validate_only, checked) topic."""

    name: str
    topic_id: uuid.UUID  # the zero UUID when nothing was created
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str]


ZERO_UUID = uuid.UUID(int=0)


class TopicAdmin:
    def __init__(
        self,
        config: BrokerConfig,
        store: MetadataStore,
        default_log_config: LogConfig,
        image: Callable[[], MetadataImage],
        clustered: bool = False,
    ) -> None:
        self.config = config
        self.clustered = clustered
        self.store = store
        self.default_log_config = default_log_config
        self._image = image

    # --- checks ---

    def exists(self, topic: str) -> bool:
        return self._image().topic(topic) is not None

    def validate_topic_configs(self, configs: Mapping[str, str], topic: str | None = None) -> None:
        """Raise INVALID_CONFIG for an unknown topic config, a bad value, or a config the
        log would not accept; ``topic``: the existing topic whose overrides ``configs`` replace
        (None: a new topic)."""
        try:
            validate_overrides(dict(configs))
            log_config = LogConfig.from_props(dict(configs), self.default_log_config)
            log_config.validate()
        except StorageInvalidConfigError as e:
            raise InvalidConfigError(str(e)) from None
        existing = None if topic is None else self._image().topic(topic)
        why = upsert_error(
            configs, log_config.compact, None if existing is None else existing.configs
        )
        if why is not None:
            value = configs.get(TABLE_UPSERT, "false")
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {TABLE_UPSERT}: {why}"
            )
        policy = SchemaPolicy.of(configs)
        if policy is not None and not self.config.schema_registry_urls:
            name = VALUE_VALIDATION if policy.value is not None else KEY_VALIDATION
            raise InvalidConfigError(
                f"Invalid value {configs[name]} for configuration {name}: this broker has no "
                "schema registry to validate against (set confluent.schema.registry.url, or "
                "schema.registry.listener to serve one)"
            )
        if policy is not None and policy.decodes:
            missing = [m for m in ("fastavro", "jsonschema") if find_spec(m) is None]
            if missing:
                name = VALUE_LEVEL if policy.decode_value else KEY_LEVEL
                raise InvalidConfigError(
                    f"Invalid value decode for configuration {name}: decoding needs "
                    f"{' and '.join(missing)}, the schema-registry extra "
                    "(pip install 'gregor[schema-registry]')"
                )
        why = registry_error(configs.get(TABLE_MODE, ""), bool(self.config.schema_registry_urls))
        if why is not None:
            raise InvalidConfigError(why)
        if self.clustered and TopicTableConfig.of(configs).enabled:
            why = shared_catalog_error(self.config.raw)
            if why is not None:
                raise InvalidConfigError(
                    f"Invalid value {configs[TABLE_MODE]} for configuration {TABLE_MODE}: {why}"
                )

    def _collision(self, name: str) -> str | None:
        """An existing topic whose name equals ``name`` once '.' and '_' are made the same
        (their metric names would clash, so Kafka refuses the second one)."""
        topics = self._image().topics
        if name in topics or topic_name_error(name) is not None:
            return None
        key = name.replace(".", "_")
        for other in topics:
            if other.replace(".", "_") == key:
                return other
        return None

    def _racks(self) -> dict[int, str | None]:
        return {node: b.rack for node, b in self._image().brokers.items()}

    def _check_assignment(
        self, assignments: Sequence[Sequence[int]], replication_factor: int | None
    ) -> None:
        brokers = self._image().live_broker_ids()
        for replicas in assignments:
            if (
                not replicas
                or len(set(replicas)) != len(replicas)
                or any(b not in brokers for b in replicas)
                or (replication_factor is not None and len(replicas) != replication_factor)
            ):
                raise InvalidReplicaAssignmentError(f"invalid replica assignment {list(replicas)}")
        if len({len(r) for r in assignments}) > 1:
            raise InvalidReplicaAssignmentError("partitions have different replica counts")

    # --- create ---

    async def create_topic(
        self,
        name: str,
        num_partitions: int | None,
        replication_factor: int | None,
        assignments: Sequence[Sequence[int]] | None = None,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
    ) -> CreatedTopic:
        """Create a topic. ``None`` partitions or replication factor mean the broker's
        defaults; an explicit assignment replaces both."""
        other = self._collision(name)
        if other is not None:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other}")
        why = topic_name_error(name)
        if why is not None:
            raise InvalidTopicError(why)
        if self.exists(name):
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        if assignments:
            self._check_assignment(assignments, None)
            layout = [list(r) for r in assignments]
        else:
            requested_partitions = num_partitions
            if num_partitions is None:
                num_partitions = int(self.config["num.partitions"])
            if replication_factor is None:
                replication_factor = int(self.config["default.replication.factor"])
            if num_partitions < 1:
                raise InvalidPartitionsError(
                    f"Number of partitions must be larger than 0 (got {requested_partitions})."
                )
            if replication_factor < 1:
                raise InvalidReplicationFactorError(
                    f"Replication factor must be larger than 0 (got {replication_factor})."
                )
            brokers = self._image().live_broker_ids()
            if replication_factor > len(brokers):
                raise InvalidReplicationFactorError(
                    f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
                )
            # A random first broker, as Kafka does, so one-partition topics do not all lead
            # on the same broker.
            start = random.randrange(len(brokers)) if brokers else 0
            layout = assign_replicas(
                num_partitions, replication_factor, brokers, start=start, racks=self._racks()
            )
        overrides = dict(configs or {})
        self.validate_topic_configs(overrides)
        if validate_only:
            return CreatedTopic(name, ZERO_UUID, len(layout), len(layout[0]), overrides)
        topic = await self.store.create_topic(
            name, layout, overrides, internal=name in INTERNAL_TOPICS
        )
        log_event(
            log,
            "topic.created",
            topic=name,
            topic_id=topic.topic_id,
            partitions=len(topic.partitions),
            replication_factor=len(layout[0]),
            configs=",".join(f"{k}={v}" for k, v in sorted(overrides.items())),
        )
        return CreatedTopic(name, topic.topic_id, len(layout), len(layout[0]), overrides)

    async def auto_create(self, name: str) -> TopicImage | None:
        """Create ``name`` with the broker's defaults (Metadata auto-creation); returns the
        topic, also when another request created it first."""
        try:
            await self.create_topic(name, None, None)
        except TopicAlreadyExistsError:
            pass
        return self._image().topic(name)

    async def create_internal_topic(self, topic: InternalTopic) -> None:
        """A coordinator's internal topic (``TopicCreator``)."""
        try:
            await self.create_topic(
                topic.name, topic.num_partitions, topic.replication_factor, configs=topic.configs
            )
        except TopicAlreadyExistsError:
            pass

    # --- delete ---

    async def delete_topic(self, name: str) -> TopicImage:
        topic = self._image().topic(name)
        if topic is None:
            raise UnknownTopicOrPartitionError("This server does not host this topic.")
        if not self.config["delete.topic.enable"]:
            raise TopicDeletionDisabledError(
                "Topic deletion is disabled (delete.topic.enable=false)."
            )
        if topic.internal or name in INTERNAL_TOPICS:
            raise InvalidRequestError(f"Topic '{name}' is an internal topic and cannot be deleted.")
        deleted = await self.store.delete_topic(name)
        log_event(log, "topic.deleted", topic=name, topic_id=deleted.topic_id)
        return deleted

    # --- partitions ---

    async def add_partitions(
        self,
        name: str,
        new_total: int,
        assignments: Sequence[Sequence[int]] | None,
        validate_only: bool = False,
    ) -> None:
        topic = self._image().topic(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        if topic.internal or name in INTERNAL_TOPICS:
            raise InvalidRequestError(
                f"Topic '{name}' is an internal topic; its partitions cannot be changed."
            )
        current = len(topic.partitions)
        if new_total <= current:
            raise InvalidPartitionsError(
                f"Topic currently has {current} partitions, which is higher than or equal to "
                f"the requested {new_total}."
            )
        rf = len(topic.partitions[0].target_replicas)
        if assignments:
            if len(assignments) != new_total - current:
                raise InvalidReplicaAssignmentError("assignment count does not match the increase")
            self._check_assignment(assignments, rf)
            layout = [list(r) for r in assignments]
        else:
            layout = assign_replicas(
                new_total - current,
                rf,
                self._image().live_broker_ids(),
                start=current,
                racks=self._racks(),
            )
        if validate_only:
            return
        await self.store.add_partitions(name, layout)
        log_event(log, "topic.partitions_added", topic=name, partitions=new_total)

    # --- configs ---

    async def set_config_resource(
        self, resource_type: int, name: str, configs: Mapping[str, str]
    ) -> None:
        """Store the whole override set of a non-topic config resource (BROKER, GROUP)."""
        await self.store.alter_config_resource(resource_type, name, configs)

    async def set_topic_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace ``name``'s whole override set (already validated by the caller too)."""
        self.validate_topic_configs(configs, name)
        await self.store.alter_topic_configs(name, configs)
        log_event(
            log,
            "topic.config_changed",
            topic=name,
            configs=",".join(f"{k}={v}" for k, v in sorted(configs.items())),
        )
