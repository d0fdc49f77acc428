"""``InProcessCluster``: N real brokers (``node.id`` 1..N) in this process, sharing one memory
metadata store, on one event loop: a cluster without etcd and without child processes.

    with InProcessCluster(3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.stop(1)       # a graceful stop: controlled shutdown, then it unregisters
        cluster.restart(1)    # start it again on its data directory and port

Theory of operation. The brokers are ``gregor.broker.broker.Broker`` built as
``InProcessBroker`` builds one (real sockets on 127.0.0.1, data in a temporary directory), each
given a view of one ``MemoryMetadataStore`` instead of the store ``metadata.store`` names. A
broker given a store is clustered, as on ``etcd://``: followers fetch from leaders over the
inter-broker listener, ISR changes go to the controller, the controller elects leaders and
sends the other brokers LeaderAndIsr, UpdateMetadata and StopReplica. The memory store keeps the
contract every store keeps (``gregor.cluster.store``); its controller is the lowest live
registered node, and ``ClusterMemoryStore`` numbers its elections (``controller_epoch``) as
the etcd store does.

One event loop (uvloop, on a background thread) runs every broker and the store: the loop owns
the image and every partition of every broker, as one broker's loop owns its own
(docs/architecture.md, the ownership rule), so the store calls each broker's listeners
synchronously on the loop, before the change returns, as its contract says. Blocking clients
drive the cluster from the test's thread; ``call(fn)`` runs a coroutine function on the loop.

Each broker's view (``MemberStore``) passes changes to the shared store and its deltas on to
the broker's own listeners; closing it (the broker stops) ends that broker's subscriptions only.
Each broker's log lines go to its own ``broker.log``: a context variable set while the broker
starts or stops, and around the calls of its metadata listeners, names it in every task it
spawns meanwhile (the acceptors', hence the connections'), and its log handler keeps only the
lines logged in its context (a line logged from an executor thread carries no context and is
left out).

What needs processes stays with ``gregor.testing.cluster.ClusterProcess``: SIGKILL, SIGSTOP,
session timeouts (the memory store's registrations end only when a broker unregisters), etcd.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import io
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from gregor.cluster.image import MetadataDelta, MetadataImage
from gregor.cluster.local_store import ChangeMethods, DeltaStream, Subscribers
from gregor.cluster.memory_store import MemoryMetadataStore
from gregor.testing.inprocess import InProcessBroker, _new_event_loop

if TYPE_CHECKING:
    from gregor.broker.broker import Broker
    from gregor.broker.config.broker_config import BrokerConfig

__all__ = ["ClusterMemoryStore", "InProcessCluster", "MemberStore"]

T = TypeVar("T")
log = logging.getLogger("gregor.testing")

#: Settings of every broker, under the cluster's ``config``: the last broker to stop has no
#: one to hand its leadership to, and Kafka's 5 s between its controlled shutdown's attempts
#: (``controlled.shutdown.retry.backoff.ms``) would hold every ``close()`` for 5 s.
TEST_DEFAULTS: dict[str, object] = {"controlled.shutdown.retry.backoff.ms": 100}

#: How long ``close()`` waits for the brokers to stop (``gregor.launch.child.stop_all``'s).
STOP_TIMEOUT_S = 30.0

#: The cluster member whose task this is (set while a member starts or stops, and around the
#: calls of its metadata listeners; the tasks started meanwhile inherit it).
_MEMBER: contextvars.ContextVar[object] = contextvars.ContextVar(
    "gregor_cluster_member", default=None
)


class ClusterMemoryStore(MemoryMetadataStore):
    """The memory store of an ``InProcessCluster``: the memory store, whose controller is the
    lowest live registered node, and which numbers the controller's elections as the etcd
    store does: each change that names another controller (not none) sets ``controller_epoch``
    one higher. (A local store serves one node, which has no election, and keeps epoch 0; the
    controller's requests to the other brokers, LeaderAndIsr, UpdateMetadata and StopReplica,
    carry the epoch and are sent only by a controller that has one.)"""

    async def _change(self, change: Callable[[MetadataImage], tuple[MetadataImage, T]]) -> T:
        def elected(image: MetadataImage) -> tuple[MetadataImage, T]:
            new, result = change(image)
            if new.controller_id >= 0 and new.controller_id != image.controller_id:
                new = dataclasses.replace(new, controller_epoch=image.controller_epoch + 1)
            return new, result

        return await super()._change(elected)


class MemberStore(ChangeMethods):
    """One broker's view of the cluster's shared memory store: the shared image and changes,
    its own listeners and ``watch()`` streams, its own ``close()``. A closed view refuses
    changes, as a closed store does, and calls its listeners no more."""

    def __init__(self, shared: MemoryMetadataStore, member: object = None) -> None:
        self._shared = shared
        self._member = member
        self._subscribers = Subscribers()
        self._closed = False
        shared.subscribe(self._forward)

    @property
    def image(self) -> MetadataImage:
        return self._shared.image

    async def start(self) -> MetadataImage:
        if self._closed:
            raise RuntimeError("metadata store is closed")
        return await self._shared.start()

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._subscribers.end()

    async def refresh(self) -> None:
        return None

    def session_confirmed(self) -> bool:
        return True  # one process: no session to lose

    def subscribe(self, listener: Callable[[MetadataDelta], None]) -> None:
        self._subscribers.subscribe(listener)

    def watch(self) -> DeltaStream:
        return self._subscribers.watch()

    async def _change(self, change: Callable[[MetadataImage], tuple[MetadataImage, T]]) -> T:
        if self._closed:
            raise RuntimeError("metadata store is closed")
        # The shared store's own change step (one writer at a time, publish before return).
        return await self._shared._change(change)

    def _forward(self, delta: MetadataDelta) -> None:
        # Called in the context of whichever broker made the change: this broker's listeners,
        # and the tasks they start, run as this broker's.
        if not self._closed:
            token = _MEMBER.set(self._member)
            try:
                self._subscribers.publish(delta)
            finally:
                _MEMBER.reset(token)


class _Member(InProcessBroker):
    """One broker of an ``InProcessCluster``: an ``InProcessBroker`` on the cluster's loop,
    given a view of the cluster's store."""

    def __init__(
        self,
        cluster: InProcessCluster,
        node_id: int,
        config: Mapping[str, object],
        data_dir: str | Path | None,
        log_level: str,
    ) -> None:
        super().__init__(config, data_dir=data_dir, log_level=log_level)
        self.cluster = cluster
        self.node_id = node_id

    def _new_broker(self, config: BrokerConfig) -> Broker:
        from gregor.broker.broker import Broker

        return Broker(config, metadata_store=MemberStore(self.cluster.store, self))

    def _log_filter(self) -> Callable[[logging.LogRecord], bool]:
        return lambda record: _MEMBER.get() is self

    async def start_async(self) -> InProcessBroker:
        _MEMBER.set(self)  # this task's context: the tasks the broker starts inherit it
        return await super().start_async()

    async def stop_async(self) -> None:
        _MEMBER.set(self)
        await super().stop_async()

    # The synchronous forms run on the cluster's loop (never a loop of the member's own).

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        return self.cluster.call(fn)

    def start(self) -> InProcessBroker:
        return self.cluster.call(self.start_async)

    def stop(self) -> None:
        self.cluster.call(self.stop_async)

    def restart(self) -> InProcessBroker:
        self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        self._cleanup()


