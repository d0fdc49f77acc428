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
