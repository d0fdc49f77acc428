"""Connections from this broker to the others, shared by the wings that talk to a peer.

Theory of operation. ``BrokerChannels`` keeps at most one connection per other broker,
opened on first use to the address that broker registered for the inter-broker listener
(read from the current image at that moment) and dropped on any failure, so the next request
connects again, wherever the broker now is. Requests on one connection are pipelined and
answered in order (``BrokerConnection``). ``connect_to_broker`` opens one such connection
(the replica fetcher keeps its own, one per leader). The transaction coordinator's routing
(``txn_routing``) and the controller channel (``controller_channel``) send over these
channels.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import overload

from gregor.broker.config.listener_security import InterBrokerClient
from gregor.client.conn import BrokerConnection
from gregor.client.errors import KafkaConnectionError, KafkaTimeoutError
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import KafkaError
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages import Message
from gregor.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from gregor.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)
from gregor.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from gregor.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from gregor.protocol.messages.delete_share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
)
from gregor.protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)
from gregor.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from gregor.protocol.messages.read_share_group_state import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
)
from gregor.protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from gregor.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from gregor.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from gregor.protocol.messages.write_share_group_state import (
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from gregor.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

log = logging.getLogger("gregor.broker.inter_broker")

REQUEST_TIMEOUT_MS = 30000


async def connect_to_broker(
    image: MetadataImage,
    node: int,
    listener: str,
    *,
    client_id: str,
    request_timeout_ms: int,
    security: InterBrokerClient | None = None,
) -> BrokerConnection:
    """A connection to broker ``node`` at the address it registered for ``listener`` in
    ``image``, with the listener's TLS and SASL login (``security``); KafkaConnectionError if
    it has none (not registered, or no such listener) or the connection or login fails."""
    registration = image.brokers.get(node)
    endpoint = registration.endpoint(listener) if registration is not None else None
    if endpoint is None:
        raise KafkaConnectionError(f"broker {node} has no {listener} endpoint in the metadata")
    conn = BrokerConnection(
        endpoint.host,
        endpoint.port,
        node_id=node,
        client_id=client_id,
        request_timeout_ms=request_timeout_ms,
        ssl_context=security.ssl_context if security is not None else None,
        sasl=security.sasl if security is not None else None,
    )
    try:
        return await conn.connect()
    except KafkaError as e:
        if isinstance(e, KafkaConnectionError):
            raise
        # A refused login: as unreachable for the caller (it retries), said in the log.
        log.warning("login to broker %d on %s refused: %s", node, listener, e)
        raise KafkaConnectionError(f"broker {node}: {e}") from None


class BrokerChannels:
    def __init__(
        self,
        node_id: int,
        listener: str,
        image: Callable[[], MetadataImage],
        security: InterBrokerClient | None = None,
    ) -> None:
        self.node_id = node_id
        self.listener = listener
        self.security = security
        self._image = image
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[BrokerConnection]] = {}

    async def _connection(self, node: int) -> BrokerConnection:
        conn = self._conns.get(node)
        if conn is not None and conn.connected:
            return conn
        pending = self._connecting.get(node)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[BrokerConnection] = asyncio.get_running_loop().create_future()
        self._connecting[node] = fut
        try:
            conn = await connect_to_broker(
                self._image(),
                node,
                self.listener,
                client_id=f"gregor-broker-{self.node_id}",
                request_timeout_ms=REQUEST_TIMEOUT_MS,
                security=self.security,
            )
            self._conns[node] = conn
            fut.set_result(conn)
            return conn
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # retrieved: nobody else may be waiting
            raise
        finally:
            del self._connecting[node]

    @overload
    async def request(
        self, node: int, message: AddPartitionsToTxnRequest, version: int | None = None
    ) -> AddPartitionsToTxnResponse: ...

    @overload
    async def request(
        self, node: int, message: WriteTxnMarkersRequest, version: int | None = None
    ) -> WriteTxnMarkersResponse: ...

    @overload
    async def request(
        self, node: int, message: LeaderAndIsrRequest, version: int | None = None
    ) -> LeaderAndIsrResponse: ...

    @overload
    async def request(
        self, node: int, message: UpdateMetadataRequest, version: int | None = None
    ) -> UpdateMetadataResponse: ...

    @overload
    async def request(
        self, node: int, message: StopReplicaRequest, version: int | None = None
    ) -> StopReplicaResponse: ...

    @overload
    async def request(
        self, node: int, message: InitializeShareGroupStateRequest, version: int | None = None
    ) -> InitializeShareGroupStateResponse: ...

    @overload
    async def request(
        self, node: int, message: ReadShareGroupStateRequest, version: int | None = None
    ) -> ReadShareGroupStateResponse: ...

    @overload
    async def request(
        self, node: int, message: ReadShareGroupStateSummaryRequest, version: int | None = None
    ) -> ReadShareGroupStateSummaryResponse: ...

    @overload
    async def request(
        self, node: int, message: WriteShareGroupStateRequest, version: int | None = None
    ) -> WriteShareGroupStateResponse: ...

    @overload
    async def request(
        self, node: int, message: DeleteShareGroupStateRequest, version: int | None = None
    ) -> DeleteShareGroupStateResponse: ...

    @overload
    async def request(
        self, node: int, message: AlterPartitionRequest, version: int | None = None
    ) -> AlterPartitionResponse: ...

    @overload
    async def request(
        self, node: int, message: AllocateProducerIdsRequest, version: int | None = None
    ) -> AllocateProducerIdsResponse: ...

    @overload
    async def request(
        self, node: int, message: ControlledShutdownRequest, version: int | None = None
    ) -> ControlledShutdownResponse: ...

    async def request(self, node: int, message: Message, version: int | None = None) -> Message:
        """Send ``message`` to broker ``node``; KafkaConnectionError if it cannot be reached.
        The answer is the request's own response class (the connection decodes it by the
        request's API key); the overloads name it for each request brokers send each other."""
        try:
            conn = await self._connection(node)
            response = await conn.request(message, version)
            if not isinstance(response, Message):
                raise KafkaConnectionError(f"no answer to {type(message).__name__}")
            return response
        except (KafkaConnectionError, KafkaTimeoutError, ProtocolError, OSError) as e:
            dead = self._conns.pop(node, None)
            if dead is not None:
                dead.close()
            raise KafkaConnectionError(f"broker {node}: {e}") from None

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
