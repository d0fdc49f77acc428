"""Transaction work that concerns a partition led by another broker: markers and KIP-890
verification.

``TxnRouting`` uses the broker channels for the two duties a transaction coordinator and a
partition leader share across brokers:

* ``write_markers``: a coordinator's COMMIT/ABORT markers for partitions led elsewhere go to
  their leaders as WriteTxnMarkers, one request per leader; a partition whose leader is
  unknown or unreachable answers a retriable error, and the coordinator retries it.
* ``verify``: a leader asked to start a transaction on a partition checks with the
  transaction coordinator of that producer (AddPartitionsToTxn v4, verify only) when that
  coordinator is another broker, or, for a transaction version 2 client, has the coordinator
  add the partition to the transaction (the same request without verify only).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gregor.broker.channels.broker_channels import BrokerChannels
from gregor.client.errors import KafkaConnectionError
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages import AddPartitionsToTxnRequest, WriteTxnMarkersRequest

log = logging.getLogger("gregor.broker.inter_broker")

TopicPartition = tuple[str, int]


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
