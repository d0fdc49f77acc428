"""The registry's ACL authorizer (``--authorizer acl``): a real SASL broker, real registries
with basic auth, ACLs added with ``gregor acls --subject / --registry`` into the ACL topic;
confluent-kafka's ``SchemaRegistryClient`` and Avro serializer as the users, raw HTTP for each
refusal (Confluent's 403 / 40301); the registry beside a broker and a standalone one enforce
the same ACLs. Every test here passes only when the ACLs are enforced."""

from __future__ import annotations

import http.client
import json
import logging
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.schema_registry.acls import Operation, Pattern, Permission, RegistryAcl
from gregor.schema_registry.auth import AuthConfigError, SaslBasicAuth
from gregor.schema_registry.authorization import ENDPOINTS
from gregor.schema_registry.http import make_app
from gregor.schema_registry.server import SchemaRegistryServer
from gregor.testing import BrokerProcess, InProcessBroker
from gregor.testing.cli import run_command
from gregor.testing.ports import free_port

from .conftest import Registry, avro_record
from .test_auth import basic
from .test_beside_broker import registry_url

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
USERS |= {"carol": "carol-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
ORDER = avro_record("Order", ("id", "long"), ("item", "string"))
ADMIN_X = (
    "-X",
    "security.protocol=SASL_PLAINTEXT",
    "-X",
    "sasl.mechanism=PLAIN",
    "-X",
    "sasl.username=admin",
    "-X",
    "sasl.password=admin-secret",
)


@pytest.fixture(scope="module")
def cluster() -> Iterator[InProcessBroker]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "num.partitions": 1,
    }
    with InProcessBroker(config) as b:
        yield b


def client_config(broker: InProcessBroker) -> dict[str, str]:
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }


def serve(broker: InProcessBroker, topic: str) -> Registry:
    """A registry with basic auth and the ACL authorizer; User:admin is its super user."""
    cfg = client_config(broker)
    server = SchemaRegistryServer(
        cfg,
        "http://127.0.0.1:0",
        topic=topic,
        auth=SaslBasicAuth(cfg),
        authorizer="acl",
        super_users=("User:admin",),
    )

    async def go() -> SchemaRegistryServer:
        return await server.start()

    return Registry(broker, topic, broker.call(go))


@pytest.fixture
def reg(cluster: InProcessBroker, request: pytest.FixtureRequest) -> Iterator[Registry]:
    r = serve(cluster, f"_schemas_acl_{request.node.name[5:40]}")
    yield r
    r.stop()


def until(condition: Callable[[], bool]) -> None:
    while not condition():
        time.sleep(0.02)


def acls(reg: Registry, *args: str) -> tuple[int, str, str]:
    """``gregor acls ARGS`` on the registry's ACL topic, as the cluster's admin."""
    return run_command(
        reg.broker.bootstrap_servers, "acls", *args, "--acl-topic", reg.topic + "_acl", *ADMIN_X
    )


def grant(reg: Registry, *args: str, expect: list[RegistryAcl]) -> None:
    """Add ACLs with the command, then wait until the registry has read them."""
    code, out, err = acls(reg, "add", *args, "--output", "json")
    assert code == 0, err
    added = json.loads(out)["added"]
    assert sorted(map(json.dumps, added)) == sorted(json.dumps(a.to_json()) for a in expect)
    assert reg.server is not None and reg.server.acls is not None
    state = reg.server.acls
    until(lambda: all(a in state.acls for a in expect))


