"""The console's guard rails (issue 35, section 3), over HTTP against real brokers and
``gregor console`` in a child process: Host allow-list, Origin and CSRF checks on every state
change, framing and content-security headers, confirmation of destructive actions, login
(a console password, or each visitor's own SASL credentials, so the cluster's ACLs apply),
logout, the start-up refusals beyond loopback, TLS, and the broker-unreachable page.

Every request is sent with ``http.client`` so a test controls each header, as an attacker
would; what an action did is read back with confluent-kafka."""

from __future__ import annotations

import json
import re
import ssl
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote_plus, urlsplit

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from console_http import Console, ConsoleRefused, refused, start_console

from gregor.testing import BrokerProcess, InProcessBroker

pytestmark = [pytest.mark.interop, pytest.mark.timeout(300)]

BUDGET_S = 60.0
PASSWORD = "correct horse battery staple"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker(
        config={
            "num.partitions": 1,
            "offsets.topic.num.partitions": 1,
            "auto.create.topics.enable": False,
        }
    ) as b:
        yield b


@pytest.fixture(scope="module")
def console(broker: InProcessBroker) -> Iterator[Console]:
    """The console as most run it: against a PLAINTEXT broker, on loopback, no flags."""
    c = start_console("-b", broker.bootstrap_servers)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def locked(broker: InProcessBroker) -> Iterator[Console]:
    """A console that asks for its password (``--auth password``)."""
    c = start_console(
        "-b",
        broker.bootstrap_servers,
        "--auth",
        "password",
        env={"GREGOR_CONSOLE_PASSWORD": PASSWORD},
    )
    try:
        yield c
    finally:
        c.stop()


def topics_of(broker: Any, config: dict[str, Any] | None = None) -> set[str]:
    ck = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **(config or {})})
    return set(ck.list_topics(timeout=30).topics)


def create_topic(
    broker: Any, name: str, partitions: int = 1, config: dict[str, Any] | None = None
) -> None:
    ck = AdminClient({"bootstrap.servers": broker.bootstrap_servers, **(config or {})})
    for f in ck.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)


def produce(
    broker: Any,
    topic: str,
    values: list[bytes],
    partition: int = 0,
    config: dict[str, Any] | None = None,
) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, **(config or {})})
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(30) == 0


def watermarks(broker: Any, topic: str, partition: int = 0) -> tuple[int, int]:
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap_servers, "group.id": "console-tests-watermarks"}
    )
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        return int(low), int(high)
    finally:
        c.close()


def committed(broker: Any, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        return [
            tp.offset
            for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        ]
    finally:
        c.close()


def commit(broker: Any, group: str, topic: str, offsets: list[int]) -> None:
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    try:
        c.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in enumerate(offsets)], asynchronous=False
        )
    finally:
        c.close()


# --- Host allow-list (DNS rebinding) ---


def test_a_forged_host_is_refused_even_with_a_matching_origin(
    broker: InProcessBroker, console: Console
) -> None:
    """A page on evil.example whose name has been rebound to 127.0.0.1 sends Host and Origin
    of evil.example: the console answers none of its requests, reads or writes."""
    v = console.visitor()
    forged = f"evil.example:{console.port}"
    # a valid session and token, as the rebinding page would get them if it could read a page
    found = re.search(r"name='csrf_token' value='([^']+)'", v.get("/topics").text)
    token = found.group(1) if found else ""
    for path in ("/", "/topics", "/api/throughput", "/acls", "/static/console.css"):
        answer = v.get(path, host=forged)
        assert answer.status == 403, (path, answer.status)
        assert "not an allowed host" in answer.text
    answer = v.post(
        "/topics",
        {
            "csrf_token": token,
            "name": "rebound",
            "partitions": "1",
            "replication_factor": "-1",
            "configs": "",
        },
        host=forged,
        origin=f"http://{forged}",
    )
    assert answer.status == 403
    assert "rebound" not in topics_of(broker)
    # the names of the loopback address are allowed
    for host in (console.netloc, f"localhost:{console.port}"):
        assert v.get("/topics", host=host).status == 200


# --- framing and content security ---


