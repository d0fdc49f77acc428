"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs against a real broker (in this
process; a process of its own for the restart) started with some static broker configs, driven by confluent-kafka and kafka-python."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType as KConfigResourceType
from kafka.admin import KafkaAdminClient

from gregor.testing import BrokerProcess, InProcessBroker

pytestmark = pytest.mark.timeout(120)

#: Upper bound of one client call (librdkafka's blocking calls need one); generous, so that
#: a busy machine is not mistaken for a broker that does not answer.
TIMEOUT = 60
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5

STATIC = {
    "log.retention.hours": "24",
    "log.segment.bytes": "104857600",
    "message.max.bytes": "2000000",
}


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(STATIC) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker: InProcessBroker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


@pytest.fixture(scope="module")
def kadmin(broker: InProcessBroker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    yield client
    client.close()


def error_code(future: object) -> int:
    try:
        future.result(timeout=TIMEOUT)  # type: ignore[attr-defined]
    except KafkaException as e:
        return e.args[0].code()
    return 0


def create(admin: AdminClient, name: str, config: dict[str, str] | None = None) -> None:
    assert error_code(admin.create_topics([NewTopic(name, 1, 1, config=config or {})])[name]) == 0


def topic_configs(admin: AdminClient, name: str) -> dict[str, ConfigEntry]:
    res = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([res])[res].result(timeout=TIMEOUT)


def values(admin: AdminClient, name: str, *keys: str) -> dict[str, tuple[str | None, int]]:
    configs = topic_configs(admin, name)
    return {k: (configs[k].value, configs[k].source) for k in keys}


def alter(
    admin: AdminClient,
    name: str,
    ops: list[tuple[str, str | None, AlterConfigOpType]],
    **kw: object,
) -> int:
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
    (f,) = admin.incremental_alter_configs([res], **kw).values()
    return error_code(f)


def assert_serving(broker: InProcessBroker, admin: AdminClient) -> None:
    assert broker.running
    admin.list_topics(timeout=TIMEOUT)
    log = broker.read_log()
    assert "request.failed" not in log and "handler failed" not in log


# --- DescribeConfigs ---


def test_describe_topic_defaults_and_static_broker_configs(admin: AdminClient) -> None:
    create(admin, "plain")
    configs = topic_configs(admin, "plain")
    got = {
        k: (configs[k].value, configs[k].source)
        for k in (
            "retention.ms",
            "segment.bytes",
            "max.message.bytes",
            "cleanup.policy",
            "segment.ms",
            "min.insync.replicas",
            "compression.type",
        )
    }
    assert got == {
        "retention.ms": ("86400000", STATIC_BROKER_CONFIG),  # log.retention.hours=24
        "segment.bytes": ("104857600", STATIC_BROKER_CONFIG),
        "max.message.bytes": ("2000000", STATIC_BROKER_CONFIG),
        "cleanup.policy": ("delete", DEFAULT_CONFIG),
        "segment.ms": ("604800000", DEFAULT_CONFIG),
        "min.insync.replicas": ("1", DEFAULT_CONFIG),
        "compression.type": ("producer", DEFAULT_CONFIG),
    }
    assert not any(e.is_read_only or e.is_sensitive for e in configs.values())
    # librdkafka asks for synonyms (DescribeConfigs v1+).
    syn = configs["retention.ms"].synonyms
    assert {(s.name, s.value, s.source) for s in syn.values()} <= {
        ("log.retention.hours", "24", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    }
    assert list(syn) == ["log.retention.hours"]


def test_describe_synonyms_kafka_python(admin: AdminClient, kadmin: KafkaAdminClient) -> None:
    create(admin, "syn", {"retention.ms": "5000"})
    res = KConfigResource(KConfigResourceType.TOPIC, "syn")
    described = kadmin.describe_configs([res], include_synonyms=True, config_filter="all")["topic"][
        "syn"
    ]
    assert described["retention.ms"]["value"] == "5000"
    assert described["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert described["retention.ms"]["synonyms"] == [
        {"name": "retention.ms", "value": "5000", "source": "DYNAMIC_TOPIC_CONFIG"},
        {"name": "log.retention.hours", "value": "24", "source": "STATIC_BROKER_CONFIG"},
        {"name": "log.retention.hours", "value": "168", "source": "DEFAULT_CONFIG"},
    ]
    assert described["segment.ms"]["synonyms"] == [
        {"name": "log.roll.hours", "value": "168", "source": "DEFAULT_CONFIG"},
    ]
    assert described["max.message.bytes"]["synonyms"] == [
        {"name": "message.max.bytes", "value": "2000000", "source": "STATIC_BROKER_CONFIG"},
        {"name": "message.max.bytes", "value": "1048588", "source": "DEFAULT_CONFIG"},
    ]
    assert described["retention.ms"]["config_type"] == "LONG"
    assert described["cleanup.policy"]["config_type"] == "LIST"
    assert described["min.cleanable.dirty.ratio"]["config_type"] == "DOUBLE"
    # "modified" (the default filter) keeps only the override.
    modified = kadmin.describe_configs([res])["topic"]["syn"]
    assert list(modified) == ["retention.ms"]


def test_describe_selected_keys_kafka_python(admin: AdminClient, kadmin: KafkaAdminClient) -> None:
    create(admin, "keys")
    res = KConfigResource(
        KConfigResourceType.TOPIC, "keys", configs={"retention.ms": None, "no.such.key": None}
    )
    described = kadmin.describe_configs([res], config_filter="all")["topic"]["keys"]
    assert list(described) == ["retention.ms"]


def test_describe_unknown_topic(broker: InProcessBroker, admin: AdminClient) -> None:
    res = ConfigResource(ResourceType.TOPIC, "ghost")
    assert error_code(admin.describe_configs([res])[res]) == 3
    assert_serving(broker, admin)


def test_describe_broker(admin: AdminClient) -> None:
    res = ConfigResource(ResourceType.BROKER, "1")
    configs = admin.describe_configs([res])[res].result(timeout=TIMEOUT)
    got = {
        k: (configs[k].value, configs[k].source, configs[k].is_read_only)
        for k in (
            "log.retention.hours",
            "log.segment.bytes",
            "num.partitions",
            "log.retention.ms",
            "log.preallocate",
        )
    }
    # Read-only unless Kafka updates the key dynamically (issue 12: dynamic broker configs).
    assert got == {
        "log.retention.hours": ("24", STATIC_BROKER_CONFIG, True),
        "log.segment.bytes": ("104857600", STATIC_BROKER_CONFIG, False),
        "num.partitions": ("1", DEFAULT_CONFIG, True),
        "log.retention.ms": (None, DEFAULT_CONFIG, False),
        "log.preallocate": ("false", DEFAULT_CONFIG, False),
    }


# --- IncrementalAlterConfigs ---


def test_incremental_set_delete_append_subtract(
    broker: InProcessBroker, admin: AdminClient
) -> None:
    create(admin, "inc")
    assert alter(admin, "inc", [("retention.ms", "60000", AlterConfigOpType.SET)]) == 0
    assert values(admin, "inc", "retention.ms") == {"retention.ms": ("60000", TOPIC_CONFIG)}
    assert 'event=topic.config_changed topic=inc configs="retention.ms=60000"' in broker.read_log()

    # APPEND starts from the effective value ("delete" by default).
    assert alter(admin, "inc", [("cleanup.policy", "compact", AlterConfigOpType.APPEND)]) == 0
    assert values(admin, "inc", "cleanup.policy") == {
        "cleanup.policy": ("delete,compact", TOPIC_CONFIG)
    }
    assert alter(admin, "inc", [("cleanup.policy", "compact", AlterConfigOpType.APPEND)]) == 0
    assert values(admin, "inc", "cleanup.policy") == {
        "cleanup.policy": ("delete,compact", TOPIC_CONFIG)
    }
    assert alter(admin, "inc", [("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)]) == 0
    assert values(admin, "inc", "cleanup.policy") == {"cleanup.policy": ("compact", TOPIC_CONFIG)}

    # DELETE falls back to the broker's value; the other override stays.
    assert alter(admin, "inc", [("retention.ms", None, AlterConfigOpType.DELETE)]) == 0
    assert values(admin, "inc", "retention.ms", "cleanup.policy") == {
        "retention.ms": ("86400000", STATIC_BROKER_CONFIG),
        "cleanup.policy": ("compact", TOPIC_CONFIG),
    }


@pytest.mark.parametrize(
    "ops, expected",
    [
        ([("no.such.config", "1", AlterConfigOpType.SET)], 40),
        ([("retention.ms", "forever", AlterConfigOpType.SET)], 40),
        ([("segment.bytes", "99999999999", AlterConfigOpType.SET)], 40),  # beyond INT
        ([("cleanup.policy", "shred", AlterConfigOpType.APPEND)], 40),
        ([("retention.ms", "5", AlterConfigOpType.APPEND)], 40),  # APPEND needs a list config
        ([("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)], 40),  # would leave it empty
        ([("compression.type", "brotli", AlterConfigOpType.SET)], 40),
        # One bad key fails the whole resource: the good SET is not applied either.
        (
            [
                ("retention.ms", "1234", AlterConfigOpType.SET),
                ("bogus", "1", AlterConfigOpType.SET),
            ],
            40,
        ),
    ],
)
def test_incremental_errors_change_nothing(
    broker: InProcessBroker, admin: AdminClient, ops: list, expected: int
) -> None:
    name = "inc-bad"
    if "inc-bad" not in admin.list_topics(timeout=TIMEOUT).topics:
        create(admin, name)
    before = topic_configs(admin, name)
    assert alter(admin, name, ops) == expected
    after = topic_configs(admin, name)
    assert {k: (e.value, e.source) for k, e in after.items()} == {
        k: (e.value, e.source) for k, e in before.items()
    }
    assert_serving(broker, admin)


def test_incremental_validate_only(admin: AdminClient) -> None:
    create(admin, "inc-dry")
    assert (
        alter(
            admin, "inc-dry", [("retention.ms", "1000", AlterConfigOpType.SET)], validate_only=True
        )
        == 0
    )
    assert values(admin, "inc-dry", "retention.ms") == {
        "retention.ms": ("86400000", STATIC_BROKER_CONFIG)
    }
    assert (
        alter(admin, "inc-dry", [("retention.ms", "x", AlterConfigOpType.SET)], validate_only=True)
        == 40
    )


def test_incremental_unknown_topic(admin: AdminClient) -> None:
    assert alter(admin, "ghost", [("retention.ms", "1000", AlterConfigOpType.SET)]) == 3


def test_incremental_read_only_broker_config_is_refused(
    broker: InProcessBroker, admin: AdminClient
) -> None:
    res = ConfigResource(
        ResourceType.BROKER,
        "1",
        incremental_configs=[
            ConfigEntry("log.retention.hours", "1", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    (f,) = admin.incremental_alter_configs([res]).values()
    with pytest.raises(KafkaException) as e:
        f.result(timeout=TIMEOUT)
    assert e.value.args[0].code() == 42
    # Kafka's refusal of a read-only key (issue 12 added the dynamic ones).
    assert (
        e.value.args[0].str() == "Cannot update these configs dynamically: Set(log.retention.hours)"
    )
    assert_serving(broker, admin)


def test_override_takes_effect_on_produce(broker: InProcessBroker, admin: AdminClient) -> None:
    create(admin, "small")
    assert alter(admin, "small", [("max.message.bytes", "200", AlterConfigOpType.SET)]) == 0
    results: list[object] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce(
        "small", b"x" * 1000, on_delivery=lambda err, msg: results.append(err and err.code())
    )
    producer.flush(TIMEOUT)
    assert results == [10]  # MSG_SIZE_TOO_LARGE
    assert alter(admin, "small", [("max.message.bytes", None, AlterConfigOpType.DELETE)]) == 0
    results.clear()
    producer.produce(
        "small", b"x" * 1000, on_delivery=lambda err, msg: results.append(err and err.code())
    )
    producer.flush(TIMEOUT)
    assert results == [None]


# --- AlterConfigs (replace the whole override set) ---


def test_alter_configs_replaces_overrides(admin: AdminClient) -> None:
    create(admin, "replace", {"cleanup.policy": "compact", "retention.ms": "5000"})
    res = ConfigResource(ResourceType.TOPIC, "replace", set_config={"retention.ms": "7000"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (f,) = admin.alter_configs([res]).values()
    assert error_code(f) == 0
    assert values(admin, "replace", "retention.ms", "cleanup.policy") == {
        "retention.ms": ("7000", TOPIC_CONFIG),
        "cleanup.policy": ("delete", DEFAULT_CONFIG),
    }


def test_alter_configs_errors_kafka_python(
    broker: InProcessBroker, admin: AdminClient, kadmin: KafkaAdminClient
) -> None:
    create(admin, "kp-alter", {"retention.ms": "5000"})
    cases = [
        KConfigResource(KConfigResourceType.TOPIC, "kp-alter", configs={"no.such.config": "1"}),
        KConfigResource(KConfigResourceType.TOPIC, "kp-alter", configs={"segment.ms": "0"}),
        KConfigResource(KConfigResourceType.TOPIC, "kp-ghost", configs={"retention.ms": "1"}),
        KConfigResource(KConfigResourceType.BROKER, "1", configs={"log.retention.hours": "1"}),
    ]
    got = [kadmin.alter_configs([c], raise_on_unknown=False, incremental=False) for c in cases]
    assert got[0]["topic"]["kp-alter"].startswith("[Error 40]")
    assert "Unknown topic config name: no.such.config" in got[0]["topic"]["kp-alter"]
    assert got[1]["topic"]["kp-alter"].startswith("[Error 40]")
    assert "segment.ms" in got[1]["topic"]["kp-alter"]
    assert got[2]["topic"]["kp-ghost"].startswith("[Error 3]")
    assert got[3]["broker"]["1"] == (
        "[Error 42] InvalidRequestError: Cannot update these configs dynamically: "
        "Set(log.retention.hours)"
    )
    assert values(admin, "kp-alter", "retention.ms", "segment.ms") == {
        "retention.ms": ("5000", TOPIC_CONFIG),
        "segment.ms": ("604800000", DEFAULT_CONFIG),
    }
    # A good replace through kafka-python's legacy path.
    ok = kadmin.alter_configs(
        [KConfigResource(KConfigResourceType.TOPIC, "kp-alter", configs={"segment.ms": "3600000"})],
        incremental=False,
    )
    assert ok == {"topic": {"kp-alter": "OK"}}
    # kafka-python carries the other modified keys over itself, so retention.ms survives.
    assert values(admin, "kp-alter", "retention.ms", "segment.ms") == {
        "retention.ms": ("5000", TOPIC_CONFIG),
        "segment.ms": ("3600000", TOPIC_CONFIG),
    }
    assert_serving(broker, admin)


@pytest.mark.slow
def test_overrides_survive_restart() -> None:
    # A process of its own: the restart is a new broker process reading its data directory.
    with BrokerProcess(STATIC) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        _overrides_survive_restart(broker, admin)


def _overrides_survive_restart(broker: BrokerProcess, admin: AdminClient) -> None:
    create(admin, "durable", {"retention.ms": "9000"})
    assert alter(admin, "durable", [("cleanup.policy", "compact", AlterConfigOpType.SET)]) == 0
    broker.restart()
    assert values(admin, "durable", "retention.ms", "cleanup.policy", "segment.bytes") == {
        "retention.ms": ("9000", TOPIC_CONFIG),
        "cleanup.policy": ("compact", TOPIC_CONFIG),
        "segment.bytes": ("104857600", STATIC_BROKER_CONFIG),
    }
