"""The registry's own bookkeeping, without a broker: the parsed-schema cache stays within its
byte bound however large the schemas are."""

from __future__ import annotations

import asyncio
import json

import pytest

from gregor.schema_registry import registry as registry_module
from gregor.schema_registry.registry import Candidate, SchemaRegistry
from gregor.schema_registry.state import RegistryState


def test_the_parse_cache_is_bounded_in_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry_module, "PARSE_CACHE_BYTES", 3 * 1024 * 1024)
    reg = SchemaRegistry(RegistryState(), None)
    big = "x" * (1024 * 1024)

    async def fill() -> None:
        for i in range(10):
            text = json.dumps({"type": "record", "name": f"R{i}", "doc": big, "fields": []})
            await reg.parsed(Candidate("AVRO", text, ()))

    asyncio.run(fill())
    assert len(reg._parsed) == 2  # two of ~1 MiB each fit in 3 MiB, the third evicts the oldest
    assert reg._parsed_bytes == sum(len(k[1]) for k in reg._parsed)
    assert reg._parsed_bytes <= 3 * 1024 * 1024


def test_shared_references_are_resolved_once_per_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain where every level references the one below twice: resolving it must cost the
    number of references, not 2^depth (a few registrations would otherwise stall the registry)."""
    from gregor.schema_registry.formats import base
    from gregor.schema_registry.records import Key, Reference, SchemaValue

    state = RegistryState()
    levels = 14
    state.apply(
        Key("SCHEMA", "d0", 1), SchemaValue("d0", 1, 1, '{"type": "object"}', "JSON").encode()
    )
    for i in range(1, levels):
        props = {"a": {"$ref": f"a{i}.json"}, "b": {"$ref": f"b{i}.json"}}
        refs = (Reference(f"a{i}.json", f"d{i - 1}", 1), Reference(f"b{i}.json", f"d{i - 1}", 1))
        value = SchemaValue(
            f"d{i}", 1, i + 1, json.dumps({"type": "object", "properties": props}), "JSON", refs
        )
        state.apply(Key("SCHEMA", f"d{i}", 1), value.encode())
    built = 0

    def counting(*args: object) -> base.Dependency:
        nonlocal built
        built += 1
        return base.Dependency(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(registry_module, "Dependency", counting)
    reg = SchemaRegistry(state, None)
    top = state.subjects[f"d{levels - 1}"][1]
    deps = reg._dependencies(top.references)
    assert built == 2 * (levels - 1)  # two references per level, each version resolved once
    assert {d.name for d in base.flatten(deps)} == {
        f"{x}{i}.json" for x in "ab" for i in range(1, levels)
    }
    parsed = asyncio.run(reg.parsed(Candidate("JSON", top.schema, top.references)))
    assert parsed.schema_type == "JSON"
