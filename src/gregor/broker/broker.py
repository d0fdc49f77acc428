"""The Broker: wires configuration, the metadata store, partitions, coordinators and
listeners together (wiring only; the rules live in the parts).

Theory of operation. Everything runs on one asyncio event loop (uvloop), so the loop is the
single owner of the metadata image and of every partition: a handler that appends does so
without awaiting in between, which serializes appends per partition without locks. Slow,
blocking work (deleting segment files, periodic retention and cleaning, the metadata file's
fsync) runs in the default executor.

Start: open the metadata store and load the image; open the logs (with each topic's
configs); publish the whole image once (this broker becomes leader of its partitions, the
coordinators replay their internal topics); bind the listeners and register this broker's
endpoints (the advertised address of each listener, with the bound port where it asked for
port 0; ``controller.broker_lifecycle``, which also registers again and shuts down in a
controlled way). From then on every metadata change reaches the ``MetadataPublisher``
through the store's subscription.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Sequence

from gregor.broker.access.delegation_token_manager import DelegationTokenManager
from gregor.broker.access.quota_manager import QuotaManager
from gregor.broker.admin.cluster_admin import ClusterAdmin
from gregor.broker.admin.topic_admin import TopicAdmin
from gregor.broker.channels.broker_channels import BrokerChannels
from gregor.broker.channels.controller_channel import ControllerChannel, ControllerProducerIds
from gregor.broker.channels.txn_routing import TxnRouting
from gregor.broker.common.events import log_event
from gregor.broker.config.broker_config import BrokerConfig
from gregor.broker.config.dynamic_configs import secure_stored_passwords
from gregor.broker.controller import features
from gregor.broker.controller.broker_lifecycle import BrokerLifecycleManager
from gregor.broker.controller.controller import Controller, RebalanceConfig
from gregor.broker.controller.controller_apis import ControllerService
from gregor.broker.controller.controller_propagation import ControllerPropagation
from gregor.broker.controller.controller_requests import ControllerRequests
from gregor.broker.controller.liveness import BrokerLiveness
from gregor.broker.coordination.coordinator_runtime import wall_clock_ms
from gregor.broker.coordination.group_service import GroupService
from gregor.broker.coordination.producer_ids import ProducerIdManager
from gregor.broker.coordination.share_partitions import SharePartitions, ShareSettings
from gregor.broker.coordination.share_service import SharePersister, ShareService
from gregor.broker.coordination.shares import Shares
from gregor.broker.coordination.txn_service import TxnService
from gregor.broker.handlers import HANDLERS
from gregor.broker.metadata_publisher import MetadataPublisher, initial_delta
from gregor.broker.metrics.broker_metrics import BrokerMetrics
from gregor.broker.metrics.client_telemetry import ClientTelemetry, subscriptions_of
from gregor.broker.metrics.metrics_http import MetricsEndpoint, serve_metrics
from gregor.broker.net.acceptor import Acceptor
from gregor.broker.net.connection_expiry import close_excess, close_idle
from gregor.broker.net.connection_quotas import ConnectionQuotas
from gregor.broker.net.dispatch import Dispatcher
from gregor.broker.net.server import Connection, start_listener
from gregor.broker.replication.alter_partition import ALTER_PARTITION_VERSION, AlterPartitionManager
from gregor.broker.replication.fetch_session import FetchSessionCache
from gregor.broker.replication.replica_fetcher import FetcherConfig, ReplicaFetchers
from gregor.broker.replication.replica_manager import ReplicaManager
from gregor.broker.replication.schema_id_validator import SchemaIdValidator
from gregor.broker.replication.table_topics import TableRegistry, wanted_translations
from gregor.cluster.etcd_url import is_etcd_url
from gregor.cluster.image import (
    BrokerEndpoint,
    MetadataImage,
    ScramCredential,
)
from gregor.cluster.store import MetadataStore, open_metadata_store
from gregor.coordinator import CoordinatorConfig
from gregor.coordinator.share.group import ShareGroups
from gregor.coordinator.txn.coordinator import TxnCoordinatorConfig
from gregor.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from gregor.security.authorizer import AclAuthorizer, parse_super_users
from gregor.storage.config import LogConfig, from_broker_props
from gregor.storage.log_dirs import LogDirs, open_log_dirs
from gregor.storage.manager import LogManager, delete_files
from gregor.tables.service import TableTranslation
from gregor.tables.settings import (
    TablesUnavailableError,
    TopicTableConfig,
    catalog_settings,
    registry_error,
    require_pyiceberg,
    require_shared_catalog,
)

log = logging.getLogger("gregor.broker")

MAINTENANCE_INTERVAL_S = 1.0


class Broker:
    """``BrokerState`` for the handlers; ``Broker(config)``, ``await start()``,
    ``await stop()``.

    ``metadata_store``: a store made by the caller instead of the one ``metadata.store`` names
    (``gregor.testing.InProcessCluster`` hands each of its brokers a view of one shared memory
    store). A broker given one is clustered (replication and the controller's duties), as on
    ``etcd://``; it starts the store and closes it when it stops."""

    def __init__(self, config: BrokerConfig, metadata_store: MetadataStore | None = None) -> None:
        self.config = config
        self._given_store = metadata_store
        self.node_id = config.node_id
        self.stopping = False
        self.connections: set[Connection] = set()
        self.servers: list[Acceptor | MetricsEndpoint] = []
        #: Each listener's acceptor, by listener name.
        self.acceptors: dict[str, Acceptor] = {}
        self.bound_listeners: list[tuple[str, str, int]] = []
        self.max_request_bytes = int(config["socket.request.max.bytes"])
        #: max.connections, max.connections.per.ip(.overrides), listener.name.<l>.max.connections;
        #: the dynamic values are applied by the MetadataPublisher.
        self.connection_quotas = ConnectionQuotas(
            [listener.name for listener in config.listeners],
            config.inter_broker_listener,
            config.raw,
        )
        self.connection_quotas.on_excess = self._close_excess_connections
        self.default_log_config: LogConfig = from_broker_props(dict(config.raw))
        self.fetch_sessions = FetchSessionCache(
            int(config["max.incremental.fetch.session.cache.slots"])
        )
        self.dispatcher = Dispatcher(self, HANDLERS)
        self._maintenance_task: asyncio.Task[None] | None = None
        #: Client byte-rate quotas, from the image's client_quotas.
        self.quotas = QuotaManager(
            lambda: self.store.image.client_quotas,
            int(config["quota.window.num"]),
            float(config["quota.window.size.seconds"]),
        )
        #: Traffic counters for the Prometheus endpoint (``broker.metrics``).
        self.metrics = BrokerMetrics()
        self.metrics_port: int | None = None
        #: Delegation tokens (KIP-48): the secret, the rules, the token logins' credentials.
        self.delegation_tokens = DelegationTokenManager(config, lambda: self.store.image)
        #: Client telemetry (KIP-714): subscriptions from the image, the values clients pushed.
        self.client_telemetry = ClientTelemetry(
            lambda: subscriptions_of(self.store.image.config_resources),
            int(config.get("telemetry.max.bytes")),
        )
        #: The ACL authorizer (``authorizer.class.name``), None when none is configured; every
        #: handler asks it through ``gregor.broker.handlers.authz``. It reads the image's ACLs.
        self.authorizer: AclAuthorizer | None = None
        if config["authorizer.class.name"]:
            self.authorizer = AclAuthorizer(
                lambda: self.store.image.acls,
                parse_super_users(str(config["super.users"] or "")),
                bool(config["allow.everyone.if.no.acl.found"]),
            )
        # Made by start(), which needs the event loop and the loaded metadata:
        self.log_dirs: LogDirs
        self.store: MetadataStore
        self.logs: LogManager
        self.replicas: ReplicaManager
        self.producer_ids: ProducerIdManager
        self.topics: TopicAdmin
        self.cluster_admin: ClusterAdmin
        self.groups: GroupService
        self.transactions: TxnService
        self.publisher: MetadataPublisher
        #: Topics as Iceberg tables: the translators of the partitions led here (issue 39).
        self.tables: TableTranslation | None = None
        #: In a cluster (``metadata.store=etcd://``): replication and the controller's duties.
        self.clustered = is_etcd_url(str(config["metadata.store"])) or metadata_store is not None
        self.fetchers: ReplicaFetchers | None = None
        self.alter_partitions: AlterPartitionManager | None = None
        self.controller: Controller | None = None
        self.channels: BrokerChannels | None = None
        self.controller_channel: ControllerChannel | None = None
        self.propagation: ControllerPropagation | None = None
        self.liveness: BrokerLiveness | None = None
        self.controller_requests: ControllerRequests
        self.lifecycle: BrokerLifecycleManager
        self.controller_service: ControllerService

    @property
    def image(self) -> MetadataImage:
        return self.store.image

    # --- lifecycle ---

    async def start(self) -> None:
        # The log directories are claimed first (Kafka's .lock and meta.properties): the file
        # metadata store lives in the first one, and a directory another broker holds must not
        # be opened at all.
        self.log_dirs = open_log_dirs(self.config.log_dirs, self.node_id)
        try:
            await self._start()
        except BaseException:
            self.log_dirs.release()
            raise

    async def _start(self) -> None:
        config = self.config
        self.store = self._given_store or open_metadata_store(
            config["metadata.store"],
            config.log_dirs[0],
            config.get("cluster.id"),
            int(config["broker.session.timeout.ms"]),
        )
        image = await self.store.start()
        keeps_cluster_id = (
            self._given_store is None and str(config["metadata.store"]).strip().lower() != "memory"
        )
        self.log_dirs.claim(image.cluster_id if keeps_cluster_id else None)
        await secure_stored_passwords(self.store, self.node_id, config)
        self.delegation_tokens.store = self.store
        self.logs = LogManager(
            [str(d) for d in config.log_dirs],
            self.default_log_config,
            topic_configs={t.name: dict(t.configs) for t in image.topics.values()},
            producer_id_expiration_ms=int(config["producer.id.expiration.ms"]),
            retention_check_interval_ms=int(config["log.retention.check.interval.ms"]),
        )
        self.replicas = ReplicaManager(self.node_id, self.logs, lambda: self.store.image)
        self.replicas.isr_changes = self.metrics.isr_changes
        self.replicas.schema_ids = SchemaIdValidator(
            config.schema_registry_urls, lambda: self.store.image, config.schema_registry_client
        )
        self.producer_ids = ProducerIdManager(self.store)
        self.controller_service = ControllerService(self.node_id, self.store)
        self.controller_requests = ControllerRequests(self.node_id, self.store, self.replicas)
        self.cluster_admin = ClusterAdmin(self.store)
        self.topics = TopicAdmin(
            config,
            self.store,
            self.default_log_config,
            lambda: self.store.image,
            clustered=self.clustered,
        )
        self.groups = GroupService(
            CoordinatorConfig.from_props(config.get),
            int(config.get("offsets.topic.replication.factor", 1)),
            lambda: self.store.image,
            self.replicas,
            self.topics,
            session_confirmed=self._session_confirmed,
        )
        self.transactions = TxnService(
            TxnCoordinatorConfig.from_props(config.get),
            int(config.get("transaction.state.log.replication.factor", 1)),
            self.producer_ids,
            self.replicas,
            self.replicas.write_txn_marker,
            self.topics,
            transaction_version=lambda: features.level(
                self.store.image.features, features.TRANSACTION_VERSION
            ),
            session_confirmed=self._session_confirmed,
        )
        self.replicas.transactions = self.transactions
        if self.clustered:
            self._start_replication()
        self.shares = self._share_groups(config)
        self.replicas.on_txn_marker(self.groups.on_txn_marker)
        self.publisher = MetadataPublisher(
            self.node_id,
            config,
            self.replicas,
            self.logs,
            self.groups,
            self.transactions,
            self.topics,
            share_state=self.shares.state,
            on_broker_configs=self.connection_quotas.configure,
        )
        # The broker must be registered before its partitions are published (the image
        # names it as their leader) and before it listens; the ports come from binding.
        for listener in config.listeners:
            acceptor, port = await start_listener(
                self,
                listener,
                config.security_protocol(listener.name),
                config.listener_security[listener.name],
            )
            self.servers.append(acceptor)
            self.acceptors[listener.name] = acceptor
            self.bound_listeners.append((listener.name, listener.host, port))
            if config.listener_security[listener.name].unsecured_oauthbearer:
                log_event(
                    log,
                    "sasl.oauthbearer_unsecured",
                    logging.WARNING,
                    listener=listener.name,
                    reason="OAUTHBEARER uses Kafka's unsecured validator: any unsigned token is believed, "
                    "including one naming a super user; set listener.name."
                    f"{listener.name.lower()}.oauthbearer.sasl.server.callback.handler.class to validate signed JWTs",
                )
        self.tables = self._table_translation()
        self.lifecycle = BrokerLifecycleManager(
            self.node_id,
            config,
            self.store,
            self.controller_service,
            self.controller_channel,
            self.bound_listeners,
            lambda: self.stopping,
        )
        await self.store.register_broker(self.lifecycle.registration())
        self.publisher.publish(initial_delta(self.store.image))
        self.store.subscribe(self.publisher.publish)
        self._reconcile_tables()
        self.store.subscribe(lambda _delta: self._reconcile_tables())
        self.store.subscribe(self.controller_service.on_delta)
        self.store.subscribe(self.lifecycle.register_again_if_unregistered)
        if self.propagation is not None:
            self.store.subscribe(self.propagation.on_delta)
        if self.liveness is not None:
            self.store.subscribe(self.liveness.on_delta)
            self.liveness.reconcile(self.store.image)
        if self.controller is not None:
            self.store.subscribe(self.controller.on_delta)
            self.controller.start()
        if config.metrics_address is not None:
            host, port = config.metrics_address
            endpoint = await serve_metrics(
                self,
                host,
                port,
                config.metrics_web_config,
                int(config["metrics.max.connections"]),
                int(config["metrics.cache.ms"]),
            )
            self.metrics_port = endpoint.port
            self.metrics.timing = True
            self.servers.append(endpoint)
        for server in self.servers:  # bound above, accepting only now that all is ready
            await server.start_serving()
        self._maintenance_task = asyncio.create_task(self._maintenance())
        fields: dict[str, object] = {
            "node_id": self.node_id,
            "cluster_id": self.store.image.cluster_id,
            "listeners": ",".join(f"{n}://{h}:{p}" for n, h, p in self.bound_listeners),
        }
        if config.metrics_address is not None:
            scheme = (
                "https"
                if config.metrics_web_config and config.metrics_web_config.ssl_context
                else "http"
            )
            fields["metrics"] = (
                f"{scheme}://{config.metrics_address[0]}:{self.metrics_port}/metrics"
            )
        fields["log_dirs"] = ",".join(str(d) for d in config.log_dirs)
        fields["topics"] = len(self.store.image.topics)
        log_event(log, "broker.started", logging.INFO, **fields)

    def _session_confirmed(self) -> bool:
        """The coordinators serve only while the metadata session is confirmed (an etcd
        store cut off past its lease's deadline is not: ``etcd_store``)."""
        return self.store.session_confirmed()

    def _share_groups(self, config: BrokerConfig) -> Shares:
        state = ShareService(
            int(config.get("share.coordinator.state.topic.num.partitions")),
            int(config.get("share.coordinator.state.topic.replication.factor")),
            self.replicas,
            self.topics,
            session_confirmed=self._session_confirmed,
        )
        persister = SharePersister(self.node_id, state, lambda: self.store.image, self.channels)
        settings = ShareSettings(
            int(config.get("group.share.record.lock.duration.ms")),
            int(config.get("group.share.delivery.count.limit")),
            int(config.get("group.share.partition.max.record.locks")),
        )
        partitions = SharePartitions(
            self.replicas, persister, lambda: self.store.image, settings, wall_clock_ms
        )

        def topic(name: str) -> tuple[uuid.UUID, int] | None:
            t = self.store.image.topic(name)
            return None if t is None or t.internal else (t.topic_id, len(t.partitions))

        groups = ShareGroups(
            topic,
            int(config.get("group.share.session.timeout.ms")),
            int(config.get("group.share.heartbeat.interval.ms")),
            int(config.get("group.share.max.size")),
            wall_clock_ms,
        )
        return Shares(state, partitions, groups)

    def _table_translation(self) -> TableTranslation:
        """Fail closed: a topic that asks for a table stops a broker that cannot write one."""
        config = self.config
        tables = TableTranslation(
            catalog_settings(config.raw, str(config.log_dirs[0])), TableRegistry(config)
        )
        for topic in self.store.image.topics.values():
            table_config = TopicTableConfig.of(topic.configs)
            if table_config.enabled:
                require_pyiceberg(topic.name)
                why = registry_error(table_config.mode, bool(config.schema_registry_urls))
                if why is not None:
                    raise TablesUnavailableError(f"topic {topic.name}: {why}")
                if self.clustered:
                    require_shared_catalog(topic.name, self.config.raw)
                tables.require_writable_warehouse(topic.name)
        return tables

    def _reconcile_tables(self) -> None:
        if self.tables is not None and not self.stopping:
            self.tables.reconcile(
                wanted_translations(self.store.image, self.replicas, self.node_id)
            )

    def _start_replication(self) -> None:
        """The cluster's parts: follower fetchers, ISR changes, the controller's duties, and
        channels to the other brokers for transaction markers and verification. Before
        anything is published, so every partition is made with them."""
        config = self.config
        self.channels = BrokerChannels(
            self.node_id,
            config.inter_broker_listener,
            lambda: self.store.image,
            config.inter_broker_client,
        )
        self.transactions.routing = TxnRouting(self.channels, lambda: self.store.image)
        self.fetchers = ReplicaFetchers(
            FetcherConfig(
                node_id=self.node_id,
                listener=config.inter_broker_listener,
                security=config.inter_broker_client,
                wait_max_ms=int(config["replica.fetch.wait.max.ms"]),
                min_bytes=int(config["replica.fetch.min.bytes"]),
                max_bytes=int(config["replica.fetch.max.bytes"]),
                response_max_bytes=int(config["replica.fetch.response.max.bytes"]),
                backoff_ms=int(config["replica.fetch.backoff.ms"]),
            ),
            lambda: self.store.image,
        )
        self.controller_channel = ControllerChannel(self.channels, lambda: self.store.image)
        service, channel = self.controller_service, self.controller_channel

        def send_alter_partition(req: AlterPartitionRequest) -> Awaitable[AlterPartitionResponse]:
            return channel.request(
                req,
                ALTER_PARTITION_VERSION,
                lambda: service.alter_partition(req, ALTER_PARTITION_VERSION),
                timeout_s=5.0,
                response=AlterPartitionResponse,
            )

        self.alter_partitions = AlterPartitionManager(
            self.node_id, lambda: self.store.image, send_alter_partition
        )
        self.propagation = ControllerPropagation(
            self.node_id, self.channels, lambda: self.store.image
        )
        self.liveness = BrokerLiveness(self.node_id, config.inter_broker_listener, self.store)
        self.producer_ids.store = ControllerProducerIds(
            channel, self.node_id, lambda: self.store.image, service.allocate_producer_ids
        )
        self.replicas.fetchers = self.fetchers
        self.replicas.alter_isr = self.alter_partitions.submit
        self.controller = Controller(
            self.node_id,
            self.store,
            bool(config["unclean.leader.election.enable"]),
            RebalanceConfig(
                enabled=bool(config["auto.leader.rebalance.enable"]),
                interval_s=float(config["leader.imbalance.check.interval.seconds"]),
                max_imbalance_percent=int(config["leader.imbalance.per.broker.percentage"]),
            ),
        )

    async def stop(self, timeout: float = 10.0) -> None:
        if self.clustered:
            await self.lifecycle.controlled_shutdown(min(timeout / 2, 5.0))
        self.stopping = True
        for s in self.servers:
            s.close()
        # Long-poll fetches would otherwise hold their connection busy until max_wait_ms.
        self.replicas.shutdown()
        # Held JoinGroup/SyncGroup responses would too: answer them NOT_COORDINATOR.
        self.groups.release_waiting()
        deadline = time.monotonic() + timeout
        # Let connections finish the request they are handling.
        while any(c.busy for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for c in list(self.connections):
            c.close()
        if self._maintenance_task is not None:
            self._maintenance_task.cancel()
            try:
                await self._maintenance_task
            except asyncio.CancelledError:
                pass
        # Each part stops even when one before it fails (its peers or the metadata store may
        # be gone already, as after a Ctrl-C to a whole cluster): the failure is logged, and
        # the logs and the store are still closed, so the process ends.
        if self.controller is not None:
            await _stop_part(self.controller.close())
        if self.propagation is not None:
            await _stop_part(self.propagation.close())
        if self.liveness is not None:
            await _stop_part(self.liveness.close())
        if self.alter_partitions is not None:
            await _stop_part(self.alter_partitions.close())
        if self.fetchers is not None:
            await _stop_part(self.fetchers.close())
        if self.tables is not None:
            await _stop_part(self.tables.stop())
        await _stop_part(self.groups.stop())
        await _stop_part(self.transactions.stop())
        await _stop_part(self.shares.stop())
        if self.replicas.schema_ids is not None:
            await _stop_part(self.replicas.schema_ids.close())
        if self.channels is not None:
            self.channels.close()
        await asyncio.get_running_loop().run_in_executor(None, self.logs.close)
        await _stop_part(self.store.close())
        self.log_dirs.release()
        log_event(log, "broker.stopped", node_id=self.node_id, clean=True)

    async def _maintenance(self) -> None:
        loop = asyncio.get_running_loop()
        max_idle_ms = int(self.config["connections.max.idle.ms"])
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            close_idle(self.connections, max_idle_ms)
            if self.clustered:
                self.replicas.shrink_isrs(int(self.config["replica.lag.time.max.ms"]))
            try:
                # Checkpoint files are written (and fsynced) in the executor, off the loop.
                pending = self.logs.run_periodic(background_checkpoint=True)
                await loop.run_in_executor(None, delete_files, pending)
            except Exception:  # noqa: BLE001 - keep the broker up; say what failed
                log.exception("periodic log maintenance failed")
            try:
                removed = await self.delegation_tokens.remove_expired(
                    self.store.image.controller_id == self.node_id
                )
                if removed:
                    log_event(log, "delegation_tokens.expired", count=len(removed))
            except Exception:  # noqa: BLE001 - the next check tries again
                log.exception("removing expired delegation tokens failed")

    def _close_excess_connections(self) -> None:
        close_excess(self.connections, self.connection_quotas)

    # --- ServerHost ---

    def handle_frame(self, conn: Connection, frame: memoryview | bytes) -> Awaitable[bool]:
        return self.dispatcher.handle_frame(conn, frame)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.store.image.scram_credential(user, mechanism)

    def network_totals(self, listener: str) -> list[int]:
        return self.metrics.listener(listener)

    def connection_throttle_ms(self, ip: str) -> int:
        return self.quotas.connection_throttle_ms(ip)

    def token_login(self, token_id: str, mechanism: str) -> tuple[ScramCredential, str, int] | None:
        return self.delegation_tokens.login(token_id, mechanism)

    # --- BrokerState ---

    def serves_inter_broker_apis(self, listener: str) -> bool:
        return self.clustered and listener == self.config.inter_broker_listener

    def live_broker_ids(self) -> list[int]:
        """Registered, unfenced brokers, less any this broker has seen die (``BrokerLiveness``)."""
        ids = self.store.image.live_broker_ids()
        if self.liveness is None:
            return ids
        down = self.liveness.down()
        return [n for n in ids if n not in down] if down else ids

    def endpoints(
        self, listener: str, live: Sequence[int] | None = None
    ) -> list[tuple[int, BrokerEndpoint, str | None]]:
        out = []
        image = self.store.image
        for node_id in self.live_broker_ids() if live is None else live:
            registration = image.brokers[node_id]
            endpoint = registration.endpoint(listener)
            if endpoint is not None:
                out.append((node_id, endpoint, registration.rack))
        return out


async def _stop_part(stopping: Awaitable[None]) -> None:
    """Await one part's stop; a part that fails to stop is logged, not raised (Kafka's
    ``CoreUtils.swallow``), so the broker goes on stopping the rest."""
    try:
        await stopping
    except Exception:  # noqa: BLE001 - stopping goes on
        log.exception("a part of the broker failed to stop; stopping the rest")
