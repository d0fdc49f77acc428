"""Requests from this broker to the active controller, and the producer-id blocks asked of it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gregor.broker.channels.broker_channels import REQUEST_TIMEOUT_MS, BrokerChannels
from gregor.client.errors import KafkaConnectionError, KafkaTimeoutError
from gregor.cluster.image import MetadataImage
from gregor.protocol.errors import ErrorCode, error_for_code
from gregor.protocol.messages import Message
from gregor.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)
from gregor.protocol.messages.alter_partition import AlterPartitionRequest
from gregor.protocol.messages.controlled_shutdown import ControlledShutdownRequest

log = logging.getLogger("gregor.broker.inter_broker")

#: Pause before asking the controller again (none elected yet, unreachable, or NOT_CONTROLLER).
CONTROLLER_RETRY_S = 0.05
R = TypeVar("R", bound=Message)
#: What a broker asks the active controller.
ControllerRequest = AlterPartitionRequest | AllocateProducerIdsRequest | ControlledShutdownRequest


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
        self,
        message: ControllerRequest,
        version: int,
        local: Callable[[], Awaitable[R]],
        timeout_s: float,
        response: type[R],
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
                    remote = await self.channels.request(controller, message, version)
                    if not isinstance(remote, response):
                        raise KafkaConnectionError(
                            f"answered {type(remote).__name__}, not {response.__name__}"
                        )
                    resp = remote
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
            req,
            0,
            lambda: self._local(req),
            timeout_s=REQUEST_TIMEOUT_MS / 1000,
            response=AllocateProducerIdsResponse,
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)("AllocateProducerIds refused by the controller")
        if resp.producer_id_len < count:
            raise error_for_code(-1)(
                f"the controller gave {resp.producer_id_len} producer ids, {count} needed"
            )
        return resp.producer_id_start
