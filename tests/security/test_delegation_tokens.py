"""Delegation tokens (KIP-48) against a real broker: the four APIs, ``gregor tokens``, and SCRAM
logins with a token (``tokenauth``).

No third-party client here can use delegation tokens: librdkafka (confluent-kafka, kcat) has no
token login and no token admin calls, kafka-python and aiokafka neither. So the APIs are driven
by Gregor's admin client and command, and a token's session is checked by what it may do:
the broker's authorizer gives it the owner's ACLs, seen by a confluent-kafka consumer that
reads back what the token's producer wrote.

One broker: a PLAINTEXT listener (refused for tokens, as Kafka refuses it), a SASL_PLAINTEXT
listener with PLAIN users (admin is a super user) and SCRAM for tokens, the ACL authorizer, a
secret key, and the expiry check run on every maintenance tick so an expired token leaves the
image within seconds.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer as CkConsumer

from gregor.cli.main import main
from gregor.client import AdminClient, Producer
from gregor.client.acls import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from gregor.protocol import errors as E
from gregor.testing import BrokerProcess
from gregor.testing.cluster import ClusterProcess
from gregor.testing.etcd import etcd_binary

BUDGET_S = 60.0
SECRET = "a-cluster-wide-secret"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-pw" user_admin="admin-pw" user_alice="alice-pw" '
    'user_bob="bob-pw" user_carol="carol-pw";'
)


def config(**extra: Any) -> dict[str, Any]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "delegation.token.secret.key": SECRET,
        "delegation.token.expiry.check.interval.ms": 1,
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
        **extra,
    }


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    with BrokerProcess(config=config()) as b:
        yield b
        log = b.read_log()
        assert "alice-pw" not in log and SECRET not in log


def login(b: BrokerProcess, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": b.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-pw",
    }


def token_login(
    b: BrokerProcess, token_id: str, password: str, mechanism: str = "SCRAM-SHA-256"
) -> dict[str, Any]:
    return {
        "bootstrap.servers": b.bootstrap("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": token_id,
        "sasl.password": password,
        "sasl.scram.tokenauth": "true",
    }


def until(check: Callable[[], bool]) -> None:
    give_up = time.monotonic() + BUDGET_S
    while not check():
        assert time.monotonic() < give_up, "condition not reached"
        time.sleep(0.05)


def logs_in(cfg: dict[str, Any]) -> bool:
    """Whether a login with ``cfg`` succeeds (a Metadata request needs one)."""
    try:
        with AdminClient({**cfg, "request.timeout.ms": 10000}) as a:
            a.list_topics()
        return True
    except E.SaslAuthenticationFailedError:
        return False


def allow(
    b: BrokerProcess, principal: str, rtype: ResourceType, name: str, *ops: AclOperation
) -> None:
    with AdminClient(login(b, "admin")) as a:
        a.create_acls(
            [
                AclBinding(
                    rtype, name, PatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
                )
                for op in ops
            ],
            raise_on_error=True,
        )


def test_a_token_logs_in_as_its_owner_with_both_scram_mechanisms(broker: BrokerProcess) -> None:
    topic = f"dt-{uuid.uuid4().hex[:8]}"
    allow(
        broker,
        "User:alice",
        ResourceType.TOPIC,
        topic,
        AclOperation.CREATE,
        AclOperation.WRITE,
        AclOperation.READ,
        AclOperation.DESCRIBE,
    )
    allow(broker, "User:alice", ResourceType.GROUP, "dt-readers", AclOperation.READ)
    with AdminClient(login(broker, "alice")) as a:
        token = a.create_delegation_token(renewers=["User:bob"])
    assert (token.owner, token.requester, token.renewers) == (
        "User:alice",
        "User:alice",
        ("User:bob",),
    )
    assert len(token.hmac) == 64  # HMAC-SHA512
    assert token.issue_timestamp_ms < token.expiry_timestamp_ms <= token.max_timestamp_ms
    # one day per renewal, seven days at most: Kafka's defaults
    assert token.expiry_timestamp_ms - token.issue_timestamp_ms == 24 * 3600 * 1000
    assert token.max_timestamp_ms - token.issue_timestamp_ms == 7 * 24 * 3600 * 1000

    for i, mechanism in enumerate(("SCRAM-SHA-256", "SCRAM-SHA-512")):
        with Producer(
            {**token_login(broker, token.token_id, token.password, mechanism), "acks": "all"}
        ) as p:
            p.send(topic, value=f"by-token-{i}".encode()).get(timeout=30)
    c = CkConsumer(
        {**login(broker, "alice"), "group.id": "dt-readers", "auto.offset.reset": "earliest"}
    )
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        until(
            lambda: (
                got.extend(m.value() for m in c.consume(10, 0.5) if not m.error()) or len(got) >= 2
            )
        )
        assert got == [b"by-token-0", b"by-token-1"]
    finally:
        c.close()

    # a token's session acts as its owner, nothing more: another topic is refused
    with Producer(token_login(broker, token.token_id, token.password)) as p:
        with pytest.raises(E.TopicAuthorizationFailedError):
            p.send(f"{topic}-other", value=b"x").get(timeout=30)
        # and it may not create, renew or expire tokens (Kafka: no tokens from tokens)
    with AdminClient(token_login(broker, token.token_id, token.password)) as ta:
        with pytest.raises(E.DelegationTokenRequestNotAllowedError):
            ta.create_delegation_token()
        with pytest.raises(E.DelegationTokenRequestNotAllowedError):
            ta.renew_delegation_token(token.hmac)

    # wrong password, the id as a plain user, a token with PLAIN: refused, the broker serves on
    wrong = base64.b64encode(bytes(64)).decode()
    assert not logs_in(token_login(broker, token.token_id, wrong))
    assert not logs_in(
        {**token_login(broker, token.token_id, token.password), "sasl.scram.tokenauth": "false"}
    )
    assert not logs_in(token_login(broker, "no-such-token", token.password))
    assert logs_in(token_login(broker, token.token_id, token.password))


def test_renew_and_expire_follow_kafkas_rules(broker: BrokerProcess) -> None:
    with AdminClient(login(broker, "alice")) as a:
        token = a.create_delegation_token(renewers=["User:bob"], max_lifetime_ms=3_600_000)
    assert token.max_timestamp_ms - token.issue_timestamp_ms == 3_600_000
    # the expiry cannot outrun the token's maximum
    assert token.expiry_timestamp_ms == token.max_timestamp_ms

    with AdminClient(login(broker, "bob")) as bob:
        before = int(time.time() * 1000)
        expiry = bob.renew_delegation_token(token.hmac, 60_000)
        assert before + 60_000 <= expiry <= int(time.time() * 1000) + 60_000
        assert bob.renew_delegation_token(token.hmac, 10 * 3_600_000) == token.max_timestamp_ms
        with pytest.raises(E.DelegationTokenNotFoundError):
            bob.renew_delegation_token(b"\0" * 64)
    with AdminClient(login(broker, "carol")) as carol:
        with pytest.raises(E.DelegationTokenOwnerMismatchError):
            carol.renew_delegation_token(token.hmac)
        with pytest.raises(E.DelegationTokenOwnerMismatchError):
            carol.expire_delegation_token(token.hmac)
    assert logs_in(token_login(broker, token.token_id, token.password))

    with AdminClient(login(broker, "alice")) as a:
        assert a.expire_delegation_token(token.hmac) <= int(time.time() * 1000)  # -1: at once
        assert token.token_id not in {t.token_id for t in a.describe_delegation_tokens()}
        with pytest.raises(E.DelegationTokenNotFoundError):
            a.renew_delegation_token(token.hmac)
    assert not logs_in(token_login(broker, token.token_id, token.password))


def test_an_expired_token_cannot_log_in_and_the_controller_removes_it(
    broker: BrokerProcess,
) -> None:
    with AdminClient(login(broker, "alice")) as a:
        token = a.create_delegation_token()
        assert logs_in(token_login(broker, token.token_id, token.password))
        expiry = a.expire_delegation_token(token.hmac, 0)  # expires now, not removed yet
        assert expiry <= int(time.time() * 1000)
        until(lambda: not logs_in(token_login(broker, token.token_id, token.password)))
        with pytest.raises((E.DelegationTokenExpiredError, E.DelegationTokenNotFoundError)):
            a.renew_delegation_token(token.hmac)
        until(lambda: token.token_id not in {t.token_id for t in a.describe_delegation_tokens()})


def test_tokens_for_other_owners_and_who_may_describe_them(broker: BrokerProcess) -> None:
    with AdminClient(login(broker, "alice")) as a:
        mine = a.create_delegation_token()
        with pytest.raises(E.DelegationTokenAuthorizationFailedError):
            a.create_delegation_token(owner="User:carol")
        with pytest.raises(E.InvalidPrincipalTypeError):
            a.create_delegation_token(renewers=["Group:ops"])
    with AdminClient(login(broker, "admin")) as admin:  # a super user may create for carol
        carols = admin.create_delegation_token(owner="User:carol")
    assert (carols.owner, carols.requester) == ("User:carol", "User:admin")
    allow(broker, "User:bob", ResourceType.USER, "User:carol", AclOperation.CREATE_TOKENS)
    with AdminClient(login(broker, "bob")) as bob:
        for_carol = bob.create_delegation_token(owner="User:carol")
        assert (for_carol.owner, for_carol.requester) == ("User:carol", "User:bob")
        # bob sees the token he requested, not alice's or admin's
        assert {t.token_id for t in bob.describe_delegation_tokens()} >= {for_carol.token_id}
        assert not {mine.token_id, carols.token_id} & {
            t.token_id for t in bob.describe_delegation_tokens()
        }

    with AdminClient(login(broker, "carol")) as carol:
        seen = {t.token_id: t for t in carol.describe_delegation_tokens()}
        assert {carols.token_id, for_carol.token_id} <= set(seen) and mine.token_id not in seen
        assert seen[carols.token_id].hmac == carols.hmac
        assert seen[carols.token_id].requester == "User:admin"
        assert carol.describe_delegation_tokens([]) == []
        assert {t.token_id for t in carol.describe_delegation_tokens(["User:alice"])} == set()
        allow(
            broker,
            "User:carol",
            ResourceType.DELEGATION_TOKEN,
            mine.token_id,
            AclOperation.DESCRIBE,
        )
        assert {t.token_id for t in carol.describe_delegation_tokens(["User:alice"])} == {
            mine.token_id
        }
    # carol's token logs in as carol (the owner), not as the requester
    assert logs_in(token_login(broker, carols.token_id, carols.password))


def test_token_requests_need_an_authenticated_connection(broker: BrokerProcess) -> None:
    with AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")}) as plain:
        for call in (
            plain.create_delegation_token,
            lambda: plain.renew_delegation_token(b"x"),
            lambda: plain.expire_delegation_token(b"x"),
            plain.describe_delegation_tokens,
        ):
            with pytest.raises(E.DelegationTokenRequestNotAllowedError):
                call()


def test_without_a_secret_tokens_are_disabled() -> None:
    cfg = config()
    del cfg["delegation.token.secret.key"]
    with BrokerProcess(config=cfg) as b, AdminClient(login(b, "alice")) as a:
        with pytest.raises(E.DelegationTokenAuthDisabledError):
            a.create_delegation_token()
        with pytest.raises(E.DelegationTokenAuthDisabledError):
            a.describe_delegation_tokens()
        with pytest.raises(E.DelegationTokenAuthDisabledError):
            a.renew_delegation_token(b"x")


def test_tokens_survive_a_restart_and_keep_logging_in() -> None:
    with BrokerProcess(config=config()) as b:
        with AdminClient(login(b, "alice")) as a:
            token = a.create_delegation_token(renewers=["User:bob"])
        b.restart()
        assert logs_in(token_login(b, token.token_id, token.password, "SCRAM-SHA-512"))
        with AdminClient(login(b, "bob")) as bob:
            [seen] = bob.describe_delegation_tokens(["User:alice"])
        assert (seen.token_id, seen.hmac, seen.expiry_timestamp_ms) == (
            token.token_id,
            token.hmac,
            token.expiry_timestamp_ms,
        )


def test_gregor_tokens_create_describe_renew_expire(broker: BrokerProcess) -> None:
    def gregor(*args: str, user: str = "alice") -> tuple[int, str, str]:
        props = [
            x
            for k, v in login(broker, user).items()
            if k != "bootstrap.servers"
            for x in ("-X", f"{k}={v}")
        ]
        r = CliRunner().invoke(main, [*args, "-b", broker.bootstrap("SASL_PLAINTEXT"), *props])
        if r.exception and not isinstance(r.exception, SystemExit):
            raise r.exception
        return r.exit_code, r.stdout, r.stderr

    code, out, _ = gregor(
        "tokens", "create", "--renewer-principal", "User:bob", "--max-life-time-period", "7200000"
    )
    assert code == 0, out
    token_id = out.split("Created delegation token with tokenId : ")[1].split()[0]
    row = next(line for line in out.splitlines() if line.startswith(token_id))
    hmac_text = row.split()[1]
    assert row.split()[2:5] == ["User:alice", "User:alice", "User:bob"]
    assert logs_in(token_login(broker, token_id, hmac_text))

    code, out, _ = gregor("tokens", "describe", "--owner-principal", "User:alice")
    assert code == 0 and any(
        line.startswith(token_id) and hmac_text in line for line in out.splitlines()
    )
    code, out, _ = gregor(
        "tokens", "describe", "--owner-principal", "User:alice", "--output", "json"
    )
    [doc] = [t for t in json.loads(out) if t["token_id"] == token_id]
    assert (doc["hmac"], doc["owner"], doc["renewers"]) == (hmac_text, "User:alice", ["User:bob"])

    code, out, _ = gregor(
        "tokens", "renew", "--hmac", hmac_text, "--renew-time-period", "60000", user="bob"
    )
    assert code == 0 and "Completed renew operation. New expiry date : " in out
    code, out, err = gregor("tokens", "renew", "--hmac", hmac_text, user="carol")
    assert code == 1 and "DELEGATION_TOKEN_OWNER_MISMATCH" in err

    code, out, _ = gregor("tokens", "expire", "--hmac", hmac_text)
    assert code == 0 and "Completed expire operation." in out
    assert not logs_in(token_login(broker, token_id, hmac_text))

    # bad input: a usage error (exit 2), not a traceback
    assert gregor("tokens", "renew", "--hmac", "not base64!")[0] == 2
    assert gregor("tokens", "create", "--renewer-principal", "bob")[0] == 2


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.skipif(etcd_binary() is None, reason="no etcd binary (scripts/system-deps.sh)")
def test_a_token_made_on_one_broker_logs_in_on_another() -> None:
    cfg = {**config(), "inter.broker.listener.name": "PLAINTEXT"}
    with ClusterProcess(2, config=cfg) as cluster:
        one, two = cluster.broker(1), cluster.broker(2)
        with AdminClient(login(one, "alice")) as a:
            token = a.create_delegation_token(renewers=["User:bob"])
        # the token reaches broker 2 through the metadata store
        until(lambda: logs_in(token_login(two, token.token_id, token.password)))
        with AdminClient(login(two, "bob")) as bob:
            assert bob.renew_delegation_token(token.hmac, 120_000) > token.issue_timestamp_ms
            [seen] = bob.describe_delegation_tokens(["User:alice"])
            assert seen.hmac == token.hmac  # both brokers derive the same HMAC from the secret
        with AdminClient(login(one, "alice")) as a:
            a.expire_delegation_token(token.hmac)
        until(lambda: not logs_in(token_login(two, token.token_id, token.password)))
