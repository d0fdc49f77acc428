"""Requests from this broker to another one: transaction markers and KIP-890 verification.

Theory of operation. ``BrokerChannels`` keeps at most one connection per other broker,
opened on first use to the address that broker registered for the inter-broker listener
(read from the current image at that moment) and dropped on any failure, so the next request
connects again, wherever the broker now is. Requests on one connection are pipelined and
answered in order (``BrokerConnection``). ``TxnRouting`` uses the channels for the two
duties a transaction coordinator and a partition leader share across brokers:

* ``write_markers``: a coordinator's COMMIT/ABORT markers for partitions led elsewhere go to
  their leaders as WriteTxnMarkers, one request per leader; a partition whose leader is
  unknown or unreachable answers a retriable error, and the coordinator retries it.
* ``verify``: a leader asked to start a transaction on a partition checks with the
  transaction coordinator of that producer (AddPartitionsToTxn v4, verify only) when that
  coordinator is another broker, or, for a transaction version 2 client, has the coordinator
  add the partition to the transaction (the same request without verify only).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from gregor.broker.listener_security import InterBrokerClient
from gregor.client.conn import BrokerConnection
from gregor.client.errors import KafkaConnectionError, KafkaTimeoutError
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import ErrorCode, KafkaError, error_for_code
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.messages import (
    AddPartitionsToTxnRequest,
    Message,
    WriteTxnMarkersRequest,
)
from gregor.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)

log = logging.getLogger("gregor.broker.inter_broker")

TopicPartition = tuple[str, int]
REQUEST_TIMEOUT_MS = 30000
#: Pause before asking the controller again (none elected yet, unreachable, or NOT_CONTROLLER).
CONTROLLER_RETRY_S = 0.05
R = TypeVar("R")


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

    async def request(self, node: int, message: Message, version: int | None = None) -> Any:
        """Send ``message`` to broker ``node``; KafkaConnectionError if it cannot be reached."""
        try:
            conn = await self._connection(node)
            return await conn.request(message, version)
        except (KafkaConnectionError, KafkaTimeoutError, ProtocolError, OSError) as e:
            dead = self._conns.pop(node, None)
            if dead is not None:
                dead.close()
            raise KafkaConnectionError(f"broker {node}: {e}") from None

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


class TxnRouting:
    """Where transaction work goes when it concerns a partition led by another broker."""

    def __init__(self, channels: BrokerChannels, image: Callable[[], MetadataImage]) -> None:
        self.channels = channels
        self._image = image

    @property
    def node_id(self) -> int:
        return self.channels.node_id

    def leader_of(self, topic: str, index: int) -> int:
        p = self._image().partition(topic, index)
        return p.leader if p is not None else -1

    async def write_markers(
        self,
        leader: int,
        partitions: list[TopicPartition],
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
    ) -> dict[TopicPartition, int]:
        """WriteTxnMarkers to ``leader`` for ``partitions``; the error code of each."""
        if leader < 0:
            return {tp: int(ErrorCode.LEADER_NOT_AVAILABLE) for tp in partitions}
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        req = WriteTxnMarkersRequest(
            markers=[
                WriteTxnMarkersRequest.Markers(
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    transaction_result=commit,
                    coordinator_epoch=coordinator_epoch,
                    topics=[
                        WriteTxnMarkersRequest.Markers.Topics(name=t, partition_indexes=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ]
        )
        try:
            resp = await self.channels.request(leader, req)
        except KafkaConnectionError as e:
            log.info("markers for producer %d to broker %d: %s", producer_id, leader, e)
            return {tp: int(ErrorCode.NETWORK_EXCEPTION) for tp in partitions}
        out = {tp: int(ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions}
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    if (t.name, p.partition_index) in out:
                        out[(t.name, p.partition_index)] = p.error_code
        return out

    async def verify(
        self,
        coordinator: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        topic: str,
        index: int,
        *,
        verify_only: bool = True,
    ) -> ErrorCode:
        """Ask the coordinator broker whether (topic, index) is in the producer's transaction,
        or (``verify_only=False``, transaction version 2) to add it."""
        req = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnRequest.Transactions(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=verify_only,
                    topics=[
                        AddPartitionsToTxnRequest.Transactions.Topics(
                            name=topic, partitions=[index]
                        )
                    ],
                )
            ]
        )
        try:
            resp = await self.channels.request(coordinator, req, 4)
        except KafkaConnectionError:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if resp.error_code:
            return ErrorCode(resp.error_code)
        for result in resp.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    if (t.name, p.partition_index) == (topic, index):
                        return ErrorCode(p.partition_error_code)
        return ErrorCode.UNKNOWN_SERVER_ERROR


class ControllerChannel:
    """Requests from this broker to the active controller (AlterPartition,
    AllocateProducerIds, ControlledShutdown). The controller is the one the current image
    names; when that is this broker the request is answered in process by ``local`` (the
    same code the wire handler calls), otherwise it goes over ``BrokerChannels``. No
    controller yet, an unreachable one, or a NOT_CONTROLLER answer (it was just deposed) is
    retried against whatever the image names next, until ``timeout_s``; then the last
    answer, or KafkaTimeoutError if there was none."""

    def __init__(self, channels: BrokerChannels, image: Callable[[], MetadataImage]) -> None:
        self.channels = channels
        self._image = image

    async def request(
        self, message: Message, version: int, local: Callable[[], Awaitable[R]], timeout_s: float
    ) -> R:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        last: R | None = None
        while True:
            controller = self._image().controller_id
            resp: R | None = None
            if controller == self.channels.node_id:
                resp = await local()
            elif controller >= 0:
                try:
                    resp = await self.channels.request(controller, message, version)
                except KafkaConnectionError as e:
                    log.info("controller %d unreachable: %s", controller, e)
            if resp is not None:
                if getattr(resp, "error_code", 0) != ErrorCode.NOT_CONTROLLER:
                    return resp
                last = resp
            if loop.time() >= deadline:
                if last is not None:
                    return last
                raise KafkaTimeoutError(
                    f"no controller answered {type(message).__name__} in {timeout_s} s"
                )
            await asyncio.sleep(CONTROLLER_RETRY_S)


class ControllerProducerIds:
    """The producer-id blocks of a clustered broker, asked of the controller with
    AllocateProducerIds (the ``ProducerIdManager``'s store)."""

    def __init__(
        self,
        channel: ControllerChannel,
        node_id: int,
        image: Callable[[], MetadataImage],
        local: Callable[[AllocateProducerIdsRequest], Awaitable[AllocateProducerIdsResponse]],
    ) -> None:
        self.channel = channel
        self.node_id = node_id
        self._image = image
        self._local = local

    async def allocate_producer_ids(self, count: int) -> int:
        reg = self._image().brokers.get(self.node_id)
        req = AllocateProducerIdsRequest(
            broker_id=self.node_id, broker_epoch=reg.epoch if reg is not None else -1
        )
        resp = await self.channel.request(
            req, 0, lambda: self._local(req), timeout_s=REQUEST_TIMEOUT_MS / 1000
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)("AllocateProducerIds refused by the controller")
        if resp.producer_id_len < count:
            raise error_for_code(-1)(
                f"the controller gave {resp.producer_id_len} producer ids, {count} needed"
            )
        return resp.producer_id_start