def test_pages_cannot_be_framed_and_scripts_come_from_the_console_only(console: Console) -> None:
    v = console.visitor()
    for path in ("/", "/topics", "/no-such-page", "/login"):
        answer = v.get(path)
        assert answer.headers["X-Frame-Options"] == "DENY", path
        csp = {
            d.split()[0]: d.split()[1:]
            for d in answer.headers["Content-Security-Policy"].split(";")
            if d.strip()
        }
        assert csp["frame-ancestors"] == ["'none'"], path
        assert csp["script-src"] == ["'self'"] and csp["default-src"] == ["'none'"], path
        assert csp["form-action"] == ["'self'"] and csp["base-uri"] == ["'none'"], path
        assert answer.headers["X-Content-Type-Options"] == "nosniff", path
        assert answer.headers["Referrer-Policy"] == "same-origin", path
    assert "no-store" in v.get("/topics").headers["Cache-Control"]


# --- Origin and CSRF token on every state change ---


def test_a_state_change_needs_the_console_origin_and_the_form_token(
    broker: InProcessBroker, console: Console
) -> None:
    v = console.visitor()
    v.get("/topics")  # a session

    def create(name: str, **kw: Any) -> int:
        form = {"name": name, "partitions": "1", "replication_factor": "-1", "configs": ""}
        form.update(kw.pop("form", {}))
        return v.post("/topics", form, **kw).status

    # from the console's own origin, but without the form's token, or with a forged one
    assert create("no-token") == 403
    assert create("forged-token", form={"csrf_token": "A" * 43}) == 403
    # a token is bound to its session: another visitor's token does not work here
    other = console.visitor()
    assert create("foreign-token", form={"csrf_token": other.token("/topics")}) == 403
    # the right token, from elsewhere or from nowhere
    token = v.token("/topics")
    assert create("no-origin", form={"csrf_token": token}, origin=None) == 403
    assert create("other-origin", form={"csrf_token": token}, origin="http://evil.example") == 403
    assert (
        create(
            "other-port", form={"csrf_token": token}, origin=f"http://127.0.0.1:{console.port + 1}"
        )
        == 403
    )
    assert (
        create("https-origin", form={"csrf_token": token}, origin=f"https://{console.netloc}")
        == 403
    )
    assert topics_of(broker).isdisjoint(
        {
            "no-origin",
            "other-origin",
            "other-port",
            "https-origin",
            "no-token",
            "forged-token",
            "foreign-token",
        }
    )
    # a Referer of the console's stands in for a missing Origin, as browsers send one
    assert (
        create(
            "by-referer",
            form={"csrf_token": token},
            origin=None,
            headers={"Referer": f"{console.url}topics"},
        )
        == 303
    )
    # the console's own form, from its own origin, with its token
    answer = v.post(
        "/topics",
        {
            "csrf_token": token,
            "name": "by-the-form",
            "partitions": "1",
            "replication_factor": "-1",
            "configs": "",
        },
    )
    assert answer.status == 303 and answer.location.startswith("/topics/by-the-form")
    assert {"by-referer", "by-the-form"} <= topics_of(broker)


# --- confirmation of destructive actions ---


def test_deleting_a_topic_asks_for_its_name_first(
    broker: InProcessBroker, console: Console
) -> None:
    create_topic(broker, "precious")
    v = console.visitor()
    answer = v.submit("/topics/precious", "/topics/precious/delete")
    assert answer.status == 200 and "id='confirm-delete-topic'" in answer.text
    assert "precious" in topics_of(broker)
    answer = v.submit("/topics/precious", "/topics/precious/delete", confirm="not-the-name")
    assert answer.status == 200 and "id='confirm-delete-topic'" in answer.text
    assert "precious" in topics_of(broker)
    answer = v.submit("/topics/precious", "/topics/precious/delete", confirm="precious")
    assert answer.status == 303 and "Deleted+topic+precious" in answer.location
    assert "precious" not in topics_of(broker)