def _task_stacks() -> str:
    out = io.StringIO()
    for task in asyncio.all_tasks():
        try:
            task.print_stack(limit=8, file=out)
        except Exception as e:  # noqa: BLE001 - uvloop's frames may have no line number
            out.write(f"{task!r}: its stack cannot be printed ({e!r})\n")
    return out.getvalue()


class InProcessCluster:
    """N real brokers sharing one memory metadata store, in this process (see the module)."""

    def __init__(
        self,
        size: int = 3,
        config: Mapping[str, object] | None = None,
        broker_config: Mapping[int, Mapping[str, object]] | None = None,
        data_dir: str | Path | None = None,
        log_level: str = "INFO",
    ) -> None:
        #: Where the members keep their logs and data (``broker-<node id>``, kept after
        #: ``close``); None: temporary directories, deleted by ``close``.
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.size = size
        self.config = dict(config or {})
        #: Settings of one broker only (``broker.rack``, say), by node id, over ``config``.
        self.broker_config = {n: dict(c) for n, c in (broker_config or {}).items()}
        self.log_level = log_level
        self.store = ClusterMemoryStore()
        self.brokers: dict[int, _Member] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.running)

    @property
    def image(self) -> MetadataImage:
        """The cluster's latest metadata image (immutable: safe to read from any thread)."""
        return self.store.image

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``fn()`` on the cluster's event loop and return its result."""
        if self._loop is None:
            raise RuntimeError("the cluster is not running")
        return asyncio.run_coroutine_threadsafe(fn(), self._loop).result()

    def start(self) -> InProcessCluster:
        loop = _new_event_loop()
        self._thread = threading.Thread(
            target=InProcessBroker._run_loop, args=(loop,), name="gregor-cluster", daemon=True
        )
        self._loop = loop
        self._thread.start()
        try:
            self.call(self.store.start)
            for node_id in range(1, self.size + 1):
                props: dict[str, object] = {
                    "node.id": node_id,
                    "metadata.store": "memory",
                    **TEST_DEFAULTS,
                }
                props.update(self.config)
                props.update(self.broker_config.get(node_id, {}))
                where = self.data_dir / f"broker-{node_id}" if self.data_dir is not None else None
                member = _Member(self, node_id, props, where, self.log_level)
                self.brokers[node_id] = member
                member.start()
        except BaseException:
            self.close()
            raise
        return self

    def broker(self, node_id: int) -> InProcessBroker:
        return self.brokers[node_id]

    def stop(self, node_id: int) -> None:
        """A graceful stop (as on SIGTERM): controlled shutdown, unregister, logs closed."""
        self.brokers[node_id].stop()

    def restart(self, node_id: int) -> InProcessBroker:
        broker = self.brokers[node_id]
        if broker.running:
            broker.stop()
        return broker.start()

    def close(self) -> None:
        """Stop the brokers one by one, the controller last, then the store and the loop. As
        ``ClusterProcess``
        SIGKILLs a broker still running ``STOP_TIMEOUT_S`` after its SIGTERM, a broker whose
        stop has not ended by then is abandoned: its stop is cancelled with the loop's other
        tasks (the stacks of the stuck tasks are logged first, to say where it hung)."""
        if self._loop is not None:
            members = list(self.brokers.values())
            left = [m.node_id for m in members]

            async def one_by_one() -> None:
                # The controller last: a broker stopping while another one unregisters wakes
                # its controller as it is cancelled, which asyncio.wait_for on Python 3.11 may
                # swallow (the controller's task then never ends; see the report of the
                # helper that wrote this).
                controller = self.store.image.controller_id
                for m in sorted(members, key=lambda m: m.node_id == controller):
                    await m.stop_async()
                    left.remove(m.node_id)

            async def stop_all() -> None:
                stops = {asyncio.ensure_future(one_by_one()): None}
                _, stuck = await asyncio.wait(stops, timeout=STOP_TIMEOUT_S)
                if stuck:
                    log.warning(
                        "brokers %s did not stop in %s s; abandoned. Tasks still running:\n%s",
                        left,
                        STOP_TIMEOUT_S,
                        _task_stacks(),
                    )
                    for t in stuck:
                        t.cancel()
                await self.store.close()

            try:
                self.call(stop_all)
            finally:
                loop, thread = self._loop, self._thread
                self._loop = self._thread = None
                loop.call_soon_threadsafe(loop.stop)
                if thread is not None:
                    thread.join()
        for member in self.brokers.values():
            member._cleanup()
        self.brokers.clear()

    def __enter__(self) -> InProcessCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
