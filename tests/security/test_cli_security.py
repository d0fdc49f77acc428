"""``gregor acls`` and ``gregor users`` against a real broker, checked with confluent-kafka.

One broker with Kafka's authorizer settings: a PLAINTEXT listener whose principal
(User:ANONYMOUS) is a super user, where the commands connect, and a SASL_PLAINTEXT listener
(PLAIN and SCRAM) where ordinary users log in with confluent-kafka. What the commands add or
remove is read back with confluent-kafka's own admin client, and its effect is seen by a
confluent-kafka producer as that user; passwords never reach the broker's log.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from certs import Pki
from click.testing import CliRunner
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramMechanism,
)

from gregor.cli.main import main
from gregor.testing import BrokerProcess

pytestmark = pytest.mark.interop

BUDGET_S = 30.0
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
    }
    with BrokerProcess(config=config) as b:
        yield b
        log = b.read_log()
        for secret in ("alice-secret", "carol-pw-256", "carol-pw-512"):
            assert secret not in log


def gregor(broker: BrokerProcess, *args: str, input: str | None = None) -> tuple[int, str, str]:  # noqa: A002
    r = CliRunner().invoke(main, [*args, "-b", broker.bootstrap("PLAINTEXT")], input=input)
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


_ADMINS: dict[str, AdminClient] = {}


def ck_admin(broker: BrokerProcess) -> AdminClient:
    """One kept per broker (a client dropped early fails its pending futures)."""
    key = broker.bootstrap("PLAINTEXT")
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient({"bootstrap.servers": key})
    return _ADMINS[key]


def acls_on(broker: BrokerProcess, topic: str) -> set[tuple[str, str, str, str, str]]:
    f = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    found = ck_admin(broker).describe_acls(f).result(BUDGET_S)
    return {
        (
            b.name,
            b.resource_pattern_type.name,
            b.principal,
            b.operation.name,
            b.permission_type.name,
        )
        for b in found
    }


def produce_as(
    broker: BrokerProcess, topic: str, mechanism: str, user: str, password: str
) -> KafkaError | None:
    """Produce one record as ``user``: None when acknowledged, else the delivery error or, when
    the login itself fails, the client's authentication error."""
    errors: list[KafkaError] = []
    p = Producer(
        {
            "bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "message.timeout.ms": int(BUDGET_S * 1000),
            "error_cb": errors.append,
        }
    )
    result: list[KafkaError | None] = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: result.append(err))
    while not result and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        p.poll(0.05)  # bounded by message.timeout.ms: the delivery report comes by then
    return (
        result[0] if result else next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)
    )


