"""The etcd store's session fence (``EtcdMetadataStore.session_confirmed``), on a real etcd.

Store A reaches etcd through a TCP proxy the test cuts; store B, on the same prefix, reaches it
directly and sees what the rest of the cluster sees. The fence's promise: by the time any
other store can see A's lease gone (and a controller could give A's partitions to another
broker), A already reports its session as not confirmed, whatever its own (stale) image says;
and after the heal A counts as confirmed only once it has read the image again. Waits are on
conditions (the next delta a store publishes; A's session turning back), never on sleeps.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from tcp_proxy import ProxyLoop, TcpProxy

from gregor.cluster.etcd_store import EtcdMetadataStore
from gregor.cluster.image import BrokerEndpoint, BrokerRegistration, MetadataDelta, MetadataImage
from gregor.cluster.store import MetadataStore, open_metadata_store
from gregor.testing.etcd import EtcdProcess, etcd_binary

pytestmark = [
    pytest.mark.process,
    pytest.mark.timeout(120),
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]

SESSION_MS = 2000


def _reg(node_id: int) -> BrokerRegistration:
    return BrokerRegistration(
        node_id, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + node_id, "PLAINTEXT"),), None
    )


async def _until(s: MetadataStore, condition: object) -> MetadataImage:
    """The first image of ``s`` that meets ``condition`` (the current one included)."""
    stream = s.watch()
    try:
        while not condition(s.image):  # type: ignore[operator]
            await anext(stream)
        return s.image
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


def _lost(node_id: int, delta: MetadataDelta) -> bool:
    return node_id in delta.previous.brokers and node_id not in delta.image.brokers


def test_a_store_cut_off_from_etcd_is_unconfirmed_before_anyone_sees_its_lease_expire() -> None:
    async def scenario() -> None:
        loop = ProxyLoop()
        try:
            with EtcdProcess() as etcd:
                proxy = TcpProxy(loop, lambda: etcd.client_port)
                prefix = f"test/{uuid.uuid4().hex}"
                a = EtcdMetadataStore(
                    f"etcd://127.0.0.1:{proxy.port}/{prefix}", None, session_timeout_ms=SESSION_MS
                )
                b = EtcdMetadataStore(f"{etcd.url}/{prefix}", None, session_timeout_ms=SESSION_MS)
                await a.start()
                await b.start()
                try:
                    await a.register_broker(_reg(1))
                    await _until(b, lambda i: 1 in i.brokers)
                    assert a.session_confirmed() and b.session_confirmed()
                    # a.session_confirmed() at the moment B, then A itself, saw broker 1 go.
                    when_b_saw: list[bool] = []
                    when_a_saw: list[bool] = []

                    def record(seen: list[bool]) -> Callable[[MetadataDelta], None]:
                        def listener(delta: MetadataDelta) -> None:
                            if _lost(1, delta):
                                seen.append(a.session_confirmed())

                        return listener

                    b.subscribe(record(when_b_saw))
                    a.subscribe(record(when_a_saw))

                    proxy.cut()
                    await _until(b, lambda i: 1 not in i.brokers)  # etcd expired A's lease
                    assert when_b_saw == [False]
                    assert not a.session_confirmed()
                    assert 1 in a.image.brokers  # A has not heard: its image is stale
                    assert b.session_confirmed()

                    proxy.heal()
                    while not a.session_confirmed():  # a condition, polled: no event carries it
                        await asyncio.sleep(0.05)
                    # A learnt its lease was gone from a reload, and did not count as confirmed
                    # before that reload was published.
                    assert when_a_saw == [False]
                    await _until(b, lambda i: 1 in i.brokers)  # A registered again
                    assert a.session_confirmed()
                finally:
                    await a.close()
                    await b.close()
        finally:
            loop.close()

    asyncio.run(scenario())


def test_the_local_stores_have_no_session_to_lose(tmp_path: Path) -> None:
    for kind in ("memory", "file"):
        s = open_metadata_store(kind, tmp_path, None)
        assert s.session_confirmed() is True
