"""The cluster itself: DescribeCluster, features (ApiVersions v3+, UpdateFeatures), leader
elections, partition reassignments, log directories, and the API versions a broker speaks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gregor.client.admin.base import AdminBase, error_or_none, raise_first
from gregor.client.admin.types import ClusterDescription, FeatureMetadata, LogDirDescription
from gregor.client.core.conn import CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION
from gregor.client.core.errors import UnsupportedForBrokerError, error_for_code
from gregor.client.core.metadata import TopicPartition
from gregor.protocol import messages
from gregor.protocol.errors import KafkaError
from gregor.protocol.features import UPGRADE


class ClusterApi(AdminBase):
    """The admin client's cluster calls."""

    async def describe_cluster(self) -> ClusterDescription:
        conn = await self._any()
        if conn.supports(messages.DescribeClusterRequest.API_KEY):
            resp: messages.DescribeClusterResponse = await conn.send(
                messages.DescribeClusterRequest(),
                conn.version(messages.DescribeClusterRequest.API_KEY),
            )
            if resp.error_code:
                raise error_for_code(resp.error_code)(resp.error_message)
            return ClusterDescription(
                resp.cluster_id,
                resp.controller_id,
                sorted((b.broker_id, b.host, b.port, b.rack) for b in resp.brokers),
            )
        meta = await self._client.fetch_metadata([], update=False)
        return ClusterDescription(
            meta.cluster_id,
            meta.controller_id,
            sorted((b.node_id, b.host, b.port, b.rack) for b in meta.brokers),
        )

    async def describe_features(self) -> FeatureMetadata:
        """The finalized and supported features, from a fresh ApiVersions (v3+) of any broker."""
        conn = await self._any()
        version = conn.version(messages.ApiVersionsRequest.API_KEY, 4)
        if version < 3:
            raise UnsupportedForBrokerError(
                f"{conn} does not report features (ApiVersions v{version})"
            )
        resp: messages.ApiVersionsResponse = await conn.send(
            messages.ApiVersionsRequest(
                client_software_name=CLIENT_SOFTWARE_NAME,
                client_software_version=CLIENT_SOFTWARE_VERSION,
            ),
            version,
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        return FeatureMetadata(
            {f.name: (f.min_version_level, f.max_version_level) for f in resp.finalized_features},
            {f.name: (f.min_version, f.max_version) for f in resp.supported_features},
            None if resp.finalized_features_epoch < 0 else resp.finalized_features_epoch,
        )

    async def update_features(
        self,
        updates: Mapping[str, tuple[int, int]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[str, KafkaError | None]:
        """UpdateFeatures: ``{feature: (max_version_level, upgrade_type)}`` (UPGRADE,
        SAFE_DOWNGRADE or UNSAFE_DOWNGRADE; level 0 turns a feature off); per feature None or
        the error."""
        conn = await self._controller()
        version = conn.version(messages.UpdateFeaturesRequest.API_KEY, 1)
        if validate_only and version < 1:
            raise UnsupportedForBrokerError(
                f"{conn} cannot validate feature updates only (UpdateFeatures v0)"
            )
        req = messages.UpdateFeaturesRequest(
            timeout_ms=self._timeout_ms,
            feature_updates=[
                messages.UpdateFeaturesRequest.FeatureUpdates(
                    feature=name,
                    max_version_level=lv,
                    upgrade_type=kind,
                    allow_downgrade=kind != UPGRADE,
                )
                for name, (lv, kind) in updates.items()
            ],
            validate_only=validate_only,
        )
        resp: messages.UpdateFeaturesResponse = await conn.send(req, version)
        out = {r.feature: error_or_none(r.error_code, r.error_message) for r in resp.results}
        if resp.error_code and not out:
            raise error_for_code(resp.error_code)(resp.error_message)
        raise_first(out, raise_on_error)
        return out

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
            topic_partitions=None
            if partitions is None
            else [
                messages.ElectLeadersRequest.TopicPartitions(topic=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
            timeout_ms=self._timeout_ms,
        )
        version = conn.version(req.API_KEY)
        if election_type != 0 and version < 1:
            raise UnsupportedForBrokerError("unclean elections need ElectLeaders v1")
        resp: messages.ElectLeadersResponse = await conn.send(req, version)
        if version >= 1 and resp.error_code:
            raise error_for_code(resp.error_code)()
        return {
            TopicPartition(r.topic, p.partition_id): error_or_none(p.error_code, p.error_message)
            for r in resp.replica_election_results
            for p in r.partition_result
        }

    async def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, list[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move partitions to these replicas (None: cancel the partition's reassignment)."""
        conn = await self._controller()
        by_topic: dict[
            str, list[messages.AlterPartitionReassignmentsRequest.Topics.Partitions]
        ] = {}
        for tp, replicas in reassignments.items():
            by_topic.setdefault(tp[0], []).append(
                messages.AlterPartitionReassignmentsRequest.Topics.Partitions(
                    partition_index=tp[1], replicas=replicas
                )
            )
        req = messages.AlterPartitionReassignmentsRequest(
            timeout_ms=self._timeout_ms,
            topics=[
                messages.AlterPartitionReassignmentsRequest.Topics(name=t, partitions=ps)
                for t, ps in by_topic.items()
            ],
        )
        resp: messages.AlterPartitionReassignmentsResponse = await conn.send(
            req, conn.version(req.API_KEY)
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        return {
            TopicPartition(r.name, p.partition_index): error_or_none(p.error_code, p.error_message)
            for r in resp.responses
            for p in r.partitions
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
            topics=None
            if partitions is None
            else [
                messages.ListPartitionReassignmentsRequest.Topics(name=t, partition_indexes=ps)
                for t, ps in by_topic.items()
            ],
        )
        resp: messages.ListPartitionReassignmentsResponse = await conn.send(
            req, conn.version(req.API_KEY)
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        return {
            TopicPartition(t.name, p.partition_index): (
                list(p.replicas),
                list(p.adding_replicas),
                list(p.removing_replicas),
            )
            for t in resp.topics
            for p in t.partitions
        }

    async def describe_log_dirs(
        self, brokers: Iterable[int] | None = None, topics: Iterable[str] | None = None
    ) -> dict[int, dict[str, LogDirDescription]]:
        """Per broker (all when None), per log directory: its error (None or the Kafka error's
        name), total and usable bytes, and (topic, partition) -> size, offset lag and whether it
        is a future replica; only ``topics`` when given."""
        meta = await self._client.fetch_metadata(None if topics is None else list(topics))
        nodes = sorted(b.node_id for b in meta.brokers) if brokers is None else sorted(brokers)
        req = messages.DescribeLogDirsRequest(
            topics=None
            if topics is None
            else [
                messages.DescribeLogDirsRequest.Topics(
                    topic=t.name, partitions=sorted(p.partition_index for p in t.partitions)
                )
                for t in meta.topics
                if not t.error_code and t.name is not None
            ]
        )
        out: dict[int, dict[str, LogDirDescription]] = {}
        for node in nodes:
            conn = await self._client.connection(node)
            version = conn.version(req.API_KEY)
            resp: messages.DescribeLogDirsResponse = await conn.send(req, version)
            if version >= 3 and resp.error_code:
                raise error_for_code(resp.error_code)()
            out[node] = {
                r.log_dir: {
                    "error": error_for_code(r.error_code).name if r.error_code else None,
                    "total_bytes": r.total_bytes if version >= 4 else None,
                    "usable_bytes": r.usable_bytes if version >= 4 else None,
                    "partitions": {
                        (t.name, p.partition_index): {
                            "size": p.partition_size,
                            "offset_lag": p.offset_lag,
                            "is_future": p.is_future_key,
                        }
                        for t in r.topics
                        for p in t.partitions
                    },
                }
                for r in resp.results
            }
        return out

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        conn = await self._any()
        return dict(conn.api_versions)

    async def supports(self, api_key: int) -> bool:
        conn = await self._any()
        return conn.supports(api_key)
