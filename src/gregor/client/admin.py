"""The asyncio admin client: topics and partitions, configs, groups, records, cluster, ACLs
and SCRAM credentials.

Each call sends the API to the broker that owns the answer (the controller for topic changes,
the group coordinator for group calls, partition leaders for DeleteRecords and ListOffsets,
any broker otherwise) and returns plain Python values. Per-item failures come back as
exception objects in the result dict rather than raising, so one bad topic does not hide the
others' results (``raise_on_error=True`` raises the first instead).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gregor.client.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from gregor.client.consumer.consumer import EARLIEST, LATEST, list_offsets
from gregor.client.consumer.group import GroupBase, OffsetAndMetadata
from gregor.client.core.client import KafkaClient
from gregor.client.core.config import Config
from gregor.client.core.conn import CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION
from gregor.client.core.errors import UnsupportedForBrokerError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.client.producer.transaction_manager import TransactionHandle, end_transaction
from gregor.protocol import messages
from gregor.protocol.errors import KafkaError
from gregor.protocol.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE

TOPIC = 2
BROKER = 4
#: Config resource types (Kafka's ConfigResource.Type, not the ACL resource types).
CLIENT_METRICS = 16
RESOURCE_TYPES = {"topic": TOPIC, "broker": BROKER, "broker_logger": 8, "client_metrics": CLIENT_METRICS, "group": 32}
CONFIG_SOURCES = {
    0: "UNKNOWN",
    1: "DYNAMIC_TOPIC_CONFIG",
    2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    4: "STATIC_BROKER_CONFIG",
    5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG",
    7: "CLIENT_METRICS_CONFIG",
    8: "GROUP_CONFIG",
}
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass
class DelegationToken:
    """A delegation token as the broker describes it; log in with SCRAM, user name
    ``token_id``, password ``password`` (the HMAC in base64) and ``sasl.scram.tokenauth``."""

    token_id: str
    hmac: bytes
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    @property
    def password(self) -> str:
        return base64.b64encode(self.hmac).decode()


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    assignments: dict[int, list[int]] | None = None


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: str
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: list[tuple[str, str | None, str]] = field(default_factory=list)


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass
class TopicDescription:
    name: str
    topic_id: Any
    is_internal: bool
    partitions: list[PartitionInfo]


@dataclass
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: set[TopicPartition]


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]
    error: KafkaError | None = None


@dataclass
class ShareMemberDescription:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: list[str]
    assignment: set[TopicPartition]


@dataclass
class ShareGroupDescription:
    """ShareGroupDescribe's answer for one share group (KIP-932)."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: list[ShareMemberDescription]


@dataclass
class FeatureMetadata:
    """Kafka's ``FeatureMetadata``: finalized levels and supported ranges by feature name."""

    finalized: dict[str, tuple[int, int]]
    supported: dict[str, tuple[int, int]]
    finalized_epoch: int | None


@dataclass
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[tuple[int, str, int, str | None]]


def _err(code: int, message: str | None = None) -> KafkaError | None:
    return error_for_code(code)(message) if code else None


def _check(results: Mapping[Any, Any], raise_on_error: bool) -> None:
    if raise_on_error:
        for v in results.values():
            if isinstance(v, BaseException):
                raise v