def test_acls_add_list_remove_seen_by_confluent_kafka_and_enforced(broker: BrokerProcess) -> None:
    topic, other = f"orders-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    code, out, _ = gregor(
        broker, "acls", "add", "--allow-principal", "User:alice", "--producer", "--topic", topic
    )
    assert code == 0
    assert out.splitlines()[0] == (
        f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)`:"
    )
    assert acls_on(broker, topic) == {
        (topic, "LITERAL", "User:alice", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")
    }
    assert produce_as(broker, topic, "PLAIN", "alice", "alice-secret") is None
    denied = produce_as(broker, other, "PLAIN", "alice", "alice-secret")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    code, out, _ = gregor(broker, "acls", "list", "--topic", topic)
    assert code == 0
    entries = [ln.strip() for ln in out.splitlines() if ln.startswith(" \t")]
    assert sorted(entries) == sorted(
        f"(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)"
        for op in ("WRITE", "DESCRIBE", "CREATE")
    )
    code, out, _ = gregor(broker, "acls", "list", "--principal", "User:nobody")
    assert code == 0 and out == ""

    code, out, _ = gregor(broker, "acls", "remove", "--topic", topic, input="n\n")
    assert code == 1 and acls_on(broker, topic) != set()  # asked, and said no
    code, out, _ = gregor(broker, "acls", "remove", "--topic", topic, "--force")
    assert code == 0 and out.count("operation=") == 3
    assert acls_on(broker, topic) == set()
    denied = produce_as(broker, topic, "PLAIN", "alice", "alice-secret")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_acls_prefixed_deny_and_targeted_remove(broker: BrokerProcess) -> None:
    prefix = f"pay-{uuid.uuid4().hex[:6]}"
    assert (
        gregor(
            broker,
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Write",
            "--operation",
            "describe",
            "--operation",
            "Create",
            "--topic",
            prefix,
            "--resource-pattern-type",
            "prefixed",
        )[0]
        == 0
    )
    assert (
        gregor(
            broker,
            "acls",
            "add",
            "--deny-principal",
            "User:alice",
            "--deny-host",
            "*",
            "--operation",
            "WRITE",
            "--topic",
            f"{prefix}-secret",
        )[0]
        == 0
    )
    assert acls_on(broker, prefix) == {
        (prefix, "PREFIXED", "User:alice", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")
    }
    assert produce_as(broker, f"{prefix}-open", "PLAIN", "alice", "alice-secret") is None
    denied = produce_as(broker, f"{prefix}-secret", "PLAIN", "alice", "alice-secret")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # remove only the DENY entry: the ALLOWs stay
    code, out, _ = gregor(
        broker,
        "acls",
        "remove",
        "--deny-principal",
        "User:alice",
        "--operation",
        "write",
        "--topic",
        f"{prefix}-secret",
        "--force",
    )
    assert code == 0 and "permissionType=DENY" in out
    assert acls_on(broker, f"{prefix}-secret") == set()
    assert len(acls_on(broker, prefix)) == 3
    assert produce_as(broker, f"{prefix}-secret", "PLAIN", "alice", "alice-secret") is None
    code, out, _ = gregor(
        broker,
        "acls",
        "list",
        "--topic",
        prefix,
        "--resource-pattern-type",
        "prefixed",
        "--output",
        "json",
    )
    assert code == 0 and sorted(
        (a["operation"], a["pattern_type"], a["permission_type"]) for a in json.loads(out)
    ) == [
        ("CREATE", "PREFIXED", "ALLOW"),
        ("DESCRIBE", "PREFIXED", "ALLOW"),
        ("WRITE", "PREFIXED", "ALLOW"),
    ]


def test_acls_usage_errors() -> None:
    r = CliRunner().invoke(
        main, ["acls", "add", "--allow-principal", "User:a", "--consumer", "--topic", "t"]
    )
    assert r.exit_code == 2 and "--consumer needs --group" in r.stderr
    r = CliRunner().invoke(
        main, ["acls", "add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"]
    )
    assert r.exit_code == 2 and "unknown AclOperation 'Fly'" in r.stderr
    r = CliRunner().invoke(main, ["acls", "add", "--topic", "t"])
    assert r.exit_code == 2 and "name a principal" in r.stderr


def test_users_scram_credentials_set_used_described_and_deleted(broker: BrokerProcess) -> None:
    topic = f"scram-{uuid.uuid4().hex[:6]}"
    assert (
        gregor(
            broker, "acls", "add", "--allow-principal", "User:carol", "--producer", "--topic", topic
        )[0]
        == 0
    )
    code, out, _ = gregor(
        broker,
        "users",
        "alter",
        "carol",
        "--add-config",
        "SCRAM-SHA-256=[iterations=8192,password=carol-pw-256],SCRAM-SHA-512=[password=carol-pw-512]",
    )
    assert (code, out) == (0, "Completed updating config for user carol.\n")
    described = (
        ck_admin(broker).describe_user_scram_credentials(["carol"])["carol"].result(BUDGET_S)
    )
    assert sorted((c.mechanism, c.iterations) for c in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 8192),
        (ScramMechanism.SCRAM_SHA_512, 4096),
    ]
    code, out, _ = gregor(broker, "users", "describe", "carol")
    assert (code, out) == (
        0,
        "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096\n",
    )
    assert produce_as(broker, topic, "SCRAM-SHA-256", "carol", "carol-pw-256") is None
    assert produce_as(broker, topic, "SCRAM-SHA-512", "carol", "carol-pw-512") is None
    wrong = produce_as(broker, topic, "SCRAM-SHA-512", "carol", "carol-pw-256")
    assert wrong is not None and wrong.code() == KafkaError._AUTHENTICATION

    assert gregor(broker, "users", "alter", "carol", "--delete-config", "SCRAM-SHA-256")[0] == 0
    gone = produce_as(broker, topic, "SCRAM-SHA-256", "carol", "carol-pw-256")
    assert gone is not None and gone.code() == KafkaError._AUTHENTICATION
    code, out, _ = gregor(broker, "users", "describe", "carol")
    assert (
        out
        == "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=4096\n"
    )
    code, out, _ = gregor(broker, "users", "describe", "carol", "--output", "json")
    assert (code, json.loads(out)) == (0, {"carol": {"SCRAM-SHA-512": {"iterations": 4096}}})
    code, _, err = gregor(broker, "users", "alter", "carol", "--delete-config", "SCRAM-SHA-256")
    assert code == 1 and "carol" in err  # nothing to delete: the broker's refusal is reported
    code, _, err = gregor(
        broker, "users", "alter", "carol", "--add-config", "SCRAM-SHA-256=[iterations=8192]"
    )
    assert code == 2 and "needs password" in err


@pytest.fixture(scope="module")
def secured(pki: Pki) -> Iterator[BrokerProcess]:
    """A broker with one SASL_SSL listener and nothing else: the commands log in as admin."""
    config = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server.combined),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "num.partitions": 1,
    }
    with BrokerProcess(config=config) as b:
        yield b
        assert "admin-secret" not in b.read_log()


def secured_gregor(
    broker: BrokerProcess, ca: Path, *args: str, password: str = "admin-secret"
) -> tuple[int, str, str]:
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": password,
        "ssl.ca.location": str(ca),
    }
    argv = [*args, "-b", broker.bootstrap("SASL_SSL")]
    for k, v in props.items():
        argv += ["-X", f"{k}={v}"]
    r = CliRunner().invoke(main, argv)
    if r.exception and not isinstance(r.exception, SystemExit):
        return 1, r.stdout, f"{type(r.exception).__name__}: {r.exception}"
    return r.exit_code, r.stdout, r.stderr


def test_commands_log_in_over_sasl_ssl(secured: BrokerProcess, pki: Pki) -> None:
    topic = f"sec-{uuid.uuid4().hex[:6]}"
    r = secured_gregor(secured, pki.ca.ca_path, "topics", "create", topic)
    assert r[:2] == (0, f"Created topic {topic}.\n"), r
    code, out, _ = secured_gregor(secured, pki.ca.ca_path, "topics", "list")
    assert code == 0 and topic in out.splitlines()
    code, out, _ = secured_gregor(
        secured,
        pki.ca.ca_path,
        "acls",
        "add",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--topic",
        topic,
    )
    assert code == 0 and "operation=READ" in out
    code, out, _ = secured_gregor(secured, pki.ca.ca_path, "acls", "list", "--topic", topic)
    assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out

    code, _, err = secured_gregor(secured, pki.ca.ca_path, "topics", "list", password="wrong")
    assert code == 1 and "Authentication failed" in err
    code, _, err = secured_gregor(secured, pki.other_ca.ca_path, "topics", "list")
    assert code == 1 and "CERTIFICATE_VERIFY_FAILED" in err


def test_client_security_settings_fail_closed() -> None:
    from gregor.client import AIOAdminClient, ConfigError

    with pytest.raises(ConfigError, match="security.protocol=SASL_SSL needs sasl.mechanism"):
        AIOAdminClient({"security.protocol": "SASL_SSL"})
    with pytest.raises(ConfigError, match="not GSSAPI"):
        AIOAdminClient({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"})
    with pytest.raises(ConfigError, match="needs sasl.username and sasl.password"):
        AIOAdminClient(
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "a"}
        )
    with pytest.raises(ConfigError, match="security.protocol=KERBEROS"):
        AIOAdminClient({"security.protocol": "kerberos"})
    with pytest.raises(ConfigError, match="cannot load the TLS settings"):
        AIOAdminClient({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"})