def sr(reg: Registry, user: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": reg.url, "basic.auth.user.info": f"{user}:{USERS[user]}"})


def denied(op: str, subject: str | None) -> dict[str, object]:
    on = f"Subject: {subject}" if subject is not None else "Registry"
    return {"error_code": 40301, "message": f"User is denied operation {op} on {on}"}


def as_(user: str) -> dict[str, str]:
    return basic(user, USERS[user])


def register_body(schema: str = ORDER) -> dict[str, str]:
    return {"schema": schema}


def test_alice_may_write_orders_and_not_payments(reg: Registry) -> None:
    alice_acl = [
        RegistryAcl("User:alice", op, "orders-value")
        for op in (Operation.SUBJECT_WRITE, Operation.SUBJECT_READ)
    ]
    grant(
        reg,
        *("--allow-principal", "User:alice", "--subject", "orders-value"),
        *("--operation", "SUBJECT_WRITE", "--operation", "SUBJECT_READ"),
        expect=alice_acl,
    )
    client = sr(reg, "alice")
    serializer = AvroSerializer(client, ORDER)
    payload = serializer(
        {"id": 7, "item": "tea"}, SerializationContext("orders", MessageField.VALUE)
    )
    schema_id = int.from_bytes(payload[1:5], "big")
    assert payload[0] == 0 and schema_id >= 1
    assert client.get_latest_version("orders-value").schema_id == schema_id
    with pytest.raises(Exception, match="40301") as err:
        serializer({"id": 8, "item": "x"}, SerializationContext("payments", MessageField.VALUE))
    assert "User is denied operation Write on Subject: payments-value" in str(err.value)
    reply = reg.call(
        "POST", "/subjects/payments-value/versions", register_body(), headers=as_("alice")
    )
    assert (reply.status, reply.body) == (403, denied("Write", "payments-value"))
    assert reg.server is not None and reg.server.state.live_subjects() == ["orders-value"]


def test_bob_may_only_read(reg: Registry) -> None:
    schema_id = sr(reg, "admin").register_schema("orders-value", Schema(ORDER, "AVRO"))
    payload = AvroSerializer(sr(reg, "admin"), ORDER)(
        {"id": 1, "item": "pen"}, SerializationContext("orders", MessageField.VALUE)
    )
    bob = sr(reg, "bob")
    with pytest.raises(SchemaRegistryError) as err:  # nothing granted yet
        bob.get_latest_version("orders-value")
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    grant(
        reg,
        *("--allow-principal", "User:bob", "--subject", "*", "--operation", "SUBJECT_READ"),
        expect=[RegistryAcl("User:bob", Operation.SUBJECT_READ, "*")],
    )
    assert bob.get_latest_version("orders-value").schema_id == schema_id
    decoded = AvroDeserializer(bob)(payload, SerializationContext("orders", MessageField.VALUE))
    assert decoded == {"id": 1, "item": "pen"}
    refusals = [
        ("POST", "/subjects/orders-value/versions", register_body(), "Write"),
        ("POST", "/compatibility/subjects/orders-value/versions/latest", register_body(), "Write"),
        ("DELETE", "/subjects/orders-value", None, "Delete"),
        ("DELETE", "/subjects/orders-value/versions/1", None, "Delete"),
        ("GET", "/config/orders-value", None, "ReadCompatibility"),
        ("PUT", "/config/orders-value", {"compatibility": "NONE"}, "AlterCompatibility"),
        ("DELETE", "/config/orders-value", None, "AlterCompatibility"),
        ("GET", "/mode/orders-value", None, "ReadCompatibility"),
        ("PUT", "/mode/orders-value", {"mode": "READONLY"}, "AlterCompatibility"),
    ]
    for method, path, body, op in refusals:
        reply = reg.call(method, path, body, headers=as_("bob"))
        assert (reply.status, reply.body) == (403, denied(op, "orders-value")), (method, path)
    ok = reg.call("POST", "/subjects/orders-value", register_body(), headers=as_("bob"))
    assert ok.status == 200 and ok.body["id"] == schema_id  # lookup is a read
    assert reg.server is not None
    assert [v.version for v in reg.server.state.versions("orders-value")] == [1]
    assert reg.server.state.compatibility("orders-value") == "BACKWARD"


def test_a_prefixed_acl(reg: Registry) -> None:
    grant(
        reg,
        *(
            "--allow-principal",
            "User:carol",
            "--subject",
            "team-a.",
            "--operation",
            "SUBJECT_WRITE",
        ),
        *("--resource-pattern-type", "prefixed"),
        expect=[RegistryAcl("User:carol", Operation.SUBJECT_WRITE, "team-a.", Pattern.PREFIXED)],
    )
    carol = sr(reg, "carol")
    assert carol.register_schema("team-a.orders-value", Schema(ORDER, "AVRO")) >= 1
    reply = reg.call(
        "POST", "/subjects/team-b.orders-value/versions", register_body(), headers=as_("carol")
    )
    assert (reply.status, reply.body) == (403, denied("Write", "team-b.orders-value"))
    reply = reg.call("POST", "/subjects/team-a/versions", register_body(), headers=as_("carol"))
    assert (reply.status, reply.body) == (403, denied("Write", "team-a"))  # not the prefix


def test_listings_show_only_what_the_user_may_read(reg: Registry) -> None:
    admin = sr(reg, "admin")
    ids = {s: admin.register_schema(s, Schema(ORDER, "AVRO")) for s in ("a-value", "b-value")}
    other = avro_record("Other", ("x", "int"))
    c_id = admin.register_schema("c-value", Schema(other, "AVRO"))
    assert ids["a-value"] == ids["b-value"]  # one schema, two subjects
    alice = sr(reg, "alice")
    assert alice.get_subjects() == []  # not 403: an empty list
    grant(
        reg,
        *("--allow-principal", "User:alice", "--subject", "a-value", "--operation", "SUBJECT_READ"),
        expect=[RegistryAcl("User:alice", Operation.SUBJECT_READ, "a-value")],
    )
    assert alice.get_subjects() == ["a-value"]
    h = as_("alice")
    assert [s["subject"] for s in reg.call("GET", "/schemas", headers=h).body] == ["a-value"]
    sid = ids["a-value"]
    assert reg.call("GET", f"/schemas/ids/{sid}/subjects", headers=h).body == ["a-value"]
    assert reg.call("GET", f"/schemas/ids/{sid}/versions", headers=h).body == [
        {"subject": "a-value", "version": 1}
    ]
    assert json.loads(alice.get_schema(sid).schema_str) == json.loads(ORDER)
    reply = reg.call("GET", f"/schemas/ids/{c_id}", headers=h)
    assert (reply.status, reply.body) == (403, denied("Read", "c-value"))
    assert reg.call("GET", "/contexts", headers=h).status == 403
    grant(
        reg,
        *("--allow-principal", "User:alice", "--registry", "--operation", "GLOBAL_SUBJECTS_READ"),
        expect=[RegistryAcl("User:alice", Operation.GLOBAL_SUBJECTS_READ)],
    )
    assert alice.get_subjects() == ["a-value", "b-value", "c-value"]
    assert reg.call("GET", "/contexts", headers=h).body == ["."]


def test_global_config_and_mode_need_the_global_operations(reg: Registry) -> None:
    h = as_("alice")
    for method, path, body, op in [
        ("GET", "/config", None, "ReadGlobalCompatibility"),
        ("GET", "/mode", None, "ReadGlobalCompatibility"),
        ("PUT", "/config", {"compatibility": "FULL"}, "AlterGlobalCompatibility"),
        ("PUT", "/mode", {"mode": "READONLY"}, "AlterGlobalCompatibility"),
        ("DELETE", "/config", None, "AlterGlobalCompatibility"),
    ]:
        reply = reg.call(method, path, body, headers=h)
        assert (reply.status, reply.body) == (403, denied(op, None)), (method, path)
    grant(
        reg,
        *("--allow-principal", "User:alice", "--registry"),
        *("--operation", "GLOBAL_COMPATIBILITY_READ"),
        expect=[RegistryAcl("User:alice", Operation.GLOBAL_COMPATIBILITY_READ)],
    )
    assert sr(reg, "alice").get_compatibility() == "BACKWARD"
    assert reg.call("GET", "/mode", headers=h).body == {"mode": "READWRITE"}
    reply = reg.call("PUT", "/config", {"compatibility": "FULL"}, headers=h)
    assert (reply.status, reply.body) == (403, denied("AlterGlobalCompatibility", None))
    grant(
        reg,
        *("--allow-principal", "User:alice", "--registry"),
        *("--operation", "GLOBAL_COMPATIBILITY_WRITE"),
        expect=[RegistryAcl("User:alice", Operation.GLOBAL_COMPATIBILITY_WRITE)],
    )
    assert sr(reg, "alice").set_compatibility(level="FULL") == {"compatibility": "FULL"}
    assert reg.server is not None and reg.server.state.compatibility(None) == "FULL"


def test_deny_beats_allow(reg: Registry) -> None:
    admin = sr(reg, "admin")
    for s in ("open-value", "secret-value"):
        admin.register_schema(s, Schema(ORDER, "AVRO"))
    grant(
        reg,
        *("--allow-principal", "User:bob", "--subject", "*", "--operation", "SUBJECT_READ"),
        expect=[RegistryAcl("User:bob", Operation.SUBJECT_READ, "*")],
    )
    assert sr(reg, "bob").get_subjects() == ["open-value", "secret-value"]
    grant(
        reg,
        *(
            "--deny-principal",
            "User:bob",
            "--subject",
            "secret-value",
            "--operation",
            "SUBJECT_READ",
        ),
        expect=[
            RegistryAcl(
                "User:bob", Operation.SUBJECT_READ, "secret-value", permission=Permission.DENY
            )
        ],
    )
    assert sr(reg, "bob").get_subjects() == ["open-value"]
    reply = reg.call("GET", "/subjects/secret-value/versions", headers=as_("bob"))
    assert (reply.status, reply.body) == (403, denied("Read", "secret-value"))
    assert reg.call("GET", "/subjects/open-value/versions", headers=as_("bob")).body == [1]


def test_the_super_user_does_everything(reg: Registry, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="gregor.schema_registry")
    admin = sr(reg, "admin")
    assert admin.register_schema("x-value", Schema(ORDER, "AVRO")) >= 1
    assert admin.set_compatibility("x-value", "NONE") == {"compatibility": "NONE"}
    assert admin.set_compatibility(level="FORWARD") == {"compatibility": "FORWARD"}
    assert admin.get_subjects() == ["x-value"]
    assert admin.delete_subject("x-value") == [1]
    assert admin.delete_subject("x-value", permanent=True) == [1]
    h = as_("alice")  # and a refused user's request logs no password
    assert reg.call("GET", "/subjects/x-value/versions", headers=h).status == 403
    assert "denied SUBJECT_READ on subject x-value" in caplog.text
    assert "admin-secret" not in caplog.text and "alice-secret" not in caplog.text


def test_two_registries_enforce_an_acl_added_while_both_run(cluster: InProcessBroker) -> None:
    first = serve(cluster, "_schemas_acl_shared")
    second = serve(cluster, "_schemas_acl_shared")
    try:
        sr(first, "admin").register_schema("shared-value", Schema(ORDER, "AVRO"))
        until(lambda: second.server is not None and bool(second.server.state.subjects))
        h = as_("bob")
        for r in (first, second):
            assert r.call("GET", "/subjects/shared-value/versions", headers=h).status == 403
        code, _, err = acls(
            first, "add", "--allow-principal", "User:bob", "--subject", "shared-value",
            "--operation", "SUBJECT_READ",
        )  # fmt: skip
        assert code == 0, err
        for r in (first, second):
            until(
                lambda r=r: (
                    r.call("GET", "/subjects/shared-value/versions", headers=h).status == 200
                )
            )  # type: ignore[misc]
            assert r.call("GET", "/subjects/shared-value/versions", headers=h).body == [1]
        code, _, err = acls(first, "remove", "--subject", "shared-value", "--force")
        assert code == 0, err
        for r in (first, second):
            until(
                lambda r=r: (
                    r.call("GET", "/subjects/shared-value/versions", headers=h).status == 403
                )
            )  # type: ignore[misc]
        restarted = serve(cluster, "_schemas_acl_shared")  # a new one reads the same (none)
        try:
            assert restarted.server is not None and restarted.server.acls is not None
            assert restarted.server.acls.acls == set()
            assert restarted.call("GET", "/subjects", headers=h).body == []
        finally:
            restarted.stop()
    finally:
        first.stop()
        second.stop()


def test_the_authorizer_without_basic_auth_stops_with_a_clear_error(
    cluster: InProcessBroker,
) -> None:
    code, out, err = run_command(
        cluster.bootstrap_servers, "schema-registry", "--authorizer", "acl", *ADMIN_X
    )
    assert code == 2
    assert "--authorizer acl needs to know who is asking: it needs --auth sasl" in err
    with pytest.raises(AuthConfigError, match="needs to know who is asking"):
        SchemaRegistryServer(
            client_config(cluster), "http://127.0.0.1:0", topic="_x", authorizer="acl"
        )


def test_the_command_adds_lists_and_removes_registry_acls(reg: Registry) -> None:
    code, out, err = acls(
        reg, "add", "--allow-principal", "User:alice", "--subject", "orders-value",
        "--operation", "SUBJECT_READ", "--operation", "SUBJECT_WRITE",
    )  # fmt: skip
    assert code == 0, err
    assert out == (
        "Adding registry ACLs for resource `RegistryResource(resourceType=SUBJECT, "
        "name=orders-value, patternType=LITERAL)`:\n"
        " \t(principal=User:alice, operation=SUBJECT_READ, permissionType=ALLOW)\n"
        " \t(principal=User:alice, operation=SUBJECT_WRITE, permissionType=ALLOW)\n\n"
    )
    code, out, err = acls(
        reg, "add", "--deny-principal", "User:bob", "--registry",
        "--operation", "GLOBAL_COMPATIBILITY_WRITE",
    )  # fmt: skip
    assert code == 0, err
    code, out, _ = acls(reg, "list", "--registry", "--output", "json")
    assert code == 0
    alice = {"principal": "User:alice", "resource_type": "SUBJECT", "name": "orders-value"}
    alice |= {"pattern_type": "LITERAL", "permission_type": "ALLOW"}
    bob = {"principal": "User:bob", "resource_type": "REGISTRY", "name": ""}
    bob |= {"pattern_type": "LITERAL", "operation": "GLOBAL_COMPATIBILITY_WRITE"}
    bob |= {"permission_type": "DENY"}
    assert json.loads(out) == [  # the registry's first, then by subject
        bob,
        {**alice, "operation": "SUBJECT_READ"},
        {**alice, "operation": "SUBJECT_WRITE"},
    ]
    code, out, _ = acls(reg, "list", "--registry", "--principal", "User:bob")
    assert out == (
        "Current registry ACLs for resource `RegistryResource(resourceType=REGISTRY, "
        "patternType=LITERAL)`:\n"
        " \t(principal=User:bob, operation=GLOBAL_COMPATIBILITY_WRITE, permissionType=DENY)\n\n"
    )
    code, out, err = acls(
        reg, "remove", "--allow-principal", "User:alice", "--subject", "orders-value",
        "--operation", "SUBJECT_WRITE", "--force", "--output", "json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out) == {"result": "ok", "removed": [{**alice, "operation": "SUBJECT_WRITE"}]}
    code, out, _ = acls(reg, "list", "--subject", "orders-value", "--output", "json")
    assert json.loads(out) == [{**alice, "operation": "SUBJECT_READ"}]
    assert reg.server is not None and reg.server.acls is not None
    state = reg.server.acls
    until(lambda: len(state.acls) == 2)
    # wrong combinations are usage errors, nothing written
    for args, message in [
        (("--subject", "s", "--topic", "t"), "cannot be mixed with Kafka resources"),
        (("--subject", "s", "--operation", "GLOBAL_COMPATIBILITY_READ"), "GLOBAL_ operations"),
        (("--subject", "s", "--operation", "Read"), "unknown registry operation 'Read'"),
        (("--registry", "--operation", "SUBJECT_READ"), "SUBJECT_ operations need --subject"),
    ]:
        code, _, err = acls(reg, "add", "--allow-principal", "User:x", *args)
        assert code == 2 and message in err, err


def test_every_endpoint_has_its_operation() -> None:
    app = make_app(None)  # type: ignore[arg-type]
    routes = {
        (r.method, r.resource.canonical)
        for r in app.router.routes()
        if r.method != "HEAD" and r.resource is not None
    }
    assert routes == set(ENDPOINTS)


def status(url: str, path: str, headers: dict[str, str]) -> int:
    split = urlsplit(url)
    conn = http.client.HTTPConnection(split.hostname or "", split.port, timeout=120)
    try:
        conn.request("GET", path, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.interop  # a broker process and a `gregor schema-registry` process
def test_the_brokers_registry_and_a_standalone_one_enforce_the_same_acls() -> None:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "schema.registry.listener": f"http://127.0.0.1:{free_port()}",
        "schema.registry.topic": "_schemas_both",
        "schema.registry.authentication.method": "BASIC",
        "schema.registry.authorizer": "acl",
        "super.users": "User:admin",
    }
    with BrokerProcess(config=config) as b:
        beside = registry_url(b)
        sasl = b.bootstrap("SASL_PLAINTEXT")
        standalone = subprocess.Popen(
            [sys.executable, "-m", "gregor", "schema-registry", "-b", sasl, *ADMIN_X]
            + ["--topic", "_schemas_both", "--auth", "sasl", "--authorizer", "acl"]
            + ["--super-user", "User:admin", "--listener", "http://127.0.0.1:0"]
            + ["--output", "json"],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert standalone.stdout is not None
            alone = json.loads(standalone.stdout.readline())["url"]
            admin = SchemaRegistryClient(
                {"url": beside, "basic.auth.user.info": "admin:admin-secret"}
            )
            admin.register_schema("both-value", Schema(ORDER, "AVRO"))
            path = "/subjects/both-value/versions"
            assert status(beside, path, as_("admin")) == 200
            until(lambda: status(alone, path, as_("admin")) == 200)
            for url in (beside, alone):
                assert status(url, path, as_("bob")) == 403
                assert status(url, path, {}) == 401
            code, _, err = run_command(
                sasl, "acls", "add", "--allow-principal", "User:bob", "--subject", "both-value",
                "--operation", "SUBJECT_READ", "--acl-topic", "_schemas_both_acl", *ADMIN_X,
            )  # fmt: skip
            assert code == 0, err
            for url in (beside, alone):
                until(lambda url=url: status(url, path, as_("bob")) == 200)  # type: ignore[misc]
            assert status(beside, "/subjects/other/versions", as_("bob")) == 403
        finally:
            standalone.terminate()
            standalone.wait(60)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"schema.registry.authorizer": "acl"},
            "schema.registry.authorizer=acl needs to know who is asking",
        ),
        ({"schema.registry.authentication.method": "BASIC"}, "SASL_PLAINTEXT listener"),
        ({"schema.registry.authorizer": "rbac"}, "use NONE or BASIC / none or acl"),
    ],
)
def test_the_broker_refuses_a_registry_authorizer_it_cannot_honour(
    settings: dict[str, str], message: str
) -> None:
    base = {"schema.registry.listener": "http://127.0.0.1:8081"}
    with pytest.raises(ConfigError, match=re.escape(message)):
        BrokerConfig.load(None, [f"{k}={v}" for k, v in {**base, **settings}.items()])


def test_the_acl_topics_own_kafka_acls_decide_who_may_change_registry_acls() -> None:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "num.partitions": 1,
    }
    with InProcessBroker(config) as b:
        grant_args = ("acls", "add", "--subject", "orders-value", "--operation", "SUBJECT_READ")
        code, _, err = run_command(
            b.bootstrap_servers, *grant_args, "--allow-principal", "User:alice", *ADMIN_X
        )
        assert code == 0, err
        as_bob = [x.replace("admin", "bob") for x in ADMIN_X]
        code, out, err = run_command(
            b.bootstrap_servers, *grant_args, "--allow-principal", "User:bob", *as_bob
        )
        assert code == 1 and out == ""
        assert (
            err
            == "Error: the ACL topic _schemas_acl: TopicAuthorizationFailedError: _schemas_acl\n"
        )
        code, out, err = run_command(
            b.bootstrap_servers, "acls", "list", "--registry", "--output", "json", *ADMIN_X
        )
        assert code == 0, err
        assert [a["principal"] for a in json.loads(out)] == ["User:alice"]
