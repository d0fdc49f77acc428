"""This broker's membership of the cluster (Kafka's ``BrokerLifecycleManager``): its
registration, its registration again when an admin unregistered it while it runs, and the
controlled shutdown that ends it.

Theory of operation. The broker registers once its listeners are bound (the registration
carries each advertised listener with the port it bound where it asked for port 0) and before
its partitions are published. The metadata store's subscription calls
``register_again_if_unregistered`` on every change: when the image drops this running broker
(UnregisterBroker), it registers again with a new broker epoch, as a Kafka broker does when its
registration is fenced, unless it is stopping or left on purpose. ``controlled_shutdown`` asks
the active controller (ControlledShutdown, through the controller channel) to move leadership
away, then unregisters and sets ``leaving`` so the broker does not come back. Everything runs on
the broker's event loop; re-registrations run as background tasks kept here until done.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Sequence

from gregor.broker.channels.controller_channel import ControllerChannel
from gregor.broker.common.events import log_event
from gregor.broker.config.broker_config import BrokerConfig
from gregor.broker.controller.controller_apis import ControllerService
from gregor.cluster.image import BrokerEndpoint, BrokerRegistration, MetadataDelta
from gregor.cluster.store import MetadataStore
from gregor.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)

log = logging.getLogger("gregor.broker")


class BrokerLifecycleManager:
    """``bound_listeners``: the broker's (listener, host, bound port) list, filled as it binds;
    ``stopping``: whether the broker is stopping; ``channel``: the controller channel (None
    on a single node, which has no controlled shutdown)."""

    def __init__(
        self,
        node_id: int,
        config: BrokerConfig,
        store: MetadataStore,
        service: ControllerService,
        channel: ControllerChannel | None,
        bound_listeners: Sequence[tuple[str, str, int]],
        stopping: Callable[[], bool],
    ) -> None:
        self.node_id = node_id
        self.config = config
        self.store = store
        self.service = service
        self.channel = channel
        self.bound_listeners = bound_listeners
        self.stopping = stopping
        self.leaving = False  # unregistered on purpose (controlled shutdown): stay away
        self._background: set[asyncio.Task[None]] = set()

    def registration(self) -> BrokerRegistration:
        bound = {name: port for name, _, port in self.bound_listeners}
        endpoints = tuple(
            BrokerEndpoint(
                a.name,
                a.host,
                a.port or bound.get(a.name, a.port),
                self.config.security_protocol(a.name),
            )
            for a in self.config.advertised_listeners
        )
        return BrokerRegistration(self.node_id, endpoints, self.config.get("broker.rack"))

    def register_again_if_unregistered(self, delta: MetadataDelta) -> None:
        """An admin's UnregisterBroker removed this running broker: register again (with a
        new broker epoch), as a Kafka broker does when its registration is fenced."""
        if (
            self.node_id in delta.previous.brokers
            and self.node_id not in delta.image.brokers
            and not self.stopping()
            and not self.leaving
        ):
            log_event(log, "broker.registering_again", node_id=self.node_id)
            task = asyncio.create_task(self.store.register_broker(self.registration()))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def controlled_shutdown(self, timeout: float) -> None:
        """Kafka's controlled shutdown: ask the controller (ControlledShutdown) to move the
        leadership of this broker's partitions to other ISR members and take it out of the
        ISRs it is in, asking again while it answers partitions it could not move (up to
        ``controlled.shutdown.max.retries``, ``controlled.shutdown.retry.backoff.ms``
        apart, within ``timeout``); then leave the cluster (unregister)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self.config["controlled.shutdown.enable"] and self.channel is not None:
            service = self.service
            retries = int(self.config["controlled.shutdown.max.retries"])
            backoff_s = int(self.config["controlled.shutdown.retry.backoff.ms"]) / 1000
            for attempt in range(1, retries + 1):
                reg = self.store.image.brokers.get(self.node_id)
                req = ControlledShutdownRequest(
                    broker_id=self.node_id, broker_epoch=reg.epoch if reg else -1
                )
                try:
                    resp = await self.channel.request(
                        req,
                        3,
                        functools.partial(service.controlled_shutdown, req, 3),
                        timeout_s=max(0.0, deadline - loop.time()),
                        response=ControlledShutdownResponse,
                    )
                except Exception as e:  # noqa: BLE001 - no controller answered: stop anyway
                    log.warning("controlled shutdown: no controller answered: %r", e)
                    break
                remaining = [(r.topic_name, r.partition_index) for r in resp.remaining_partitions]
                log_event(
                    log,
                    "broker.controlled_shutdown",
                    attempt=attempt,
                    error=resp.error_code,
                    remaining=len(remaining),
                )
                if not resp.error_code and not remaining:
                    break
                if attempt == retries or loop.time() + backoff_s > deadline:
                    log.warning("controlled shutdown incomplete: still leading %s", remaining[:10])
                    break
                await asyncio.sleep(backoff_s)
        self.leaving = True
        try:
            await self.store.unregister_broker(self.node_id)
        except Exception:  # noqa: BLE001 - the store may be gone; the lease then expires
            log.exception("could not unregister before stopping")
