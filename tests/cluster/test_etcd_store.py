"""The etcd store beyond the common contract: several stores on one prefix (as several brokers
are), leases that expire with a killed process, controller election and failover, producer-id
blocks allocated from two stores at once, and failing closed when etcd does not answer.

Every test runs against a real etcd (``EtcdProcess``); a store that must die without a clean
close runs in a child process that the test SIGKILLs. Waits are on conditions (the next delta
a store publishes), bounded by the test timeout, never on sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator

import pytest

from gregor.cluster.image import BrokerEndpoint, BrokerRegistration, MetadataImage
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import TopicAlreadyExistsError
from gregor.testing.etcd import EtcdProcess, etcd_binary, free_port

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)"),
]

SESSION_MS = 2000


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdProcess]:
    with EtcdProcess() as server:
        yield server


@pytest.fixture
def url(etcd: EtcdProcess) -> str:
    return f"{etcd.url}/test/{uuid.uuid4().hex}"


def store(url: str, cluster_id: str | None = None) -> MetadataStore:
    from gregor.cluster.etcd_store import EtcdMetadataStore

    return EtcdMetadataStore(url, cluster_id, session_timeout_ms=SESSION_MS)


def reg(node_id: int) -> BrokerRegistration:
    return BrokerRegistration(
        node_id, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + node_id, "PLAINTEXT"),), None
    )


async def until(s: MetadataStore, condition: Callable[[MetadataImage], bool]) -> MetadataImage:
    """Wait for the first image of ``s`` that meets ``condition`` (the current one included)."""
    stream = s.watch()
    try:
        while not condition(s.image):
            await anext(stream)
        return s.image
    finally:
        await stream.aclose()  # type: ignore[attr-defined]


_MEMBER = """
import asyncio, sys
from gregor.cluster.etcd_store import EtcdMetadataStore
from gregor.cluster.image import BrokerEndpoint, BrokerRegistration

async def main():
    s = EtcdMetadataStore(sys.argv[1], None, session_timeout_ms=int(sys.argv[3]))
    await s.start()
    node = int(sys.argv[2])
    await s.register_broker(BrokerRegistration(
        node, (BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9000 + node, "PLAINTEXT"),), None))
    print("registered", s.image.controller_id, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def member(url: str, node_id: int) -> tuple[subprocess.Popen[str], int]:
    """A store in a child process that registers ``node_id``; returns it and the controller it saw."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEMBER, url, str(node_id), str(SESSION_MS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    assert line[:1] == ["registered"], f"member {node_id} did not register: {line}"
    return proc, int(line[1])


def test_a_change_by_one_store_reaches_the_others_through_the_watch(url: str) -> None:
    async def main() -> None:
        a, b = store(url), store(url)
        await a.start()
        await b.start()
        try:
            assert b.image.cluster_id == a.image.cluster_id
            seen = b.watch()
            t = await a.create_topic("orders", [[1], [2]], {"retention.ms": "5"})
            delta = await anext(seen)
            assert delta.created_topics == (t,) and b.image.topic("orders") == t
            assert b.image.version == a.image.version
            await a.register_broker(reg(1))
            image = await until(b, lambda i: 1 in i.brokers)
            assert (
                dataclasses.replace(image.brokers[1], epoch=-1) == reg(1)
                and image.brokers[1].epoch > 0
                and image.controller_id == 1
            )
            # b computes on a's image: its change is refused the same way, and commits on top.
            with pytest.raises(TopicAlreadyExistsError):
                await b.create_topic("orders", [[1]], {})
            await b.delete_topic("orders")
            await until(a, lambda i: i.topic("orders") is None)
            assert a.image.version == b.image.version
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_writers_that_race_lose_no_update(url: str) -> None:
    async def main() -> None:
        a, b = store(url), store(url)
        await a.start()
        await b.start()
        try:
            v0 = a.image.version
            await asyncio.gather(
                *(a.create_topic(f"a{i}", [[1]], {}) for i in range(10)),
                *(b.create_topic(f"b{i}", [[1]], {}) for i in range(10)),
            )
            want = sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
            for s in (a, b):
                image = await until(s, lambda i: len(i.topics) == 20)
                assert sorted(image.topics) == want and image.version == v0 + 20
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_producer_id_blocks_from_two_stores_never_overlap(url: str) -> None:
    async def main() -> None:
        a, b = store(url), store(url)
        await a.start()
        await b.start()
        try:
            firsts = await asyncio.gather(
                *(a.allocate_producer_ids(1000) for _ in range(15)),
                *(b.allocate_producer_ids(1000) for _ in range(15)),
            )
            assert sorted(firsts) == list(range(0, 30_000, 1000))
            image = await until(a, lambda i: i.next_producer_id == 30_000)
            assert image.next_producer_id == 30_000
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_a_killed_member_disappears_when_its_lease_ends_and_the_controller_moves(url: str) -> None:
    async def main() -> None:
        watcher = store(url)
        await watcher.start()
        first, controller = member(url, 1)
        second, _ = member(url, 2)
        try:
            assert controller == 1
            image = await until(watcher, lambda i: sorted(i.brokers) == [1, 2])
            assert image.controller_id == 1
            first.kill()  # no clean close: the lease stays until its TTL runs out
            image = await until(
                watcher, lambda i: sorted(i.brokers) == [2] and i.controller_id == 2
            )
            assert image.live_broker_ids() == [2]
            second.kill()
            image = await until(watcher, lambda i: not i.brokers and i.controller_id == -1)
        finally:
            for p in (first, second):
                p.kill()
                p.wait()
            await watcher.close()

    asyncio.run(main())


def test_a_closed_store_unregisters_at_once(url: str) -> None:
    async def main() -> None:
        a, b = store(url), store(url)
        await a.start()
        await b.start()
        try:
            await a.register_broker(reg(1))
            await b.register_broker(reg(2))
            assert b.image.controller_id == 1
            await a.close()  # revokes the lease: no waiting for the session timeout
            image = await until(b, lambda i: sorted(i.brokers) == [2] and i.controller_id == 2)
            assert dataclasses.replace(image.brokers[2], epoch=-1) == reg(2)
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_the_store_follows_etcd_through_a_restart(url: str, etcd: EtcdProcess) -> None:
    async def main() -> None:
        a, b = store(url), store(url)
        await a.start()
        await b.start()
        try:
            await a.create_topic("before", [[1]], {})
            await until(b, lambda i: i.topic("before") is not None)
            etcd.restart()
            await a.create_topic("after", [[1]], {})
            image = await until(b, lambda i: i.topic("after") is not None)
            assert sorted(image.topics) == ["after", "before"]
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_an_unreachable_etcd_fails_at_start() -> None:
    from gregor.cluster.etcd_store import EtcdUnavailableError

    port = free_port()  # nothing listens there

    async def main() -> None:
        s = store(f"etcd://127.0.0.1:{port}/x")
        with pytest.raises(
            EtcdUnavailableError, match=f"no etcd endpoint answered.*127.0.0.1:{port}"
        ):
            await s.start()

    asyncio.run(main())
