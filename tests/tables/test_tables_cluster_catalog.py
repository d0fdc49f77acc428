"""Fail closed in a cluster: a table topic needs a catalog and a warehouse every broker reaches.
With the default SQLite catalog in each broker's log directory every partition leader would
keep a table of its own (and a new leader would start another), so CreateTopics and
AlterConfigs answer INVALID_CONFIG saying so, and a shared catalog is accepted."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from gregor.broker.admin.topic_admin import TopicAdmin
from gregor.protocol.errors import InvalidConfigError
from gregor.testing.inprocess_cluster import InProcessCluster

pytest.importorskip("pyiceberg")


def test_a_cluster_with_local_catalogs_refuses_table_topics() -> None:
    with InProcessCluster(2) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        futures = admin.create_topics(
            [NewTopic("orders", 2, 2, config={"iceberg.mode": "key_value"})]
        )
        with pytest.raises(Exception) as refused:
            futures["orders"].result(60)
        text = str(refused.value)
        assert "INVALID_CONFIG" in text or "InvalidConfig" in text.replace("_", ""), text
        assert "SQLite" in text and "a table of its own" in text, text
        assert "orders" not in cluster.image.topics

        # a topic without a table is fine, and turning its table on is refused the same way
        admin.create_topics([NewTopic("plain", 1, 2)])["plain"].result(60)
        resource = ConfigResource("topic", "plain", set_config={"iceberg.mode": "key_value"})
        with pytest.raises(Exception, match="a table of its own"):
            admin.alter_configs([resource])[resource].result(60)
        assert cluster.image.topics["plain"].configs.get("iceberg.mode") is None


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        ({}, "SQLite"),
        (
            {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": "http://catalog:8181"},
            "warehouse",
        ),
        (
            {
                "iceberg.catalog.type": "rest",
                "iceberg.catalog.uri": "http://catalog:8181",
                "iceberg.warehouse": "/shared/warehouse",
            },
            "warehouse",
        ),
        (
            {
                "iceberg.catalog.type": "rest",
                "iceberg.catalog.uri": "http://catalog:8181",
                "iceberg.warehouse": "s3://lake/gregor",
            },
            None,
        ),
        (
            {
                "iceberg.catalog.uri": "postgresql+psycopg://catalog/iceberg",
                "iceberg.warehouse": "s3://lake/gregor",
            },
            None,
        ),
    ],
)
def test_which_catalogs_a_cluster_accepts(settings: dict[str, str], refused: str | None) -> None:
    from gregor.broker.config.broker_config import BrokerConfig
    from gregor.storage.config import LogConfig

    config = BrokerConfig.load(None, [f"{k}={v}" for k, v in settings.items()])
    admin = TopicAdmin(config, None, LogConfig.from_props({}), lambda: None, clustered=True)  # type: ignore[arg-type]
    if refused is None:
        admin.validate_topic_configs({"iceberg.mode": "key_value"})
    else:
        with pytest.raises(InvalidConfigError, match=refused):
            admin.validate_topic_configs({"iceberg.mode": "key_value"})
    # a broker on its own keeps its local catalog
    TopicAdmin(config, None, LogConfig.from_props({}), lambda: None).validate_topic_configs(  # type: ignore[arg-type]
        {"iceberg.mode": "key_value"}
    )