def test_deleting_records_shows_the_plan_then_asks(
    broker: InProcessBroker, console: Console
) -> None:
    create_topic(broker, "trimmed", partitions=2)
    produce(broker, "trimmed", [b"a", b"b", b"c", b"d"], partition=0)
    produce(broker, "trimmed", [b"x"], partition=1)
    v = console.visitor()
    answer = v.submit(
        "/topics/trimmed", "/topics/trimmed/delete-records", partition="0", offset="3"
    )
    assert answer.status == 200, answer.text[:500]
    plan = re.search(r"<table id='delete-records-plan'>.*?</table>", answer.text, re.S)
    assert plan and re.findall(
        r"<tr><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td></tr>",
        plan.group(0),
    ) == [("0", "0", "4", "3", "3")]
    assert watermarks(broker, "trimmed", 0) == (0, 4)  # nothing deleted yet
    confirm = re.search(r"<form [^>]*id='confirm-delete-records'.*?</form>", answer.text, re.S)
    assert confirm
    fields = dict(
        re.findall(r"<input type='hidden' name='([^']+)' value='([^']*)'", confirm.group(0))
    )
    answer = v.post("/topics/trimmed/delete-records", {k: _unescape(x) for k, x in fields.items()})
    assert answer.status == 303 and "message=" in answer.location
    assert watermarks(broker, "trimmed", 0) == (3, 4)
    assert watermarks(broker, "trimmed", 1) == (0, 1)


def test_resetting_offsets_shows_the_plan_then_asks(
    broker: InProcessBroker, console: Console
) -> None:
    create_topic(broker, "replayed", partitions=2)
    produce(broker, "replayed", [b"a", b"b", b"c"], partition=0)
    produce(broker, "replayed", [b"x", b"y"], partition=1)
    commit(broker, "replayers", "replayed", [3, 2])
    v = console.visitor()
    answer = v.submit(
        "/groups/replayers",
        "/groups/replayers/reset",
        topic="replayed",
        strategy="earliest",
        value="",
    )
    assert answer.status == 200, answer.text[:500]
    plan = re.search(r"<table id='reset-plan'>.*?</table>", answer.text, re.S)
    assert plan and re.findall(
        r"<tr><td>replayed</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td></tr>", plan.group(0)
    ) == [("0", "3", "0"), ("1", "2", "0")]
    assert committed(broker, "replayers", "replayed", 2) == [3, 2]  # not yet
    confirm = re.search(r"<form [^>]*id='confirm-reset'.*?</form>", answer.text, re.S)
    assert confirm
    fields = dict(
        re.findall(r"<input type='hidden' name='([^']+)' value='([^']*)'", confirm.group(0))
    )
    answer = v.post("/groups/replayers/reset", {k: _unescape(x) for k, x in fields.items()})
    assert answer.status == 303 and "Reset+2+offsets" in answer.location
    assert committed(broker, "replayers", "replayed", 2) == [0, 0]


def _unescape(text: str) -> str:
    import html

    return html.unescape(text)


# --- login with a console password ---


def test_a_locked_console_serves_nobody_before_login(
    broker: InProcessBroker, locked: Console
) -> None:
    v = locked.visitor()
    for path in ("/", "/topics", "/groups", "/acls", "/users"):
        answer = v.get(path)
        assert answer.status == 303 and answer.location.startswith("/login"), (path, answer.status)
    api = v.get("/api/throughput")
    assert api.status == 401 and json.loads(api.text) == {"error": "login required"}
    # a post without a session: refused, nothing created
    answer = v.post(
        "/topics",
        {
            "csrf_token": "x",
            "name": "anonymous",
            "partitions": "1",
            "replication_factor": "-1",
            "configs": "",
        },
    )
    assert answer.status in (401, 403)
    assert "anonymous" not in topics_of(broker)


def test_password_login_cookie_and_logout(broker: InProcessBroker, locked: Console) -> None:
    v = locked.visitor()
    wrong = v.login(None, "not the password")
    assert wrong.status == 401 and "Login failed" in wrong.text
    assert not any(c.startswith("gregor_session=") for c in wrong.cookies())
    answer = v.login(None, PASSWORD)
    assert answer.status == 303 and answer.location == "/"
    [cookie] = [c for c in answer.cookies() if c.startswith("gregor_session=")]
    attributes = {a.strip().split("=")[0].lower(): a.strip() for a in cookie.split(";")[1:]}
    assert "httponly" in attributes and attributes["samesite"] == "SameSite=Strict"
    assert attributes["path"] == "Path=/" and "secure" not in attributes  # plain HTTP on loopback
    assert PASSWORD.split()[0] not in cookie
    assert v.get("/topics").status == 200
    assert (
        v.submit(
            "/topics",
            "/topics",
            name="logged-in",
            partitions="1",
            replication_factor="-1",
            configs="",
        ).status
        == 303
    )
    assert "logged-in" in topics_of(broker)
    old_jar = dict(v.jar)
    out = v.submit("/", "/logout")
    assert out.status == 303 and out.location == "/login"
    assert v.get("/topics").status == 303
    v.jar = old_jar  # the old cookie is dead on the server too
    assert v.get("/topics").status == 303
    assert PASSWORD not in locked.stderr()


