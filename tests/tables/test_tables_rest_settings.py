"""The REST catalog's broker settings (``iceberg.catalog.type=rest``): what a broker gives
pyiceberg's ``RestCatalog``, and the settings it cannot honour, refused at start with a
ConfigError. The catalog itself, Apache Iceberg's REST server, is in
``test_tables_rest_catalog.py``."""

from __future__ import annotations

import pytest

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.tables.settings import catalog_settings

URI = "http://127.0.0.1:8181"


def rest(**more: str) -> dict[str, str]:
    return {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": URI, **more}


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        (None, "iceberg.catalog.type=rest needs iceberg.catalog.uri (the REST catalog's URL)"),
        ("", "iceberg.catalog.type=rest needs iceberg.catalog.uri (the REST catalog's URL)"),
        ("127.0.0.1:8181", "iceberg.catalog.uri='127.0.0.1:8181' is not the http:// or https://"),
        ("http://", "iceberg.catalog.uri='http://' is not the http:// or https:// URL"),
        ("sqlite:///x.db", "iceberg.catalog.uri='sqlite:///x.db' is not the http:// or https://"),
    ],
)
def test_a_rest_catalog_without_a_url_stops_the_broker_at_start(uri: str | None, why: str) -> None:
    props = {"iceberg.catalog.type": "rest"}
    if uri is not None:
        props["iceberg.catalog.uri"] = uri
    with pytest.raises(ConfigError) as e:
        BrokerConfig(props)
    assert str(e.value).startswith(f"topics as tables: {why}")


def test_a_rest_catalog_is_given_its_url_and_no_warehouse_of_the_brokers_disk() -> None:
    settings = catalog_settings(rest(), "/var/lib/gregor")
    assert settings.type == "rest"
    assert settings.uri == URI
    assert settings.load_properties() == {"type": "rest", "uri": URI}
    assert settings.namespace == "gregor"
    assert BrokerConfig(rest())["iceberg.catalog.uri"] == URI


@pytest.mark.parametrize(
    "warehouse", ["my_warehouse", "s3://bucket/tables", "file:///srv/warehouse", "/srv/warehouse"]
)
def test_a_rest_catalogs_warehouse_is_given_as_it_is(warehouse: str) -> None:
    settings = catalog_settings(rest(**{"iceberg.warehouse": warehouse}), "/var/lib/gregor")
    assert settings.load_properties() == {"type": "rest", "uri": URI, "warehouse": warehouse}


def test_a_rest_catalog_takes_the_s3_file_io_settings_with_an_s3_warehouse() -> None:
    settings = catalog_settings(
        rest(
            **{
                "iceberg.warehouse": "s3://bucket/tables",
                "iceberg.s3.endpoint": "http://127.0.0.1:9000",
            }
        ),
        "/var/lib/gregor",
    )
    assert settings.load_properties() == {
        "type": "rest",
        "uri": URI,
        "warehouse": "s3://bucket/tables",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "us-east-1",
    }
    with pytest.raises(ConfigError, match=r"iceberg\.s3\.endpoint set, but iceberg\.warehouse="):
        BrokerConfig(rest(**{"iceberg.s3.endpoint": "http://127.0.0.1:9000"}))