class AIOAdminClient:
    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.config = Config("admin", config, **kwargs)
        self._client = KafkaClient(self.config)
        self._timeout_ms = self.config["default.api.timeout.ms"]

    async def start(self) -> AIOAdminClient:
        await self._client.start()
        return self

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> AIOAdminClient:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @property
    def client(self) -> KafkaClient:
        return self._client

    async def _controller(self) -> Any:
        node = self._client.cluster.controller_id
        if node >= 0 and node in self._client.cluster.brokers:
            try:
                return await self._client.connection(node)
            except KafkaError:
                pass
        return await self._client.any_connection()

    async def _any(self) -> Any:
        return await self._client.any_connection()

    # --- topics ---

    async def create_topics(
        self, topics: Iterable[NewTopic], *, validate_only: bool = False, raise_on_error: bool = False
    ) -> dict[str, KafkaError | None]:
        topics = list(topics)
        conn = await self._controller()
        version = conn.version(messages.CreateTopicsRequest.API_KEY)
        req_topics = []
        for t in topics:
            np, rf = t.num_partitions, t.replication_factor
            if version < 4:
                np = 1 if np < 0 else np
                rf = 1 if rf < 0 else rf
            assignments = [
                messages.CreateTopicsRequest.Topics.Assignments(partition_index=p, broker_ids=list(b))
                for p, b in sorted((t.assignments or {}).items())
            ]
            if assignments:
                np, rf = -1, -1
            req_topics.append(
                messages.CreateTopicsRequest.Topics(
                    name=t.name,
                    num_partitions=np,
                    replication_factor=rf,
                    assignments=assignments,
                    configs=[messages.CreateTopicsRequest.Topics.Configs(name=k, value=str(v)) for k, v in t.configs.items()],
                )
            )
        req = messages.CreateTopicsRequest(topics=req_topics, timeout_ms=self._timeout_ms, validate_only=validate_only)
        resp = await conn.send(req, version)
        out = {t.name: _err(t.error_code, t.error_message) for t in resp.topics}
        self._client.request_update()
        _check(out, raise_on_error)
        return out

    async def delete_topics(
        self, names: Iterable[str], *, raise_on_error: bool = False
    ) -> dict[str, KafkaError | None]:
        names = list(names)
        conn = await self._controller()
        version = conn.version(messages.DeleteTopicsRequest.API_KEY)
        if version >= 6:
            req = messages.DeleteTopicsRequest(
                topics=[messages.DeleteTopicsRequest.Topics(name=n) for n in names], timeout_ms=self._timeout_ms
            )
        else:
            req = messages.DeleteTopicsRequest(topic_names=names, timeout_ms=self._timeout_ms)
        resp = await conn.send(req, version)
        out = {r.name: _err(r.error_code, r.error_message) for r in resp.responses}
        self._client.request_update()
        _check(out, raise_on_error)
        return out

    async def create_partitions(
        self,
        counts: Mapping[str, int],
        *,
        assignments: Mapping[str, list[list[int]]] | None = None,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[str, KafkaError | None]:
        conn = await self._controller()
        req = messages.CreatePartitionsRequest(
            topics=[
                messages.CreatePartitionsRequest.Topics(
                    name=t,
                    count=n,
                    assignments=[
                        messages.CreatePartitionsRequest.Topics.Assignments(broker_ids=b)
                        for b in (assignments or {}).get(t, [])
                    ]
                    or None,
                )
                for t, n in counts.items()
            ],
            timeout_ms=self._timeout_ms,
            validate_only=validate_only,
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        out = {r.name: _err(r.error_code, r.error_message) for r in resp.results}
        self._client.request_update()
        _check(out, raise_on_error)
        return out

    async def list_topics(self, internal: bool = False) -> dict[str, TopicDescription]:
        resp = await self._client.fetch_metadata(None, update=False)
        return {
            d.name: d
            for d in (self._describe(t) for t in resp.topics if t.name and not t.error_code)
            if internal or not d.is_internal
        }

    async def describe_topics(self, names: Iterable[str]) -> dict[str, TopicDescription | KafkaError]:
        resp = await self._client.fetch_metadata(list(names), update=False)
        out: dict[str, TopicDescription | KafkaError] = {}
        for t in resp.topics:
            if t.error_code:
                out[t.name] = error_for_code(t.error_code)(t.name)
            else:
                out[t.name] = self._describe(t)
        return out

    @staticmethod
    def _describe(t: Any) -> TopicDescription:
        return TopicDescription(
            t.name,
            t.topic_id,
            t.is_internal,
            sorted(
                (
                    PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch, list(p.replica_nodes), list(p.isr_nodes))
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            ),
        )

    # --- configs ---

    async def describe_configs(
        self, resources: Iterable[tuple[int | str, str]], *, include_synonyms: bool = False
    ) -> dict[tuple[int, str], dict[str, ConfigEntry] | KafkaError]:
        res = [(RESOURCE_TYPES.get(t, t) if isinstance(t, str) else t, n) for t, n in resources]  # type: ignore[misc]
        conn = await self._any()
        req = messages.DescribeConfigsRequest(
            resources=[
                messages.DescribeConfigsRequest.Resources(resource_type=t, resource_name=n, configuration_keys=None)  # type: ignore[arg-type]
                for t, n in res
            ],
            include_synonyms=include_synonyms,
        )
        version = conn.version(req.API_KEY)
        resp = await conn.send(req, version)
        out: dict[tuple[int, str], dict[str, ConfigEntry] | KafkaError] = {}
        for r in resp.results:
            key = (r.resource_type, r.resource_name)
            if r.error_code:
                out[key] = error_for_code(r.error_code)(r.error_message)
                continue
            entries = {}
            for c in r.configs:
                source = CONFIG_SOURCES.get(c.config_source, str(c.config_source))
                if version == 0:
                    source = "DEFAULT_CONFIG" if c.is_default else "UNKNOWN"
                entries[c.name] = ConfigEntry(
                    c.name,
                    c.value,
                    source,
                    c.read_only,
                    c.is_sensitive,
                    [(s.name, s.value, CONFIG_SOURCES.get(s.source, str(s.source))) for s in c.synonyms],
                )
            out[key] = entries
        return out

    async def alter_configs(
        self,
        configs: Mapping[tuple[int | str, str], Mapping[str, str | None]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[tuple[int, str], KafkaError | None]:
        """Replace a resource's whole override set (AlterConfigs)."""
        conn = await self._any()
        req = messages.AlterConfigsRequest(
            resources=[
                messages.AlterConfigsRequest.Resources(
                    resource_type=RESOURCE_TYPES.get(t, t) if isinstance(t, str) else t,  # type: ignore[arg-type]
                    resource_name=n,
                    configs=[messages.AlterConfigsRequest.Resources.Configs(name=k, value=v) for k, v in kv.items()],
                )
                for (t, n), kv in configs.items()
            ],
            validate_only=validate_only,
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        out = {(r.resource_type, r.resource_name): _err(r.error_code, r.error_message) for r in resp.responses}
        _check(out, raise_on_error)
        return out

    async def incremental_alter_configs(
        self,
        changes: Mapping[tuple[int | str, str], Iterable[tuple[str, int, str | None]]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[tuple[int, str], KafkaError | None]:
        """Apply (name, operation, value) changes; operations OP_SET/OP_DELETE/OP_APPEND/OP_SUBTRACT."""
        conn = await self._any()
        req = messages.IncrementalAlterConfigsRequest(
            resources=[
                messages.IncrementalAlterConfigsRequest.Resources(
                    resource_type=RESOURCE_TYPES.get(t, t) if isinstance(t, str) else t,  # type: ignore[arg-type]
                    resource_name=n,
                    configs=[
                        messages.IncrementalAlterConfigsRequest.Resources.Configs(name=k, config_operation=op, value=v)
                        for k, op, v in ops
                    ],
                )
                for (t, n), ops in changes.items()
            ],
            validate_only=validate_only,
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        out = {(r.resource_type, r.resource_name): _err(r.error_code, r.error_message) for r in resp.responses}
        _check(out, raise_on_error)
        return out

    # --- ACLs and SCRAM credentials ---

    async def create_acls(
        self, bindings: Iterable[AclBinding], *, raise_on_error: bool = False
    ) -> dict[AclBinding, KafkaError | None]:
        """Add ACLs; per binding, None or the broker's refusal."""
        bindings = list(bindings)
        conn = await self._controller()
        req = messages.CreateAclsRequest(creations=[
            messages.CreateAclsRequest.Creations(
                resource_type=b.resource_type, resource_name=b.name, resource_pattern_type=b.pattern_type,
                principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission_type,
            )
            for b in bindings
        ])
        resp = await conn.send(req, conn.version(req.API_KEY))
        out = {b: _err(r.error_code, r.error_message) for b, r in zip(bindings, resp.results, strict=True)}
        _check(out, raise_on_error)
        return out

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs that match ``acl_filter`` (every ACL without one); raises the broker's error."""
        f = acl_filter or AclBindingFilter()
        conn = await self._any()
        req = messages.DescribeAclsRequest(
            resource_type_filter=f.resource_type, resource_name_filter=f.name, pattern_type_filter=f.pattern_type,
            principal_filter=f.principal, host_filter=f.host, operation=f.operation,
            permission_type=f.permission_type,
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        return [
            AclBinding(
                ResourceType(r.resource_type), r.resource_name, PatternType(r.pattern_type), a.principal, a.host,
                AclOperation(a.operation), AclPermissionType(a.permission_type),
            )
            for r in resp.resources
            for a in r.acls
        ]

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, raise_on_error: bool = False
    ) -> list[list[AclBinding] | KafkaError]:
        """Remove the ACLs each filter matches; per filter, the ACLs removed or the error."""
        filters = list(filters)
        conn = await self._controller()
        req = messages.DeleteAclsRequest(filters=[
            messages.DeleteAclsRequest.Filters(
                resource_type_filter=f.resource_type, resource_name_filter=f.name,
                pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
                operation=f.operation, permission_type=f.permission_type,
            )
            for f in filters
        ])
        resp = await conn.send(req, conn.version(req.API_KEY))
        out: list[list[AclBinding] | KafkaError] = []
        for r in resp.filter_results:
            err = _err(r.error_code, r.error_message)
            if err is not None:
                out.append(err)
                continue
            out.append([
                AclBinding(
                    ResourceType(m.resource_type), m.resource_name, PatternType(m.pattern_type), m.principal,
                    m.host, AclOperation(m.operation), AclPermissionType(m.permission_type),
                )
                for m in r.matching_acls
            ])
        if raise_on_error:
            for item in out:
                if isinstance(item, KafkaError):
                    raise item
        return out

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None
    ) -> dict[str, list[tuple[ScramMechanism, int]] | KafkaError]:
        """Per user, (mechanism, iterations) of each SCRAM credential (never a password or a
        salt); every user with a credential when ``users`` is None."""
        conn = await self._any()
        req = messages.DescribeUserScramCredentialsRequest(
            users=None if users is None else [messages.DescribeUserScramCredentialsRequest.Users(name=u) for u in users]
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        out: dict[str, list[tuple[ScramMechanism, int]] | KafkaError] = {}
        for r in resp.results:
            err = _err(r.error_code, r.error_message)
            out[r.user] = err if err is not None else [
                (ScramMechanism(c.mechanism), c.iterations) for c in r.credential_infos
            ]
        return out

    async def alter_user_scram_credentials(
        self,
        upsertions: Iterable[tuple[str, ScramMechanism | str, str, int]] = (),
        deletions: Iterable[tuple[str, ScramMechanism | str]] = (),
        *,
        raise_on_error: bool = False,
    ) -> dict[str, KafkaError | None]:
        """Set (user, mechanism, password, iterations) credentials and delete (user, mechanism)
        ones. The password is salted here (a random 32-byte salt, PBKDF2 as SCRAM defines
        it); only the salted form is sent. Per user, None or the broker's refusal."""
        ups = []
        for user, mechanism, password, iterations in upsertions:
            m = ScramMechanism.parse(mechanism)
            salt = os.urandom(32)
            salted = hashlib.pbkdf2_hmac(m.hash_name, password.encode(), salt, iterations)
            ups.append(messages.AlterUserScramCredentialsRequest.Upsertions(
                name=user, mechanism=m, iterations=iterations, salt=salt, salted_password=salted,
            ))
        dels = [
            messages.AlterUserScramCredentialsRequest.Deletions(name=user, mechanism=ScramMechanism.parse(mechanism))
            for user, mechanism in deletions
        ]
        conn = await self._controller()
        req = messages.AlterUserScramCredentialsRequest(deletions=dels, upsertions=ups)
        resp = await conn.send(req, conn.version(req.API_KEY))
        out = {r.user: _err(r.error_code, r.error_message) for r in resp.results}
        _check(out, raise_on_error)
        return out

    # --- client quotas ---

    async def describe_client_quotas(
        self, components: Iterable[tuple[str, int, str | None]] = (), *, strict: bool = False
    ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        """Quotas of the entities that match every (entity type, match type, name) component
        (match type 0: that name, 1: the default, 2: any name); ``strict`` leaves out entities
        with other types. Entities are (type, name or None) pairs sorted by type."""
        conn = await self._any()
        req = messages.DescribeClientQuotasRequest(
            components=[
                messages.DescribeClientQuotasRequest.Components(entity_type=t, match_type=m, match=n)
                for t, m, n in components
            ],
            strict=strict,
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        return {
            tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {v.key: v.value for v in entry.values}
            for entry in resp.entries or []
        }

    async def alter_client_quotas(
        self,
        changes: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float | None]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[tuple[tuple[str, str | None], ...], KafkaError | None]:
        """Per entity ((type, name or None for the default) pairs), set keys to values or
        remove them (None); per entity, None or the broker's refusal."""
        conn = await self._controller()
        req = messages.AlterClientQuotasRequest(
            entries=[
                messages.AlterClientQuotasRequest.Entries(
                    entity=[messages.AlterClientQuotasRequest.Entries.Entity(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[
                        messages.AlterClientQuotasRequest.Entries.Ops(key=k, value=0.0 if v is None else float(v), remove=v is None)
                        for k, v in ops.items()
                    ],
                )
                for entity, ops in changes.items()
            ],
            validate_only=validate_only,
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        out = {
            tuple(sorted((e.entity_type, e.entity_name) for e in r.entity)): _err(r.error_code, r.error_message)
            for r in resp.entries
        }
        _check(out, raise_on_error)
        return out

    # --- delegation tokens ---

    async def create_delegation_token(
        self, renewers: Iterable[str] = (), max_lifetime_ms: int = -1, owner: str | None = None
    ) -> DelegationToken:
        """A new token for the logged-in principal (or, with CREATE_TOKENS on that user, for
        ``owner``, "User:name"); ``renewers`` are "User:name" principals; -1: the broker's
        maximum lifetime. Raises the broker's refusal."""
        conn = await self._controller()
        owner_type, _, owner_name = (owner or "").partition(":")
        req = messages.CreateDelegationTokenRequest(
            owner_principal_type=owner_type if owner else None,
            owner_principal_name=owner_name if owner else None,
            renewers=[
                messages.CreateDelegationTokenRequest.Renewers(principal_type=t, principal_name=n)
                for t, _, n in (r.partition(":") for r in renewers)
            ],
            max_lifetime_ms=max_lifetime_ms,
        )
        version = conn.version(req.API_KEY)
        if owner and version < 3:
            raise UnsupportedForBrokerError("creating a token for another owner needs CreateDelegationToken v3")
        resp = await conn.send(req, version)
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        requester = (
            f"{resp.token_requester_principal_type}:{resp.token_requester_principal_name}"
            if version >= 3 else f"{resp.principal_type}:{resp.principal_name}"
        )
        return DelegationToken(
            resp.token_id, bytes(resp.hmac), f"{resp.principal_type}:{resp.principal_name}", requester,
            tuple(renewers), resp.issue_timestamp_ms, resp.expiry_timestamp_ms, resp.max_timestamp_ms,
        )

    async def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1) -> int:
        """Renew the token with this HMAC; its new expiry timestamp (ms). -1: the broker's
        ``delegation.token.expiry.time.ms``."""
        conn = await self._controller()
        req = messages.RenewDelegationTokenRequest(hmac=hmac, renew_period_ms=renew_period_ms)
        resp = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        return int(resp.expiry_timestamp_ms)

    async def expire_delegation_token(self, hmac: bytes, expiry_time_period_ms: int = -1) -> int:
        """Expire the token with this HMAC after the period (-1: now); its expiry timestamp."""
        conn = await self._controller()
        req = messages.ExpireDelegationTokenRequest(hmac=hmac, expiry_time_period_ms=expiry_time_period_ms)
        resp = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        return int(resp.expiry_timestamp_ms)

    async def describe_delegation_tokens(self, owners: Iterable[str] | None = None) -> list[DelegationToken]:
        """The tokens of these owners ("User:name"; None: every owner) the principal may see."""
        conn = await self._any()
        req = messages.DescribeDelegationTokenRequest(
            owners=None if owners is None else [
                messages.DescribeDelegationTokenRequest.Owners(principal_type=t, principal_name=n)
                for t, _, n in (o.partition(":") for o in owners)
            ]
        )
        version = conn.version(req.API_KEY)
        resp = await conn.send(req, version)
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        out = []
        for t in resp.tokens:
            owner = f"{t.principal_type}:{t.principal_name}"
            requester = f"{t.token_requester_principal_type}:{t.token_requester_principal_name}" if version >= 3 else owner
            out.append(DelegationToken(
                t.token_id, bytes(t.hmac), owner, requester,
                tuple(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
                t.issue_timestamp, t.expiry_timestamp, t.max_timestamp,
            ))
        return out

    # --- groups ---

    async def list_groups(self) -> list[tuple[str, str, str]]:
        """(group_id, protocol_type, state) for every group on every broker."""
        await self._client.refresh_metadata()
        out: list[tuple[str, str, str]] = []
        for node in list(self._client.cluster.brokers):
            conn = await self._client.connection(node)
            resp = await conn.send(messages.ListGroupsRequest(), conn.version(messages.ListGroupsRequest.API_KEY))
            if resp.error_code:
                raise error_for_code(resp.error_code)()
            out.extend((g.group_id, g.protocol_type, g.group_state) for g in resp.groups)
        return sorted(out)

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        from gregor.client.consumer.assignors import decode_assignment

        out: dict[str, GroupDescription] = {}
        for gid in group_ids:
            node = await self._client.find_coordinator(gid, 0)
            conn = await self._client.connection(node)
            resp = await conn.send(messages.DescribeGroupsRequest(groups=[gid]), conn.version(messages.DescribeGroupsRequest.API_KEY))
            for g in resp.groups:
                members = []
                for m in g.members:
                    tps: set[TopicPartition] = set()
                    if g.protocol_type == "consumer" and m.member_assignment:
                        try:
                            a = decode_assignment(m.member_assignment)
                            tps = {TopicPartition(t, p) for t, ps in a.partitions.items() for p in ps}
                        except KafkaError:
                            pass
                    members.append(MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host, tps))
                out[g.group_id] = GroupDescription(
                    g.group_id, g.group_state, g.protocol_type, g.protocol_data, members, _err(g.error_code)
                )
        return out

    async def describe_share_groups(self, group_ids: Iterable[str]) -> dict[str, ShareGroupDescription | KafkaError]:
        """ShareGroupDescribe, asked of each group's coordinator."""
        out: dict[str, ShareGroupDescription | KafkaError] = {}
        for gid in group_ids:
            node = await self._client.find_coordinator(gid, 0)
            conn = await self._client.connection(node)
            resp = await conn.send(
                messages.ShareGroupDescribeRequest(group_ids=[gid], include_authorized_operations=False),
                conn.version(messages.ShareGroupDescribeRequest.API_KEY),
            )
            for g in resp.groups:
                if g.error_code:
                    out[g.group_id] = error_for_code(g.error_code)(g.error_message)
                    continue
                members = [
                    ShareMemberDescription(
                        m.member_id, m.member_epoch, m.client_id, m.client_host, m.rack_id,
                        list(m.subscribed_topic_names),
                        {TopicPartition(t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions},
                    )
                    for m in g.members
                ]
                out[g.group_id] = ShareGroupDescription(
                    g.group_id, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name, members)
        return out

    async def describe_share_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[int, int] | KafkaError]:
        """(start offset, lag) of each partition the share group has state for (or of
        ``partitions``; -1 when unknown): DescribeShareGroupOffsets."""
        node = await self._client.find_coordinator(group_id, 0)
        conn = await self._client.connection(node)
        G = messages.DescribeShareGroupOffsetsRequest.Groups
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [G.Topics(topic_name=t, partitions=sorted(ps)) for t, ps in sorted(by_topic.items())]
        version = conn.version(messages.DescribeShareGroupOffsetsRequest.API_KEY)
        resp = await conn.send(messages.DescribeShareGroupOffsetsRequest(groups=[G(group_id=group_id, topics=topics)]), version)
        g = resp.groups[0]
        if g.error_code:
            raise error_for_code(g.error_code)(g.error_message)
        return {
            TopicPartition(t.topic_name, p.partition_index): (
                error_for_code(p.error_code)(p.error_message) if p.error_code
                else (p.start_offset, p.lag if version >= 1 else -1))
            for t in g.topics for p in t.partitions
        }

    async def alter_share_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int], *, raise_on_error: bool = False
    ) -> dict[TopicPartition, KafkaError | None]:
        """Set where an empty share group starts in each partition (AlterShareGroupOffsets)."""
        node = await self._client.find_coordinator(group_id, 0)
        conn = await self._client.connection(node)
        T = messages.AlterShareGroupOffsetsRequest.Topics
        by_topic: dict[str, list[Any]] = {}
        for tp, off in offsets.items():
            by_topic.setdefault(tp.topic, []).append(T.Partitions(partition_index=tp.partition, start_offset=off))
        resp = await conn.send(messages.AlterShareGroupOffsetsRequest(group_id=group_id, topics=[
            T(topic_name=t, partitions=ps) for t, ps in sorted(by_topic.items())]),
            conn.version(messages.AlterShareGroupOffsetsRequest.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        out = {TopicPartition(t.topic_name, p.partition_index): _err(p.error_code, p.error_message)
               for t in resp.responses for p in t.partitions}
        _check(out, raise_on_error)
        return out

    async def delete_share_group_offsets(
        self, group_id: str, topics: Iterable[str], *, raise_on_error: bool = False
    ) -> dict[str, KafkaError | None]:
        """Forget an empty share group's state for whole topics (DeleteShareGroupOffsets)."""
        node = await self._client.find_coordinator(group_id, 0)
        conn = await self._client.connection(node)
        resp = await conn.send(messages.DeleteShareGroupOffsetsRequest(group_id=group_id, topics=[
            messages.DeleteShareGroupOffsetsRequest.Topics(topic_name=t) for t in topics]),
            conn.version(messages.DeleteShareGroupOffsetsRequest.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        out = {t.topic_name: _err(t.error_code, t.error_message) for t in resp.responses}
        _check(out, raise_on_error)
        return out

    async def delete_groups(self, group_ids: Iterable[str], *, raise_on_error: bool = False) -> dict[str, KafkaError | None]:
        out: dict[str, KafkaError | None] = {}
        for gid in group_ids:
            node = await self._client.find_coordinator(gid, 0)
            conn = await self._client.connection(node)
            resp = await conn.send(messages.DeleteGroupsRequest(groups_names=[gid]), conn.version(messages.DeleteGroupsRequest.API_KEY))
            for r in resp.results:
                out[r.group_id] = _err(r.error_code)
        _check(out, raise_on_error)
        return out

    def _group(self, group_id: str) -> GroupBase:
        cfg = Config("consumer", {"bootstrap.servers": self.config["bootstrap.servers"], "group.id": group_id})
        return GroupBase(self._client, cfg, None)  # type: ignore[arg-type]

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """Committed offsets of a group (all its partitions when ``partitions`` is None)."""
        g = self._group(group_id)
        if partitions is None:
            return await self._all_group_offsets(g)
        got = await g.fetch_committed(list(partitions))
        return {tp: om for tp, om in got.items() if om is not None}

    async def _all_group_offsets(self, g: GroupBase) -> dict[TopicPartition, OffsetAndMetadata]:
        node = await g.coordinator_node()
        conn = await self._client.connection(node)
        version = conn.version(messages.OffsetFetchRequest.API_KEY, min_version=2)
        if version >= 8:
            req = messages.OffsetFetchRequest(groups=[messages.OffsetFetchRequest.Groups(group_id=g.group_id, topics=None)])
        else:
            req = messages.OffsetFetchRequest(group_id=g.group_id, topics=None)
        resp = await conn.send(req, version)
        if version >= 8:
            code, topics = resp.groups[0].error_code, resp.groups[0].topics
        else:
            code, topics = resp.error_code, resp.topics
        if code:
            raise error_for_code(code)(g.group_id)
        out = {}
        for t in topics:
            for p in t.partitions:
                if not p.error_code and p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                        p.committed_offset, p.metadata, p.committed_leader_epoch
                    )
        return out

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, int | OffsetAndMetadata]
    ) -> None:
        """Set a group's committed offsets (the group must have no active members)."""
        g = self._group(group_id)
        oms = {
            TopicPartition(*tp): v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v))
            for tp, v in offsets.items()
        }
        await g.commit(oms)

    async def delete_consumer_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        g = self._group(group_id)
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        node = await g.coordinator_node()
        conn = await self._client.connection(node)
        req = messages.OffsetDeleteRequest(
            group_id=group_id,
            topics=[
                messages.OffsetDeleteRequest.Topics(
                    name=t, partitions=[messages.OffsetDeleteRequest.Topics.Partitions(partition_index=p) for p in ps]
                )
                for t, ps in by_topic.items()
            ],
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(group_id)

    # --- records and offsets ---

    async def delete_records(
        self, before: Mapping[TopicPartition, int], *, raise_on_error: bool = False
    ) -> dict[TopicPartition, int | KafkaError]:
        """Delete records below the given offsets (-1: the high watermark); returns low watermarks."""
        cluster = self._client.cluster
        self._client.add_topics({tp.topic for tp in before})
        await self._client.refresh_metadata()
        by_node: dict[int, dict[TopicPartition, int]] = {}
        out: dict[TopicPartition, int | KafkaError] = {}
        for tp, off in before.items():
            tp = TopicPartition(*tp)
            node = cluster.leader_for(tp)
            if node < 0:
                out[tp] = error_for_code(3)(str(tp))
                continue
            by_node.setdefault(node, {})[tp] = off

        async def one(node: int, q: dict[TopicPartition, int]) -> None:
            conn = await self._client.connection(node)
            topics: dict[str, list[messages.DeleteRecordsRequest.Topics.Partitions]] = {}
            for tp, off in q.items():
                topics.setdefault(tp.topic, []).append(
                    messages.DeleteRecordsRequest.Topics.Partitions(partition_index=tp.partition, offset=off)
                )
            req = messages.DeleteRecordsRequest(
                topics=[messages.DeleteRecordsRequest.Topics(name=t, partitions=ps) for t, ps in topics.items()],
                timeout_ms=self._timeout_ms,
            )
            resp = await conn.send(req, conn.version(req.API_KEY))
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    out[tp] = error_for_code(p.error_code)(str(tp)) if p.error_code else p.low_watermark

        await asyncio.gather(*(one(n, q) for n, q in by_node.items()))
        _check(out, raise_on_error)
        return out

    async def list_offsets(
        self, specs: Mapping[TopicPartition, int | str], *, isolation_level: int = 0
    ) -> dict[TopicPartition, tuple[int | None, int]]:
        """Offsets by spec: "earliest", "latest", or a timestamp in ms."""
        q = {}
        for tp, spec in specs.items():
            if spec == "earliest":
                q[TopicPartition(*tp)] = EARLIEST
            elif spec == "latest":
                q[TopicPartition(*tp)] = LATEST
            else:
                q[TopicPartition(*tp)] = int(spec)
        r = await list_offsets(self._client, q, isolation_level, self._timeout_ms / 1000)
        return {tp: (v[0], v[1]) for tp, v in r.items()}

    # --- leaders and replicas (a cluster) ---

    async def elect_leaders(
        self, election_type: int = 0, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, KafkaError | None]:
        """Preferred (0) or unclean (1) leader elections of these partitions (None: every
        partition); per partition None or the error (ELECTION_NOT_NEEDED when the preferred
        replica already leads)."""
        conn = await self._controller()
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp[0], []).append(tp[1])
        req = messages.ElectLeadersRequest(
            election_type=election_type,
            topic_partitions=None if partitions is None else [
                messages.ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()
            ],
            timeout_ms=self._timeout_ms,
        )
        version = conn.version(req.API_KEY)
        if election_type != 0 and version < 1:
            raise UnsupportedForBrokerError("unclean elections need ElectLeaders v1")
        resp = await conn.send(req, version)
        if version >= 1 and resp.error_code:
            raise error_for_code(resp.error_code)()
        return {
            TopicPartition(r.topic, p.partition_id): _err(p.error_code, p.error_message)
            for r in resp.replica_election_results for p in r.partition_result
        }

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move partitions to these replicas (None: cancel the partition's reassignment)."""
        conn = await self._controller()
        by_topic: dict[str, list[messages.AlterPartitionReassignmentsRequest.Topics.Partitions]] = {}
        for tp, replicas in reassignments.items():
            by_topic.setdefault(tp[0], []).append(
                messages.AlterPartitionReassignmentsRequest.Topics.Partitions(partition_index=tp[1], replicas=replicas)
            )
        req = messages.AlterPartitionReassignmentsRequest(
            timeout_ms=self._timeout_ms,
            topics=[messages.AlterPartitionReassignmentsRequest.Topics(name=t, partitions=ps) for t, ps in by_topic.items()],
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        return {
            TopicPartition(r.name, p.partition_index): _err(p.error_code, p.error_message)
            for r in resp.responses for p in r.partitions
        }

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """Reassignments in progress: (replicas, adding, removing) per partition."""
        conn = await self._controller()
        by_topic: dict[str, list[int]] = {}
        for tp in partitions or ():
            by_topic.setdefault(tp[0], []).append(tp[1])
        req = messages.ListPartitionReassignmentsRequest(
            timeout_ms=self._timeout_ms,
            topics=None if partitions is None else [
                messages.ListPartitionReassignmentsRequest.Topics(name=t, partition_indexes=ps) for t, ps in by_topic.items()
            ],
        )
        resp = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        return {
            TopicPartition(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics for p in t.partitions
        }

    # --- transactions ---

    async def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = (), min_duration_ms: int = -1
    ) -> list[tuple[str, int, int, str]]:
        """(transactional id, coordinator node, producer id, state) from every broker's
        transaction coordinator, filtered as ListTransactions filters."""
        meta = await self._client.fetch_metadata([])
        out: list[tuple[str, int, int, str]] = []
        for node in sorted(b.node_id for b in meta.brokers):
            conn = await self._client.connection(node)
            req = messages.ListTransactionsRequest(
                state_filters=list(states), producer_id_filters=list(producer_ids), duration_filter=min_duration_ms
            )
            version = conn.version(req.API_KEY)
            if min_duration_ms >= 0 and version < 1:
                raise UnsupportedForBrokerError("a duration filter needs ListTransactions v1")
            resp = await conn.send(req, version)
            if resp.error_code:
                raise error_for_code(resp.error_code)()
            out.extend((t.transactional_id, node, t.producer_id, t.transaction_state) for t in resp.transaction_states)
        return sorted(out)

    async def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, dict[str, Any] | KafkaError]:
        """Per transactional id: its coordinator's view (state, producer id and epoch, timeout,
        start time, partitions in the transaction), or the error."""
        out: dict[str, dict[str, Any] | KafkaError] = {}
        for tid in transactional_ids:
            try:
                node = await self._client.find_coordinator(tid, 1)
            except KafkaError as e:
                out[tid] = e
                continue
            conn = await self._client.connection(node)
            req = messages.DescribeTransactionsRequest(transactional_ids=[tid])
            resp = await conn.send(req, conn.version(req.API_KEY))
            for t in resp.transaction_states:
                if t.error_code:
                    out[t.transactional_id] = error_for_code(t.error_code)(t.transactional_id)
                    continue
                out[t.transactional_id] = {
                    "coordinator": node, "state": t.transaction_state, "producer_id": t.producer_id,
                    "producer_epoch": t.producer_epoch, "timeout_ms": t.transaction_timeout_ms,
                    "start_time_ms": t.transaction_start_time_ms,
                    "partitions": sorted((tp.topic, p) for tp in t.topics for p in tp.partitions),
                }
        return out

    async def describe_producers(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, list[dict[str, int]] | KafkaError]:
        """Per partition, the active producers its leader keeps (id, epoch, last sequence and
        timestamp, coordinator epoch, the start offset of an open transaction or -1)."""
        wanted = [TopicPartition(*tp) for tp in partitions]
        meta = await self._client.fetch_metadata(sorted({tp.topic for tp in wanted}))
        leaders = {(t.name, p.partition_index): p.leader_id for t in meta.topics for p in t.partitions}
        out: dict[TopicPartition, list[dict[str, int]] | KafkaError] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            leader = leaders.get((tp.topic, tp.partition), -1)
            if leader < 0:
                out[tp] = error_for_code(3)(f"{tp.topic}-{tp.partition}")
            else:
                by_leader.setdefault(leader, []).append(tp)
        for leader, tps in by_leader.items():
            conn = await self._client.connection(leader)
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            req = messages.DescribeProducersRequest(topics=[
                messages.DescribeProducersRequest.Topics(name=t, partition_indexes=ps) for t, ps in topics.items()
            ])
            resp = await conn.send(req, conn.version(req.API_KEY))
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    if p.error_code:
                        out[tp] = error_for_code(p.error_code)(p.error_message)
                        continue
                    out[tp] = [
                        {"producer_id": a.producer_id, "producer_epoch": a.producer_epoch,
                         "last_sequence": a.last_sequence, "last_timestamp": a.last_timestamp,
                         "coordinator_epoch": a.coordinator_epoch,
                         "current_txn_start_offset": a.current_txn_start_offset}
                        for a in p.active_producers
                    ]
        return out

    async def abort_transaction(
        self, partition: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int
    ) -> None:
        """Write an abort marker for a producer's open transaction on one partition (Kafka's
        ``Admin.abortTransaction``, for a transaction its coordinator has lost: a hanging one).
        Needs CLUSTER_ACTION; raises the partition's error."""
        tp = TopicPartition(*partition)
        meta = await self._client.fetch_metadata([tp.topic])
        leader = next(
            (p.leader_id for t in meta.topics if t.name == tp.topic for p in t.partitions if p.partition_index == tp.partition),
            -1,
        )
        if leader < 0:
            raise error_for_code(3)(f"{tp.topic}-{tp.partition}")
        conn = await self._client.connection(leader)
        req = messages.WriteTxnMarkersRequest(markers=[messages.WriteTxnMarkersRequest.Markers(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=[messages.WriteTxnMarkersRequest.Markers.Topics(name=tp.topic, partition_indexes=[tp.partition])],
            coordinator_epoch=coordinator_epoch,
        )])
        resp = await conn.send(req, conn.version(req.API_KEY))
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for_code(p.error_code)(f"{t.name}-{p.partition_index}")

    async def describe_log_dirs(
        self, brokers: Iterable[int] | None = None, topics: Iterable[str] | None = None
    ) -> dict[int, dict[str, dict[str, Any]]]:
        """Per broker (all when None), per log directory: its error (None or the Kafka error's
        name), total and usable bytes, and (topic, partition) -> size, offset lag and whether it
        is a future replica; only ``topics`` when given."""
        meta = await self._client.fetch_metadata(None if topics is None else list(topics))
        nodes = sorted(b.node_id for b in meta.brokers) if brokers is None else sorted(brokers)
        req = messages.DescribeLogDirsRequest(
            topics=None if topics is None else [
                messages.DescribeLogDirsRequest.Topics(topic=t.name, partitions=sorted(p.partition_index for p in t.partitions))
                for t in meta.topics if not t.error_code
            ]
        )
        out: dict[int, dict[str, dict[str, Any]]] = {}
        for node in nodes:
            conn = await self._client.connection(node)
            version = conn.version(req.API_KEY)
            resp = await conn.send(req, version)
            if version >= 3 and resp.error_code:
                raise error_for_code(resp.error_code)()
            out[node] = {
                r.log_dir: {
                    "error": error_for_code(r.error_code).name if r.error_code else None,
                    "total_bytes": r.total_bytes if version >= 4 else None,
                    "usable_bytes": r.usable_bytes if version >= 4 else None,
                    "partitions": {
                        (t.name, p.partition_index): {
                            "size": p.partition_size, "offset_lag": p.offset_lag, "is_future": p.is_future_key,
                        }
                        for t in r.topics for p in t.partitions
                    },
                }
                for r in resp.results
            }
        return out

    # --- cluster ---

    async def describe_cluster(self) -> ClusterDescription:
        conn = await self._any()
        if conn.supports(messages.DescribeClusterRequest.API_KEY):
            resp = await conn.send(messages.DescribeClusterRequest(), conn.version(messages.DescribeClusterRequest.API_KEY))
            if resp.error_code:
                raise error_for_code(resp.error_code)(resp.error_message)
            return ClusterDescription(
                resp.cluster_id,
                resp.controller_id,
                sorted((b.broker_id, b.host, b.port, b.rack) for b in resp.brokers),
            )
        meta = await self._client.fetch_metadata([], update=False)
        return ClusterDescription(
            meta.cluster_id, meta.controller_id, sorted((b.node_id, b.host, b.port, b.rack) for b in meta.brokers)
        )

    async def end_transactions(
        self, handles: Iterable[TransactionHandle], commit: bool, *, timeout: float | None = None, raise_on_error: bool = False
    ) -> dict[TransactionHandle, KafkaError | None]:
        """Commit or abort, all at once, transactions other producers began (``end_transaction``)."""
        hs = [TransactionHandle(*h) for h in handles]
        got = await asyncio.gather(*(end_transaction(self._client, h, commit, timeout=timeout) for h in hs), return_exceptions=True)
        if bad := [r for r in got if isinstance(r, BaseException) and not isinstance(r, KafkaError)]:
            raise bad[0]
        out: dict[TransactionHandle, KafkaError | None] = dict(zip(hs, got, strict=True))  # type: ignore[arg-type]
        _check(out, raise_on_error)
        return out

    async def describe_features(self) -> FeatureMetadata:
        """The finalized and supported features, from a fresh ApiVersions (v3+) of any broker."""
        conn = await self._any()
        version = conn.version(messages.ApiVersionsRequest.API_KEY, 4)
        if version < 3:
            raise UnsupportedForBrokerError(f"{conn} does not report features (ApiVersions v{version})")
        resp = await conn.send(messages.ApiVersionsRequest(
            client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=CLIENT_SOFTWARE_VERSION
        ), version)
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        return FeatureMetadata(
            {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features},
            {f.name: (f.min_version, f.max_version) for f in resp.supported_features},
            None if resp.finalized_features_epoch < 0 else resp.finalized_features_epoch,
        )

    async def update_features(
        self, updates: Mapping[str, tuple[int, int]], *, validate_only: bool = False, raise_on_error: bool = False
    ) -> dict[str, KafkaError | None]:
        """UpdateFeatures: ``{feature: (max_version_level, upgrade_type)}`` (UPGRADE,
        SAFE_DOWNGRADE or UNSAFE_DOWNGRADE; level 0 turns a feature off); per feature None or
        the error."""
        conn = await self._controller()
        version = conn.version(messages.UpdateFeaturesRequest.API_KEY, 1)
        if validate_only and version < 1:
            raise UnsupportedForBrokerError(f"{conn} cannot validate feature updates only (UpdateFeatures v0)")
        req = messages.UpdateFeaturesRequest(
            timeout_ms=self._timeout_ms,
            feature_updates=[
                messages.UpdateFeaturesRequest.FeatureUpdates(
                    feature=name, max_version_level=lv, upgrade_type=kind, allow_downgrade=kind != UPGRADE
                )
                for name, (lv, kind) in updates.items()
            ],
            validate_only=validate_only,
        )
        resp = await conn.send(req, version)
        out = {r.feature: _err(r.error_code, r.error_message) for r in resp.results}
        if resp.error_code and not out:
            raise error_for_code(resp.error_code)(resp.error_message)
        _check(out, raise_on_error)
        return out

    async def list_client_metrics_resources(self) -> list[str]:
        """The names of the client metrics subscriptions (KIP-714 config resources)."""
        conn = await self._any()
        resp = await conn.send(messages.ListClientMetricsResourcesRequest(), conn.version(messages.ListClientMetricsResourcesRequest.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        return sorted(r.name for r in resp.client_metrics_resources)

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        conn = await self._any()
        return dict(conn.api_versions)

    async def supports(self, api_key: int) -> bool:
        conn = await self._any()
        return conn.supports(api_key)


__all__ = [
    "AIOAdminClient",
    "ClusterDescription",
    "ConfigEntry",
    "FeatureMetadata",
    "GroupDescription",
    "MemberDescription",
    "NewTopic",
    "OP_APPEND",
    "OP_DELETE",
    "OP_SET",
    "OP_SUBTRACT",
    "SAFE_DOWNGRADE",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "TopicDescription",
    "UNSAFE_DOWNGRADE",
    "UPGRADE",
    "UnsupportedForBrokerError",
]