def test_a_login_form_posted_from_elsewhere_is_refused(locked: Console) -> None:
    v = locked.visitor()
    page = v.get("/login")
    from console_http import csrf_token

    token = csrf_token(page.text)
    assert (
        v.post(
            "/login", {"csrf_token": token, "password": PASSWORD}, origin="http://evil.example"
        ).status
        == 403
    )
    assert v.post("/login", {"csrf_token": "1.2.3", "password": PASSWORD}).status == 403
    stranger = locked.visitor()  # the token is bound to the login cookie of the page that showed it
    assert stranger.post("/login", {"csrf_token": token, "password": PASSWORD}).status == 403
    assert v.post("/login", {"csrf_token": token, "password": PASSWORD}).status == 303


def test_after_login_the_visitor_goes_back_to_the_console_only(locked: Console) -> None:
    v = locked.visitor()
    answer = v.get("/groups?x=1")
    assert answer.status == 303 and answer.location.startswith("/login?")
    assert parse_qs(urlsplit(answer.location).query) == {"next": ["/groups?x=1"]}
    from console_http import csrf_token

    for target, expected in (
        ("/groups?x=1", "/groups?x=1"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("/\t/evil.example", "/"),
        ("https://evil.example/", "/"),
    ):
        v.jar.clear()
        token = csrf_token(v.get("/login").text)
        answer = v.post("/login", {"csrf_token": token, "password": PASSWORD, "next": target})
        assert (answer.status, answer.location) == (303, expected), target


# --- start-up refusals ---


def test_beyond_loopback_the_console_needs_a_login_and_tls(
    broker: InProcessBroker, tmp_path: Path
) -> None:
    b = broker.bootstrap_servers
    out = refused("-b", b, "--listen", "0.0.0.0:0")  # no login
    assert "loopback" in out and "--auth none" in out
    out = refused(
        "-b",
        b,
        "--listen",
        "0.0.0.0:0",
        "--allowed-host",
        "console.example",
        "--auth",
        "none",
        "--insecure-plain-http",
    )  # none, even when asked for
    assert "--auth none" in out
    env = {"GREGOR_CONSOLE_PASSWORD": PASSWORD}
    out = refused(
        "-b",
        b,
        "--listen",
        "0.0.0.0:0",
        "--allowed-host",
        "console.example",
        "--auth",
        "password",
        env=env,
    )  # a login, but no TLS
    assert "TLS" in out and "--tls-cert" in out
    out = refused(
        "-b", b, "--listen", "0.0.0.0:0", "--auth", "password", "--insecure-plain-http", env=env
    )
    assert "--allowed-host" in out  # a wildcard address names no host to allow
    out = refused("-b", b, "--auth", "password", env={"GREGOR_CONSOLE_PASSWORD": "short"})
    assert "at least" in out
    # an explicit flag: plain HTTP with a login, and a loud warning
    c = start_console(
        "-b",
        b,
        "--listen",
        "0.0.0.0:0",
        "--allowed-host",
        "console.example",
        "--auth",
        "password",
        "--insecure-plain-http",
        env=env,
    )
    try:
        v = c.visitor()
        assert v.get("/login", host=f"console.example:{c.port}").status == 200
        assert v.get("/login", host=f"127.0.0.1:{c.port}").status == 403  # not on the list
        assert "WARNING" in c.stderr() and "plain HTTP" in c.stderr()
    finally:
        c.stop()


def test_without_a_login_on_loopback_the_console_warns(console: Console) -> None:
    assert "WARNING" in console.stderr() and "without a login" in console.stderr()


def test_the_console_over_tls(broker: InProcessBroker, tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "security"))
    from certs import Authority

    ca = Authority(tmp_path / "pki")
    pem = ca.server()
    ctx = ssl.create_default_context(cafile=str(ca.ca_path))
    c = start_console(
        "-b",
        broker.bootstrap_servers,
        "--listen",
        "127.0.0.1:0",
        "--auth",
        "password",
        "--tls-cert",
        str(pem.cert),
        "--tls-key",
        str(pem.key),
        env={"GREGOR_CONSOLE_PASSWORD": PASSWORD},
        ssl_context=ctx,
    )
    try:
        assert c.url.startswith("https://127.0.0.1:")
        v = c.visitor()
        answer = v.login(None, PASSWORD)
        assert answer.status == 303
        [cookie] = [x for x in answer.cookies() if "gregor_session=" in x]
        assert cookie.startswith("__Host-gregor_session=") and "; Secure" in cookie
        assert v.get("/topics").status == 200
        import http.client

        plain = http.client.HTTPConnection("127.0.0.1", c.port, timeout=60)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            plain.request("GET", "/login")
            plain.getresponse().read()
        plain.close()
    finally:
        c.stop()
    out = refused(
        "-b",
        broker.bootstrap_servers,
        "--auth",
        "password",
        "--tls-cert",
        str(pem.cert),
        "--tls-key",
        str(tmp_path / "missing.key"),
        env={"GREGOR_CONSOLE_PASSWORD": PASSWORD},
    )
    assert "missing.key" in out


