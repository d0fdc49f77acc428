"""Fast detection of a broker process that died.

Theory of operation. A broker's registration lives on its metadata-store session (an etcd
lease), so a broker that stops answering disappears after ``broker.session.timeout.ms``
whatever the reason: a pause, a network partition, a crash. A crashed process can be told
apart sooner: the operating system closes its sockets at once, and its port then refuses
connections. A broker unregisters before it closes its ports (controlled shutdown), so a
registered broker whose port refused a connection after accepting one is gone. (Before its
first accepted connection it may still be starting: bound, registered, not yet listening;
such a broker is not judged.)

Every broker keeps one idle TCP connection to the inter-broker listener of every other live
broker (``BrokerLiveness``). When that connection ends it connects again straight away: if
the port refuses (ECONNREFUSED: the host answers, nothing listens), the broker is gone, and
its registration is removed (the broker epoch watched must still be the registered one), so
the partitions it led get new leaders now instead of after the session timeout. The
controller removes any broker; the others remove only the controller (so a dead controller
is replaced as fast; each of them may try, one wins). A connection that is accepted is the
new watch; any other failure (a timeout: the host may be cut off, or paused) decides nothing
and leaves it to the session. A running broker removed by mistake registers again, with a
new epoch, as after UnregisterBroker.

Until the registration is gone from the image (an etcd round trip, and an election for the
partitions it led), the broker judged gone is in ``gone``, and ``down()`` also names a broker
whose watch connection has ended: one whose end this broker's loop has not read yet (a peek
at the socket: a client that saw the same process die may ask before the loop gets there),
and one whose port has not refused yet (a dying process closes its sockets one by one and may
still accept a connection for a moment) until a new connection has lasted ``CONFIRM_S``. This
broker's Metadata answers leave those brokers out and report the partitions they lead as
LEADER_NOT_AVAILABLE, as Kafka does for a leader that is not alive, so a client that lost its
connection to the dead leader asks again soon instead of waiting on the dead broker. A later
accepted connection, or a new registration (a new epoch), takes a broker out of ``gone``.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from gregor.broker.common.events import log_event
from gregor.cluster.image import MetadataDelta, MetadataImage
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import KafkaError

log = logging.getLogger("gregor.broker.controller")

#: Pause before connecting again after a failure that decides nothing.
RETRY_S = 0.5
CONNECT_TIMEOUT_S = 5.0
#: How long a connection made after one ended must last for the broker to count as alive.
CONFIRM_S = 0.2


class BrokerLiveness:
    def __init__(self, node_id: int, listener: str, store: MetadataStore) -> None:
        self.node_id = node_id
        self.listener = listener
        self.store = store
        self._watches: dict[int, tuple[int, asyncio.Task[None]]] = {}
        #: Brokers whose port refused after accepting a connection, by node id -> broker epoch.
        self.gone: dict[int, int] = {}
        self._connected: dict[int, socket.socket] = {}
        #: Brokers whose watch connection ended, until a new one lasts CONFIRM_S.
        self._ended: set[int] = set()

    def on_delta(self, delta: MetadataDelta) -> None:
        self.reconcile(delta.image)

    def reconcile(self, image: MetadataImage) -> None:
        wanted = {n: image.brokers[n].epoch for n in image.live_broker_ids() if n != self.node_id}
        for node, (epoch, task) in list(self._watches.items()):
            if wanted.get(node) != epoch:
                task.cancel()
                del self._watches[node]
        for node, epoch in list(self.gone.items()):
            if wanted.get(node) != epoch:
                del self.gone[node]
        self._ended.intersection_update(self._watches)
        for node, epoch in wanted.items():
            if node not in self._watches:
                ep = image.brokers[node].endpoint(self.listener)
                if ep is not None:
                    task = asyncio.create_task(
                        self._watch(node, epoch, ep.host, ep.port), name=f"liveness-{node}"
                    )
                    self._watches[node] = (epoch, task)

    async def _watch(self, node: int, epoch: int, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        reached = False
        while True:
            sock = socket.socket(
                socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM
            )
            sock.setblocking(False)
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancellation that
                # arrives as the connect fails, and the watch would then never end (close hangs).
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await loop.sock_connect(sock, (host, port))
            except ConnectionRefusedError:
                sock.close()
                if reached:
                    self.gone[node] = epoch
                    if await self._fence(node, epoch):
                        return
                await asyncio.sleep(RETRY_S)
                continue
            except (OSError, TimeoutError):
                sock.close()
                await asyncio.sleep(RETRY_S)
                continue
            reached = True
            self.gone.pop(node, None)
            self._connected[node] = sock
            # One receive outstanding at a time, never cancelled while the connection lives
            # (a receive cancelled on timeout and started again may miss the socket's end).
            recv = asyncio.ensure_future(loop.sock_recv(sock, 65536))
            try:
                if node in self._ended:
                    # A dying process may still accept for a moment: alive only if this
                    # connection lasts.
                    await asyncio.wait([recv], timeout=CONFIRM_S)
                    if not recv.done():
                        self._ended.discard(node)
                while await recv:
                    recv = asyncio.ensure_future(
                        loop.sock_recv(sock, 65536)
                    )  # it says nothing; wait for its end
            except OSError:
                pass
            finally:
                if not recv.done():
                    recv.cancel()
                self._connected.pop(node, None)
                sock.close()
            self._ended.add(node)

    def down(self) -> set[int]:
        """Brokers judged gone, and those whose watch connection has ended without this
        broker's loop having seen it yet (the end is read from the socket, not waited for)."""
        out = set(self.gone) | self._ended
        for node, sock in self._connected.items():
            try:
                if sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    out.add(node)
            except BlockingIOError:
                pass  # open, nothing to read: alive
            except OSError:
                out.add(node)  # reset
        return out

    async def _fence(self, node: int, epoch: int) -> bool:
        """Remove ``node``'s registration if this broker may; True when it is gone."""
        image = self.store.image
        reg = image.brokers.get(node)
        if reg is None or reg.epoch != epoch:
            return True
        if self.node_id != image.controller_id and node != image.controller_id:
            return False  # the controller's to judge; keep watching
        log_event(
            log,
            "broker.peer_gone",
            broker=node,
            broker_epoch=epoch,
            reason="port refuses connections",
        )
        try:
            await self.store.unregister_broker(node)
        except KafkaError as e:  # already gone (its session ended, it left, another removed it)
            log.info("broker %d not unregistered: %s", node, e)
        except Exception as e:  # noqa: BLE001 - the store is unreachable: the session ends it
            log.warning("broker %d not unregistered (its session will end it): %r", node, e)
        return True

    async def close(self) -> None:
        watches = [task for _, task in self._watches.values()]
        self._watches.clear()
        for task in watches:
            task.cancel()
        for outcome in await asyncio.gather(*watches, return_exceptions=True):
            if isinstance(outcome, Exception):  # a watch that failed on its own
                log.warning("a liveness watch had failed: %r", outcome)
