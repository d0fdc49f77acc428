"""Dynamic password configs (issue 35, section 4): never described, encrypted at rest with
``password.encoder.secret``, refused without it, as Kafka's brokers do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from handler_wire import Wire

from gregor.broker.config.topic_configs import ConfigType
from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.describe_configs import DescribeConfigsRequest
from gregor.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from gregor.security.password_encoder import PasswordEncoder
from gregor.testing import InProcessBroker

BROKER = 4
SET, DELETE = 0, 1
IAC = IncrementalAlterConfigsRequest.Resources
SECRET = "encoder-secret-for-tests"
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="ibp" password="jaas-pw-42";'
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="plain-pw-43" user_admin="plain-pw-43";'
)
PASSWORDS = {
    "sasl.jaas.config": JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": JAAS.replace("42", "44"),
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.ssl.ssl.keystore.password": "keystore-pw-45",
    "listener.name.ssl.ssl.key.password": "key-pw-46",
    "listener.name.ssl.ssl.truststore.password": "truststore-pw-47",
}
SECRETS = (
    "jaas-pw-42",
    "jaas-pw-44",
    "plain-pw-43",
    "keystore-pw-45",
    "key-pw-46",
    "truststore-pw-47",
)


def _incremental(
    wire: Wire, name: str, *ops: tuple[str, int, str | None]
) -> tuple[int, str | None]:
    req = IncrementalAlterConfigsRequest(
        resources=[
            IAC(
                resource_type=BROKER,
                resource_name=name,
                configs=[IAC.Configs(name=k, config_operation=op, value=v) for k, op, v in ops],
            )
        ],
        validate_only=False,
    )
    r = wire.request(req, 1).responses[0]
    return r.error_code, r.error_message


def _describe(wire: Wire, name: str, *keys: str) -> dict[str, tuple]:
    req = DescribeConfigsRequest(
        resources=[
            DescribeConfigsRequest.Resources(
                resource_type=BROKER, resource_name=name, configuration_keys=list(keys) or None
            )
        ],
        include_synonyms=True,
        include_documentation=False,
    )
    result = wire.request(req, 4).results[0]
    assert result.error_code == 0, result.error_message
    return {
        c.name: (c.value, c.is_sensitive, c.config_type, [s.value for s in c.synonyms])
        for c in result.configs
    }


def _metadata_file(wire: Wire) -> Path:
    return wire.broker.data_dir / "logs" / "cluster-metadata.json"


def test_without_password_encoder_secret_password_configs_are_refused(wire: Wire) -> None:
    code, message = _incremental(wire, "1", ("sasl.jaas.config", SET, JAAS))
    assert code == ErrorCode.INVALID_REQUEST
    assert message == "Password encoder secret not configured"
    assert "jaas-pw-42" not in _metadata_file(wire).read_text()
    assert wire.broker.broker.image.config_resources == {}  # type: ignore[union-attr]
    # Other dynamic configs are not affected.
    assert _incremental(wire, "1", ("log.retention.ms", SET, "1000")) == (0, None)


@pytest.mark.parametrize("broker_config", [{"password.encoder.secret": SECRET}])
def test_password_configs_are_described_null_and_stored_encrypted(wire: Wire) -> None:
    assert _incremental(wire, "1", *((k, SET, v) for k, v in PASSWORDS.items())) == (0, None)
    described = _describe(wire, "1")
    for name in PASSWORDS:
        assert described[name] == (None, True, ConfigType.PASSWORD, [None]), name
    # The broker's own password keys are never described either.
    assert described["password.encoder.secret"][:3] == (None, True, ConfigType.PASSWORD)
    assert described["log.retention.hours"][1] is False
    # At rest: encrypted with the secret, in a file only the broker's user can read.
    path = _metadata_file(wire)
    text = path.read_text()
    assert not any(secret in text for secret in SECRETS)
    assert path.stat().st_mode & 0o777 == 0o600
    stored = next(
        r["configs"]
        for r in json.loads(text)["config_resources"]
        if r["resource_type"] == BROKER and r["name"] == "1"
    )
    encoder = PasswordEncoder(SECRET)
    assert {k: encoder.decode(v) for k, v in stored.items()} == PASSWORDS
    # The log says nothing of them.
    log = wire.broker.read_log()
    assert not any(secret in log for secret in SECRETS)


@pytest.mark.parametrize("broker_config", [{"password.encoder.secret": SECRET}])
def test_kafkas_refusals_of_password_and_listener_configs(wire: Wire) -> None:
    # Kafka 4's words (without ZooKeeper-era Kafka's "Invalid config value for resource ...").
    assert _incremental(wire, "1", ("ssl.keystore.password", SET, "x")) == (
        ErrorCode.INVALID_REQUEST,
        "These security configs can be dynamically updated only per-listener using "
        "the listener prefix: Set(ssl.keystore.password)",
    )
    assert _incremental(wire, "", ("listener.name.ssl.ssl.key.password", SET, "x")) == (
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs at default cluster level, broker id must be "
        "specified: Set(listener.name.ssl.ssl.key.password)",
    )
    assert _incremental(wire, "1", ("listener.name.ssl.ssl.client.auth", SET, "required")) == (
        ErrorCode.INVALID_REQUEST,
        "Cannot update these configs dynamically: Set(listener.name.ssl.ssl.client.auth)",
    )
    # A listener-level connection limit may be set for all brokers.
    assert _incremental(wire, "", ("listener.name.plaintext.max.connections", SET, "50")) == (
        0,
        None,
    )
    assert _describe(wire, "", "listener.name.plaintext.max.connections") == {
        "listener.name.plaintext.max.connections": ("50", False, ConfigType.INT, []),
    }
    assert wire.broker.broker.image.config_resource(BROKER, "1") == {}  # type: ignore[union-attr]


@pytest.mark.parametrize("broker_config", [{"password.encoder.secret": SECRET}])
def test_incremental_changes_keep_the_other_passwords(wire: Wire) -> None:
    assert _incremental(
        wire,
        "1",
        ("sasl.jaas.config", SET, JAAS),
        ("listener.name.ssl.ssl.key.password", SET, "key-pw-46"),
    ) == (0, None)
    assert _incremental(
        wire,
        "1",
        ("listener.name.ssl.ssl.key.password", DELETE, None),
        ("log.retention.ms", SET, "5000"),
    ) == (0, None)
    stored = wire.broker.broker.image.config_resource(BROKER, "1")  # type: ignore[union-attr]
    assert set(stored) == {"sasl.jaas.config", "log.retention.ms"}
    assert PasswordEncoder(SECRET).decode(stored["sasl.jaas.config"]) == JAAS


def _image_resource(broker: InProcessBroker, name: str) -> dict[str, str]:
    async def read() -> dict[str, str]:
        assert broker.broker is not None
        return dict(broker.broker.image.config_resource(BROKER, name))

    return broker.call(read)


def test_the_secret_can_be_rotated_and_clear_values_are_encrypted_at_start(tmp_path: Path) -> None:
    old, new = "the-old-secret", "the-new-secret"
    # An older Gregor stored a password config in clear: at the next start without a secret
    # the broker says so; with one it encrypts it.
    with InProcessBroker(data_dir=tmp_path) as b:

        async def store_clear() -> None:
            assert b.broker is not None
            await b.broker.store.alter_config_resource(BROKER, "1", {"sasl.jaas.config": JAAS})

        b.call(store_clear)
        b.restart()
        assert "event=config.passwords_in_clear" in b.read_log()
    with InProcessBroker({"password.encoder.secret": old}, data_dir=tmp_path) as b:
        stored = _image_resource(b, "1")["sasl.jaas.config"]
        assert PasswordEncoder(old).decode(stored) == JAAS
    with InProcessBroker(
        {"password.encoder.secret": new, "password.encoder.old.secret": old}, data_dir=tmp_path
    ) as b:
        stored = _image_resource(b, "1")["sasl.jaas.config"]
        assert PasswordEncoder(new).decode(stored) == JAAS
    text = (tmp_path / "logs" / "cluster-metadata.json").read_text()
    assert "jaas-pw-42" not in text


def test_a_value_no_secret_decodes_is_ignored_as_kafka_does() -> None:
    from gregor.broker.config.dynamic_configs import decode_passwords

    encoded = PasswordEncoder("one").encode("pw")
    assert decode_passwords({"sasl.jaas.config": encoded, "a": "b"}, PasswordEncoder("two")) == {
        "a": "b"
    }
    assert decode_passwords(
        {"sasl.jaas.config": encoded}, PasswordEncoder("two"), PasswordEncoder("one")
    ) == {"sasl.jaas.config": "pw"}


@pytest.mark.interop
def test_confluent_admin_sees_no_value(tmp_path: Path) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    with InProcessBroker({"password.encoder.secret": SECRET}, data_dir=tmp_path) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        resource = ConfigResource(
            "BROKER",
            "1",
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in (("sasl.jaas.config", JAAS), ("log.retention.ms", "7000"))
            ],
        )
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(timeout=30)
        described = admin.describe_configs([ConfigResource("BROKER", "1")])
        entries = next(iter(described.values())).result(timeout=30)
        jaas = entries["sasl.jaas.config"]
        assert (jaas.value, jaas.is_sensitive) == (None, True)
        assert (entries["log.retention.ms"].value, entries["log.retention.ms"].is_sensitive) == (
            "7000",
            False,
        )


def test_the_encoder_round_trips_and_detects_a_wrong_secret() -> None:
    from gregor.security.password_encoder import GCM, PasswordDecodeError

    for cipher in ("AES/CBC/PKCS5Padding", GCM):
        encoder = PasswordEncoder(SECRET, cipher=cipher, key_length=256)
        encoded = encoder.encode("pässword")
        assert "pässword" not in encoded and encoded.startswith(
            "keyFactoryAlgorithm:PBKDF2WithHmacSHA512,"
        )
        assert f"cipherAlgorithm:{cipher}" in encoded
        assert encoder.decode(encoded) == "pässword"
        assert encoder.encode("pässword") != encoded  # a fresh salt and IV each time
        with pytest.raises(PasswordDecodeError):
            PasswordEncoder("another secret").decode(encoded)
    assert SECRET not in repr(PasswordEncoder(SECRET))