# --- each visitor acts as their own Kafka principal ---


@pytest.fixture(scope="module")
def secured() -> Iterator[InProcessBroker]:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
        "auto.create.topics.enable": False,
    }
    with InProcessBroker(config=config) as b:
        admin = AdminClient(as_user(b, "admin"))
        for f in admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    u, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), p.encode()
                )
                for u, p in USERS.items()
                if u != "admin"
            ]
        ).values():
            f.result(30)
        for f in admin.create_topics([NewTopic("payroll", 1, 1)]).values():
            f.result(30)
        for f in admin.create_acls(
            [
                AclBinding(
                    ResourceType.TOPIC,
                    "payroll",
                    ResourcePatternType.LITERAL,
                    "User:alice",
                    "*",
                    op,
                    AclPermissionType.ALLOW,
                )
                for op in (
                    AclOperation.DESCRIBE,
                    AclOperation.READ,
                    AclOperation.WRITE,
                    AclOperation.DESCRIBE_CONFIGS,
                )
            ]
        ).values():
            f.result(30)
        produce(b, "payroll", [b"salary:100"], config=as_user(b, "admin", bootstrap=False))
        yield b


def as_user(b: Any, user: str, bootstrap: bool = True) -> dict[str, Any]:
    return {
        **({"bootstrap.servers": b.bootstrap_servers} if bootstrap else {}),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def test_the_operators_credentials_are_not_lent_to_visitors(secured: InProcessBroker) -> None:
    """The old way, the console logged in as the operator's -X user and served everyone as
    that user: now it refuses to start so, and says what to do instead."""
    args = (
        "-b",
        secured.bootstrap_servers,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
        "-X",
        "sasl.username=admin",
        "-X",
        "sasl.password=admin-secret",
    )
    try:
        c = start_console(*args)
    except ConsoleRefused as e:
        assert "sasl.username" in e.output and "every visitor" in e.output
        assert "admin-secret" not in e.output
    else:
        try:  # the console of old: an anonymous visitor acts as admin
            v = c.visitor()
            v.submit(
                "/topics",
                "/topics",
                name="anonymous-admin",
                partitions="1",
                replication_factor="-1",
                configs="",
            )
            assert "anonymous-admin" not in topics_of(
                secured, as_user(secured, "admin", bootstrap=False)
            )
        finally:
            c.stop()
        raise AssertionError(
            "the console started with the operator's credentials for every visitor"
        )
    # with a console password the operator may share that user on purpose
    c = start_console(*args, "--auth", "password", env={"GREGOR_CONSOLE_PASSWORD": PASSWORD})
    try:
        v = c.visitor()
        assert v.get("/topics").status == 303
        assert v.login(None, PASSWORD).status == 303
        assert "console login, as User:admin" in v.get("/").text
    finally:
        c.stop()


@pytest.fixture(scope="module")
def sasl_console(secured: InProcessBroker) -> Iterator[Console]:
    c = start_console(
        "-b",
        secured.bootstrap_servers,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=SCRAM-SHA-256",
    )
    try:
        yield c
    finally:
        c.stop()


def test_each_visitor_sees_and_does_what_their_acls_allow(
    secured: InProcessBroker, sasl_console: Console
) -> None:
    anonymous = sasl_console.visitor()
    assert anonymous.get("/topics").status == 303
    alice, bob = sasl_console.visitor(), sasl_console.visitor()
    assert alice.login("alice", USERS["alice"]).status == 303
    assert bob.login("bob", USERS["bob"]).status == 303
    assert "User:alice" in alice.get("/").text and "User:bob" in bob.get("/").text

    assert "payroll" in re.findall(r"<a href='/topics/([^']+)'>", alice.get("/topics").text)
    assert "payroll" not in re.findall(r"<a href='/topics/([^']+)'>", bob.get("/topics").text)
    messages = alice.get("/topics/payroll/messages?from=earliest&partition=0")
    assert messages.status == 200 and "salary:100" in messages.text
    denied = bob.get("/topics/payroll/messages?from=earliest&partition=0")
    assert denied.status == 303 and "salary:100" not in denied.text
    assert "TOPIC_AUTHORIZATION_FAILED" in unquote_plus(denied.location)

    # produce: bob is refused by the broker, alice's record arrives (read back as admin)
    answer = bob.submit(
        "/topics",
        "/topics/payroll/produce",
        key="",
        value="bob-was-here",
        headers="",
        partition="0",
    )
    assert answer.status == 303 and "TOPIC_AUTHORIZATION_FAILED" in unquote_plus(answer.location)
    answer = alice.submit(
        "/topics",
        "/topics/payroll/produce",
        key="",
        value="alice-was-here",
        headers="",
        partition="0",
    )
    assert answer.status == 303 and "Produced+to+partition+0+at+offset+1" in answer.location
    c = Consumer(
        {
            **as_user(secured, "admin"),
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition("payroll", 0, 0)])
        got: list[bytes] = []
        while len(got) < 2:
            got += [m.value() for m in c.consume(10, 1.0) if not m.error()]
        assert got == [b"salary:100", b"alice-was-here"]
    finally:
        c.close()
    # bob may not create topics; the cluster's answer is on the page
    answer = bob.submit(
        "/topics", "/topics", name="bobs-topic", partitions="1", replication_factor="-1", configs=""
    )
    assert "AUTHORIZATION_FAILED" in unquote_plus(answer.location)
    assert "bobs-topic" not in topics_of(secured, as_user(secured, "admin", bootstrap=False))


def test_failed_logins_all_look_the_same(sasl_console: Console) -> None:
    v = sasl_console.visitor()
    answers = [
        v.login("alice", "wrong"),
        v.login("nobody", "wrong"),
        v.login("", ""),
        v.login("alice\r\nx", "y"),
    ]
    assert {a.status for a in answers} == {401}
    bodies = {re.sub(r"name='csrf_token' value='[^']+'", "", a.text) for a in answers}
    assert len(bodies) == 1, bodies
    assert "wrong" not in sasl_console.stderr().replace("login failed", "")


# --- a broker that went away ---


def test_an_unreachable_broker_is_a_page_with_a_retry() -> None:
    with BrokerProcess(config={"num.partitions": 1}) as b:
        c = start_console("-b", b.bootstrap_servers)
        try:
            v = c.visitor()
            assert v.get("/topics").status == 200
            b.stop()
            answer = v.get("/topics?internal=1")
            assert answer.status == 503, answer.text[:300]
            assert (
                "id='unreachable'" in answer.text
                and "<a id='retry' href='/topics?internal=1'>" in answer.text
            )
            api = v.get("/api/throughput")
            assert api.status == 503 and json.loads(api.text)["error"] == "broker unreachable"
            b.start()
            answer = v.get("/topics?internal=1")
            while answer.status == 503:  # the client reconnects after its backoff
                answer = v.get("/topics?internal=1")
            assert answer.status == 200 and "<table id='topics'>" in answer.text
        finally:
            c.stop()
