"""BrokerLiveness reports a peer broker down from its socket, before the metadata store knows.

A real listening socket stands in for the peer's inter-broker port and a real (in-memory)
metadata store holds both registrations. Closing the peer's end of the watch connection
makes ``down()`` name the peer at once (the end is peeked from the socket); a new connection
that lasts clears it; a port that refuses after accepting marks the peer gone (and, since
this broker is the controller here, removes its registration).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gregor.broker.controller.liveness import BrokerLiveness
from gregor.cluster.image import BrokerEndpoint, BrokerRegistration
from gregor.cluster.memory_store import MemoryMetadataStore

LISTENER = "BROKER"


async def until(cond: Callable[[], bool]) -> None:
    while not cond():
        await asyncio.sleep(0.005)


def registration(node: int, port: int) -> BrokerRegistration:
    return BrokerRegistration(
        node, (BrokerEndpoint(LISTENER, "127.0.0.1", port, "PLAINTEXT"),), None
    )


def test_a_peer_whose_connection_ends_is_down_until_a_new_one_lasts_and_gone_when_its_port_refuses() -> (
    None
):
    async def main() -> None:
        accepted: list[asyncio.StreamWriter] = []

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = MemoryMetadataStore()
        await store.start()
        await store.register_broker(
            registration(1, 1)
        )  # this broker; the lowest id: the controller
        await store.register_broker(registration(2, port))
        assert store.image.controller_id == 1
        liveness = BrokerLiveness(1, LISTENER, store)
        store.subscribe(liveness.on_delta)
        liveness.reconcile(store.image)
        try:
            await until(lambda: len(accepted) == 1)
            assert liveness.down() == set()

            accepted[
                0
            ].close()  # the peer's end of the watch connection ends; its port still accepts
            await until(lambda: 2 in liveness.down())
            await until(lambda: len(accepted) == 2)  # the watch connected again
            await until(lambda: liveness.down() == set())  # and that connection lasted
            assert 2 in store.image.brokers

            server.close()
            for w in accepted:
                w.close()
            await server.wait_closed()
            await until(lambda: 2 not in store.image.brokers)  # refused: removed by the controller
            assert liveness.down() == set()  # no longer registered, so no longer watched
            assert store.image.live_broker_ids() == [1]
        finally:
            await liveness.close()
            await store.close()

    asyncio.run(main())
