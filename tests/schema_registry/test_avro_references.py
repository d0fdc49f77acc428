"""Avro typed columns of subjects with schema references (issue 38): a real in-process broker
with Gregor's registry; confluent-kafka registers the referenced and the referencing schemas and
its ``AvroSerializer`` writes the values; the Spark source's planning (``parse_columns``)
resolves the reader's references and the column decoder the writers', no Spark session needed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

pytest.importorskip("pyspark")
pytest.importorskip("polars")

from gregor.columns import avro_columns as ac  # noqa: E402
from gregor.columns.avro_references import inline  # noqa: E402
from gregor.schema_registry.server import SchemaRegistryServer  # noqa: E402
from gregor.spark.avro_options import parse_columns  # noqa: E402
from gregor.spark.options import OptionError  # noqa: E402
from gregor.testing import InProcessBroker  # noqa: E402

ADDRESS = {
    "type": "record",
    "name": "Address",
    "namespace": "geo",
    "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
}
CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "namespace": "crm",
    "fields": [{"name": "name", "type": "string"}, {"name": "home", "type": "geo.Address"}],
}
INVOICE = {
    "type": "record",
    "name": "Invoice",
    "namespace": "billing",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "crm.Customer"},
        {"name": "total", "type": "double"},
    ],
}


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    with InProcessBroker({"num.partitions": 1}) as broker:
        server = SchemaRegistryServer(
            {"bootstrap.servers": broker.bootstrap_servers},
            "http://127.0.0.1:0",
            topic="_schemas_references",
        )

        async def start() -> SchemaRegistryServer:
            return await server.start()

        broker.call(start)
        try:
            client = SchemaRegistryClient({"url": server.url})
            client.register_schema("address", Schema(json.dumps(ADDRESS), "AVRO"))
            client.register_schema(
                "customer",
                Schema(
                    json.dumps(CUSTOMER), "AVRO", [SchemaReference("geo.Address", "address", 1)]
                ),
            )
            client.register_schema(
                "invoices-value",
                Schema(
                    json.dumps(INVOICE), "AVRO", [SchemaReference("crm.Customer", "customer", 1)]
                ),
            )
            yield server.url
        finally:
            broker.call(server.stop)


def invoice(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "customer": {"name": f"c{i}", "home": {"city": f"town{i % 3}", "zip": 1000 + i}},
        "total": i * 1.5,
    }


def test_references_are_inlined_at_their_first_use() -> None:
    whole = json.loads(
        inline(json.dumps(INVOICE), {"crm.Customer": CUSTOMER, "geo.Address": ADDRESS})
    )
    customer = whole["fields"][1]["type"]
    # the definition keeps its own namespace inside billing.Invoice, and the reference it makes
    # itself is inlined too
    assert (customer["name"], customer["namespace"]) == ("Customer", "crm")
    assert customer["fields"][1]["type"]["name"] == "Address"
    assert customer["fields"][1]["type"]["namespace"] == "geo"


def test_values_of_a_subject_with_references_read_as_typed_columns(registry: str) -> None:
    (spec,) = parse_columns(
        {"valueFormat": "avro", "schemaRegistry": registry, "subscribe": "invoices"}
    )
    serialize = AvroSerializer(
        SchemaRegistryClient({"url": registry}),
        None,
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    ctx = SerializationContext("invoices", MessageField.VALUE)
    values = [serialize(invoice(i), ctx) for i in range(20)]
    values[7] = b"\x00" + values[7][1:5] + b"\xff"  # a datum cut short
    got = ac.decode_column(
        pa.array([*values, None], pa.binary()),
        replace(spec, mode=ac.PERMISSIVE),
        "invoices",
        0,
        pa.array(range(21), pa.int64()),
    ).to_pylist()
    assert got == [None if i == 7 else invoice(i) for i in range(20)] + [None]


def test_references_of_json_columns_are_refused_by_name(registry: str) -> None:
    client = SchemaRegistryClient({"url": registry})
    event = {"type": "object", "properties": {"kind": {"type": "string"}}}
    client.register_schema("kind", Schema(json.dumps(event), "JSON"))
    wrapper = {"type": "object", "properties": {"k": {"$ref": "kind.json"}}}
    client.register_schema(
        "events-value",
        Schema(json.dumps(wrapper), "JSON", [SchemaReference("kind.json", "kind", 1)]),
    )
    with pytest.raises(OptionError) as e:
        parse_columns({"valueFormat": "json", "schemaRegistry": registry, "subscribe": "events"})
    assert str(e.value) == (
        "valueFormat 'json': subject 'events-value' has schema references, which the json typed "
        "columns do not support yet (Avro's do)"
    )
