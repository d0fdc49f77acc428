"""The writer's guarantees: concurrent registrations get one id per schema and one version per
subject change; a second registry reading the same topic converges on the writer's state; a
broker restart loses nothing acknowledged and the registry writes again once the broker is
back."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gregor.testing import BrokerProcess

from .conftest import Registry, RegistryThread, avro_record


def test_concurrent_registrations(registry: Registry) -> None:
    schemas = [avro_record(f"R{i}", ("a", "int")) for i in range(6)]
    assert registry.put("/config", {"compatibility": "NONE"}).status == 200  # unrelated records

    def reg(i: int) -> tuple[int, int]:
        reply = registry.post(f"/subjects/c{i % 3}/versions", {"schema": schemas[i % 6]})
        assert reply.status == 200, reply.text
        return reply.body["id"], reply.body["version"]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(reg, range(12)))
    ids_by_schema: dict[int, set[int]] = {}
    for i, (sid, _) in enumerate(results):
        ids_by_schema.setdefault(i % 6, set()).add(sid)
    assert all(len(ids) == 1 for ids in ids_by_schema.values())  # one id per schema
    assert sorted({next(iter(v)) for v in ids_by_schema.values()}) == [1, 2, 3, 4, 5, 6]
    for subject in ("c0", "c1", "c2"):  # each subject got each of its two schemas once
        versions = registry.get(f"/subjects/{subject}/versions").body
        assert versions == [1, 2], (subject, versions)


def test_a_second_registry_converges(registry: Registry) -> None:
    reader = Registry(registry.broker, registry.topic).start()
    try:
        sid = registry.post(
            "/subjects/shared/versions", {"schema": avro_record("S", ("a", "int"))}
        ).body["id"]
        registry.put("/config/shared", {"compatibility": "NONE"})
        deadline = time.monotonic() + 120  # a bound on the wait, not a timing assertion
        while reader.get("/config/shared").status != 200:
            assert time.monotonic() < deadline, (
                "the second registry never read the writer's records"
            )
            time.sleep(0.05)
        assert reader.get(f"/schemas/ids/{sid}").body == registry.get(f"/schemas/ids/{sid}").body
        assert reader.get("/subjects/shared/versions").body == [1]
    finally:
        reader.stop()


@pytest.mark.slow  # a broker process, started twice
def test_a_broker_restart_loses_nothing() -> None:
    with BrokerProcess() as broker:
        reg = RegistryThread(broker.bootstrap_servers, "_schemas")
        try:
            reg.start()
            first = reg.post(
                "/subjects/r/versions", {"schema": avro_record("R", ("a", "int"))}
            ).body
            assert first == {"id": 1, "version": 1}
            broker.restart()
            # reads answer from the registry's state throughout; the first write after the
            # restart waits for the client to reconnect
            assert reg.get("/subjects/r/versions").body == [1]
            second = reg.post(
                "/subjects/r/versions", {"schema": avro_record("R", ("a", "int"), ("b", "int", 0))}
            )
            assert second.body == {"id": 2, "version": 2}, second.text
            reg.restart()
            assert reg.get("/subjects/r/versions").body == [1, 2]
            assert reg.get("/schemas/ids/2").status == 200
        finally:
            reg.close()
