"""What handlers may touch: the broker state as a Protocol, and the typed request context.

Handlers receive a ``RequestContext``: the broker state (``BrokerState``, implemented by
``Broker``; tests may fake it), what is known of the connection (peer, listener, security
protocol, principal) and the request header. They read the metadata image and call typed
services (groups, transactions, topic admin, replica manager); they never reach into
runtimes or storage. A handler is ``async def handle(ctx, request) -> response``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gregor.broker.config.broker_config import BrokerConfig
from gregor.cluster.image import BrokerEndpoint, MetadataImage
from gregor.protocol.framing import RequestHeader

if TYPE_CHECKING:  # the services import nothing from here; this only names their types
    from gregor.broker.access.delegation_token_manager import DelegationTokenManager
    from gregor.broker.access.quota_manager import QuotaManager
    from gregor.broker.admin.cluster_admin import ClusterAdmin
    from gregor.broker.admin.topic_admin import TopicAdmin
    from gregor.broker.controller.controller_apis import ControllerService
    from gregor.broker.controller.controller_requests import ControllerRequests
    from gregor.broker.coordination.group_service import GroupService
    from gregor.broker.coordination.producer_ids import ProducerIdManager
    from gregor.broker.coordination.shares import Shares
    from gregor.broker.coordination.txn_service import TxnService
    from gregor.broker.metrics.broker_metrics import BrokerMetrics
    from gregor.broker.metrics.client_telemetry import ClientTelemetry
    from gregor.broker.replication.fetch_session import FetchSessionCache
    from gregor.broker.replication.replica_manager import ReplicaManager
    from gregor.security.authorizer import AclAuthorizer
    from gregor.storage.manager import LogManager


#: The principal of an unauthenticated connection (Kafka's ``User:ANONYMOUS``).
ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class ConnectionInfo:
    """One client connection as handlers see it."""

    peer: str  # "host:port"
    listener: str  # the listener name the connection arrived on ("PLAINTEXT", ...)
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    hung_up: asyncio.Future[None]  # done when the client has gone
    #: ``User:<name>``: from SASL once authenticated, or from the client certificate (SSL);
    #: ``User:ANONYMOUS`` otherwise.
    principal: str = ANONYMOUS
    sasl_mechanism: str | None = None  # the mechanism chosen by SaslHandshake
    #: Logged in with a delegation token (KIP-48): such a session may not create, renew or
    #: expire tokens.
    token_authenticated: bool = False
    #: What the client said it is in ApiVersions v3+ (KIP-511), for telemetry's matching.
    client_software_name: str = ""
    client_software_version: str = ""
    #: Fetched records may go out with sendfile (a plain-TCP connection; ``file_send``).
    sendfile: bool = False

    @property
    def host(self) -> str:
        return self.peer.rsplit(":", 1)[0] if ":" in self.peer else self.peer


class BrokerState(Protocol):
    """The broker as handlers see it."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def node_id(self) -> int: ...

    @property
    def image(self) -> MetadataImage: ...

    @property
    def stopping(self) -> bool: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def logs(self) -> LogManager: ...

    @property
    def groups(self) -> GroupService: ...

    @property
    def transactions(self) -> TxnService: ...

    @property
    def topics(self) -> TopicAdmin: ...

    @property
    def cluster_admin(self) -> ClusterAdmin:
        """The other metadata writes: SCRAM credentials, client quotas, ACLs, features,
        elections and reassignments."""
        ...

    @property
    def fetch_sessions(self) -> FetchSessionCache: ...

    @property
    def producer_ids(self) -> ProducerIdManager: ...

    def live_broker_ids(self) -> list[int]:
        """Registered, unfenced brokers not seen to have died, lowest id first."""
        ...

    def endpoints(
        self, listener: str, live: Sequence[int] | None = None
    ) -> list[tuple[int, BrokerEndpoint, str | None]]:
        """(node id, endpoint, rack) of every live broker (or of ``live``) on ``listener``."""
        ...

    def serves_inter_broker_apis(self, listener: str) -> bool:
        """Whether connections on ``listener`` may use the broker-to-controller APIs: a
        clustered broker's inter-broker listener."""
        ...

    @property
    def controller_service(self) -> ControllerService: ...

    @property
    def controller_requests(self) -> ControllerRequests: ...

    @property
    def authorizer(self) -> AclAuthorizer | None:
        """The ACL authorizer, None when the broker has none configured."""
        ...

    @property
    def metrics(self) -> BrokerMetrics:
        """Traffic counters for the Prometheus endpoint."""
        ...

    @property
    def delegation_tokens(self) -> DelegationTokenManager:
        """Delegation tokens: create, renew, expire, list (Kafka's rules and errors)."""
        ...

    @property
    def shares(self) -> Shares:
        """Share groups (KIP-932): the share coordinator, share partitions and groups here."""
        ...

    @property
    def client_telemetry(self) -> ClientTelemetry:
        """Client telemetry (KIP-714): subscriptions and the values clients pushed."""
        ...

    @property
    def quotas(self) -> QuotaManager:
        """Client byte-rate quotas: the throttle time a request's bytes earn."""
        ...


@dataclass(frozen=True, slots=True)
class RequestContext:
    broker: BrokerState
    conn: ConnectionInfo
    header: RequestHeader

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def client_host(self) -> str:
        """Kafka reports a member's host as ``/address``."""
        return "/" + self.conn.host
