"""The console's Schemas pages against a real registry: an in-process broker with Gregor's
registry on its event loop, schemas registered with confluent-kafka's ``SchemaRegistryClient``
(two Avro versions of one subject, a JSON schema, a Protobuf one), the console served in-process
and read over HTTP; the exact subjects, versions, pretty-printed schemas and diff lines; hostile
subject names; the registry's 404, silence and refusals as pages; with ``--auth sasl`` the
registry's subject ACLs deciding what each visitor sees."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from html import escape, unescape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from console_http import Answer, Console, refused

from gregor.client.schema_registry import RegistryClient
from gregor.console.app import serve
from gregor.console.settings import resolve
from gregor.schema_registry.acls import Operation, RegistryAcl
from gregor.schema_registry.auth import SaslBasicAuth
from gregor.schema_registry.server import SchemaRegistryServer
from gregor.testing import InProcessBroker
from gregor.testing.cli import run_command
from gregor.testing.ports import free_port

ORDER_V1 = json.dumps(
    {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
)
ORDER_V2 = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "note", "type": "string", "default": ""},
        ],
    }
)
EVENT = json.dumps(
    {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}
)
CUSTOMER = json.dumps(
    {"type": "record", "name": "Customer", "fields": [{"name": "name", "type": "string"}]}
)
INVOICE = json.dumps(
    {"type": "record", "name": "Invoice", "fields": [{"name": "customer", "type": "Customer"}]}
)
POINT = 'syntax = "proto3";\npackage demo;\n\nmessage Point {\n  int32 x = 1;\n  int32 y = 2;\n}\n'


def rows(html: str, table_id: str) -> list[list[str]]:
    """The cells' text of the table with ``table_id`` (tags stripped, entities decoded)."""
    m = re.search(rf"<table id='{table_id}'>(.*?)</table>", html, re.S)
    assert m, f"no table {table_id} in {html[:2000]}"
    body = m.group(1).split("<tbody>", 1)[1]
    return [
        [unescape(re.sub(r"<[^>]+>", "", cell)) for cell in re.findall(r"<td>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def hrefs(html: str, table_id: str) -> list[str]:
    m = re.search(rf"<table id='{table_id}'>(.*?)</table>", html, re.S)
    assert m
    return [unescape(h) for h in re.findall(r"href='([^']*)'", m.group(1))]


def element(html: str, ident: str) -> str:
    m = re.search(rf"<(\w+) id='{ident}'>(.*?)</\1>", html, re.S)
    assert m, f"no #{ident} in {html[:2000]}"
    return m.group(2)


def until(condition: Callable[[], bool]) -> None:
    while not condition():
        time.sleep(0.02)


def registry(broker: InProcessBroker, topic: str, **extra: Any) -> SchemaRegistryServer:
    server = SchemaRegistryServer(
        {"bootstrap.servers": broker.bootstrap_servers, **extra.pop("client", {})},
        "http://127.0.0.1:0",
        topic=topic,
        **extra,
    )

    async def go() -> SchemaRegistryServer:
        return await server.start()

    return broker.call(go)


@contextmanager
def console(broker: InProcessBroker, registry_url: str | None, **client: str) -> Iterator[Console]:
    settings, _ = resolve(
        {"bootstrap.servers": broker.bootstrap_servers, **client},
        "127.0.0.1",
        0,
        auth="sasl" if client else "none",
        schema_registry_url=registry_url,
    )

    async def go() -> Any:
        return await serve(settings)

    runner, port = broker.call(go)
    try:
        yield Console(f"http://127.0.0.1:{port}/")
    finally:
        broker.call(runner.cleanup)


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker({"num.partitions": 1}) as b:
        yield b


#: The tests on ``site`` (or ``reg``) start a process: the registry compiles the Protobuf schema
#: it is given with protoc (grpc_tools) in a child process.
WITH_PROTOC = pytest.mark.process


@pytest.fixture(scope="module")
def reg(broker: InProcessBroker) -> Iterator[SchemaRegistryServer]:
    server = registry(broker, "_schemas_console")
    client = SchemaRegistryClient({"url": server.url})
    assert client.register_schema("orders-value", Schema(ORDER_V1, "AVRO")) >= 1
    client.set_compatibility("orders-value", "FULL")
    assert client.register_schema("orders-value", Schema(ORDER_V2, "AVRO")) >= 1
    client.register_schema("events-value", Schema(EVENT, "JSON"))
    client.register_schema("points-value", Schema(POINT, "PROTOBUF"))
    client.register_schema("customer-value", Schema(CUSTOMER, "AVRO"))
    refs = [SchemaReference("Customer", "customer-value", 1)]
    client.register_schema("invoice-value", Schema(INVOICE, "AVRO", refs))
    yield server
    broker.call(server.stop)


@pytest.fixture(scope="module")
def site(broker: InProcessBroker, reg: SchemaRegistryServer) -> Iterator[Console]:
    with console(broker, reg.url) as c:
        yield c


def ok(answer: Answer) -> str:
    assert answer.status == 200, (answer.status, answer.text[:2000])
    return answer.text


def ids(reg: SchemaRegistryServer) -> dict[tuple[str, int], int]:
    client = SchemaRegistryClient({"url": reg.url})
    return {
        (s, v): client.get_version(s, v).schema_id
        for s in client.get_subjects()
        for v in client.get_versions(s)
    }


@WITH_PROTOC
def test_the_subjects_with_latest_version_type_id_and_compatibility(
    site: Console, reg: SchemaRegistryServer
) -> None:
    html = ok(site.visitor().get("/schemas"))
    known = ids(reg)
    assert rows(html, "subjects") == [
        ["customer-value", "1", "AVRO", str(known["customer-value", 1]), "BACKWARD (global)"],
        ["events-value", "1", "JSON", str(known["events-value", 1]), "BACKWARD (global)"],
        ["invoice-value", "1", "AVRO", str(known["invoice-value", 1]), "BACKWARD (global)"],
        ["orders-value", "2", "AVRO", str(known["orders-value", 2]), "FULL"],
        ["points-value", "1", "PROTOBUF", str(known["points-value", 1]), "BACKWARD (global)"],
    ]
    assert hrefs(html, "subjects")[2:4] == [
        "/schemas/events-value",
        "/schemas/events-value/versions/1",
    ]
    assert '<a href="/schemas" class="active">Schemas</a>' in html


@WITH_PROTOC
def test_a_subjects_versions_config_and_mode(site: Console, reg: SchemaRegistryServer) -> None:
    html = ok(site.visitor().get("/schemas/orders-value"))
    known = ids(reg)
    assert rows(html, "versions") == [
        ["1", str(known["orders-value", 1]), "AVRO", "-"],
        ["2", str(known["orders-value", 2]), "AVRO", "-"],
    ]
    assert hrefs(html, "versions") == [
        "/schemas/orders-value/versions/1",
        "/schemas/orders-value/versions/2",
    ]
    assert element(html, "compatibility") == "FULL"
    assert element(html, "mode") == "READWRITE"


@WITH_PROTOC
def test_a_version_pretty_printed(site: Console, reg: SchemaRegistryServer) -> None:
    v = site.visitor()
    html = ok(v.get("/schemas/orders-value/versions/2"))
    assert unescape(element(html, "schema")) == json.dumps(json.loads(ORDER_V2), indent=2)
    assert element(html, "schema-type") == "AVRO"
    assert element(html, "schema-id") == str(ids(reg)["orders-value", 2])
    assert "/schemas/orders-value/diff?from=1&amp;to=2" in html
    assert ok(v.get("/schemas/orders-value/versions/latest")).count("&quot;note&quot;") == 1
    json_html = ok(v.get("/schemas/events-value/versions/1"))
    assert unescape(element(json_html, "schema")) == json.dumps(json.loads(EVENT), indent=2)
    proto_html = ok(v.get("/schemas/points-value/versions/1"))
    assert element(proto_html, "schema-type") == "PROTOBUF"
    shown = unescape(element(proto_html, "schema"))
    assert "message Point {" in shown and "int32 y = 2;" in shown
    assert (
        shown
        == SchemaRegistryClient({"url": reg.url}).get_version("points-value", 1).schema.schema_str
    )


@WITH_PROTOC
def test_references_and_the_diff_form(site: Console, reg: SchemaRegistryServer) -> None:
    v = site.visitor()
    html = ok(v.get("/schemas/invoice-value"))
    known = ids(reg)
    assert rows(html, "versions") == [
        ["1", str(known["invoice-value", 1]), "AVRO", "Customer → customer-value v1"]
    ]
    page = ok(v.get("/schemas/invoice-value/versions/1"))
    assert rows(page, "references") == [["Customer", "customer-value", "1"]]
    assert hrefs(page, "references") == ["/schemas/customer-value"]
    assert "no-references" in ok(v.get("/schemas/customer-value/versions/1"))
    orders = ok(v.get("/schemas/orders-value/versions/1"))
    form = re.search(r"<form method='get' action='([^']+)' id='diff-form'>(.*?)</form>", orders)
    assert form and form.group(1) == "/schemas/orders-value/diff"
    assert re.findall(r"<option value='(\d+)'", form.group(2)) == ["1", "2"]
    assert "<input type='hidden' name='to' value='1'>" in form.group(2)


@WITH_PROTOC
def test_the_diff_of_two_versions_marks_the_added_field(site: Console) -> None:
    html = ok(site.visitor().get("/schemas/orders-value/diff?from=1&to=2"))
    diff = element(html, "diff")
    marked = [
        (cls, unescape(text))
        for cls, text in re.findall(r"<span class='(\w+)'>(.*?)</span>", diff, re.S)
    ]
    assert [line for cls, line in marked if cls == "removed"] == []
    assert [line for cls, line in marked if cls == "added"] == [
        "+     },",
        "+     {",
        '+       "name": "note",',
        '+       "type": "string",',
        '+       "default": ""',
    ]
    v1 = json.dumps(json.loads(ORDER_V1), indent=2).splitlines()
    assert [line[2:] for cls, line in marked if cls == "same"] == v1  # only insertions
    assert "2 lines added" not in html and "5 lines added, 0 removed" in html
    back = ok(site.visitor().get("/schemas/orders-value/diff?from=latest&to=1"))
    assert "0 lines added, 5 removed" in back


def test_hostile_subject_names_round_trip_escaped(broker: InProcessBroker) -> None:
    server = registry(broker, "_schemas_console_hostile")
    client = SchemaRegistryClient({"url": server.url})
    hostile = ["<script>alert(1)</script>", "a/b", "x'\"&?#%", ".."]
    try:
        for name in hostile[:-1]:
            client.register_schema(name, Schema(ORDER_V1, "AVRO"))
        # confluent-kafka's client (requests) folds a ".." path segment away: the project's
        # client (urllib) sends it as it is
        RegistryClient(server.url).call("POST", "/subjects/../versions", {"schema": ORDER_V1})
        with console(broker, server.url) as c:
            v = c.visitor()
            html = ok(v.get("/schemas"))
            assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
            listed = {
                r[0]: href
                for r, href in zip(
                    rows(html, "subjects"), hrefs(html, "subjects")[::2], strict=True
                )
            }
            assert sorted(listed) == sorted(hostile)
            assert listed["a/b"] == "/schemas/a%2Fb"
            assert listed[".."] == "/schemas/_?subject=.."
            assert listed["x'\"&?#%"] == "/schemas/x%27%22%26%3F%23%25"
            for name in hostile:
                page = ok(v.get(listed[name]))
                assert heading(page) == "Subject " + escape(name)
                version_page = ok(v.get(hrefs(page, "versions")[0]))
                assert heading(version_page) == escape(name) + " version 1"
                assert unescape(element(version_page, "schema")) == json.dumps(
                    json.loads(ORDER_V1), indent=2
                )
    finally:
        broker.call(server.stop)


def heading(html: str) -> str:
    m = re.search(r"<h1>(.*?)</h1>", html)
    assert m, html[:2000]
    return m.group(1)


@WITH_PROTOC
def test_unknown_subject_or_version_is_a_404_page_and_bad_versions_a_400(site: Console) -> None:
    v = site.visitor()
    gone = v.get("/schemas/no-such-subject")
    assert gone.status == 404
    assert "Subject &#x27;no-such-subject&#x27; not found." in element(gone.text, "registry-error")
    version = v.get("/schemas/orders-value/versions/9")
    assert version.status == 404
    assert "Version 9 not found" in element(version.text, "registry-error")
    for query in ("from=1&to=x", "from=-1&to=2", "from=1", "from=1%2B1&to=2", "from=0&to=1"):
        bad = v.get("/schemas/orders-value/diff?" + query)
        assert bad.status == 400, query
        assert "bad-request" in bad.text
    assert v.get("/schemas/orders-value/versions/one").status == 400


def test_an_unreachable_registry_is_a_page_that_says_so(broker: InProcessBroker) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with console(broker, url) as c:
        answer = c.visitor().get("/schemas")
        assert answer.status == 503
        assert f"cannot reach the schema registry at {url}" in element(
            answer.text, "registry-error"
        )
        assert "Traceback" not in answer.text


class NotARegistry(BaseHTTPRequestHandler):
    """Answers JSON that is not Confluent's API: a subject whose latest version has no id,
    a versions list of strings."""

    ANSWERS: ClassVar[dict[str, Any]] = {
        "/subjects": ["odd"],
        "/config": {"compatibilityLevel": "BACKWARD"},
        "/subjects/odd/versions/latest": {"version": 1},
        "/subjects/odd/versions": ["one"],
    }

    def do_GET(self) -> None:  # noqa: N802 (the handler's API)
        path = self.path.split("?")[0]
        known = path in self.ANSWERS
        body = json.dumps(self.ANSWERS[path] if known else {"error_code": 404, "message": "no"})
        self.send_response(200 if known else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_a_registry_answering_something_else_is_a_page_not_a_traceback(
    broker: InProcessBroker,
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotARegistry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with console(broker, f"http://127.0.0.1:{server.server_address[1]}") as c:
            v = c.visitor()
            for path in ("/schemas", "/schemas/odd", "/schemas/odd/versions/latest"):
                answer = v.get(path)
                assert answer.status == 502, (path, answer.text[:2000])
                assert "not Confluent's Schema Registry API" in answer.text
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_without_a_registry_there_is_no_link_and_schemas_says_how_to_set_one(
    broker: InProcessBroker,
) -> None:
    with console(broker, None) as c:
        v = c.visitor()
        home = ok(v.get("/"))
        assert "/schemas" not in home
        html = ok(v.get("/schemas"))
        assert "--schema-registry URL" in element(html, "no-registry")
        assert "GREGOR_SCHEMA_REGISTRY_URL" in html
        assert v.get("/schemas/orders-value").status == 404


@pytest.mark.process
def test_gregor_console_refuses_a_registry_that_is_not_a_url() -> None:
    out = refused("-b", "127.0.0.1:9", "--schema-registry", "ftp://x")
    assert "--schema-registry ftp://x: use the registry's http(s)://host:port URL" in out
    out = refused("-b", "127.0.0.1:9", env={"GREGOR_SCHEMA_REGISTRY_URL": "localhost"})
    assert "--schema-registry localhost" in out
    out = refused("-b", "127.0.0.1:9", "--schema-registry", "http://ops:hunter2@127.0.0.1:8081")
    assert "the URL carries a user name or password" in out and "hunter2" not in out


USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}


def test_with_sasl_logins_the_registry_acls_decide_what_each_visitor_sees() -> None:
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "num.partitions": 1,
    }
    admin = {**SASL, "sasl.username": "admin", "sasl.password": "admin-secret"}
    with InProcessBroker(config) as b:
        topic = "_schemas_console_acl"
        server = registry(
            b,
            topic,
            client=admin,
            auth=SaslBasicAuth({"bootstrap.servers": b.bootstrap_servers, **admin}),
            authorizer="acl",
            super_users=("User:admin",),
        )
        try:
            sr = SchemaRegistryClient(
                {"url": server.url, "basic.auth.user.info": "admin:admin-secret"}
            )
            sr.register_schema("a-value", Schema(ORDER_V1, "AVRO"))
            sr.register_schema("b-value", Schema(EVENT, "JSON"))
            admin_x = [arg for k, val in admin.items() for arg in ("-X", f"{k}={val}")]
            code, _, err = run_command(
                b.bootstrap_servers,
                "acls",
                "add",
                *("--allow-principal", "User:alice", "--subject", "a-value"),
                *("--operation", "SUBJECT_READ", "--acl-topic", topic + "_acl", *admin_x),
            )
            assert code == 0, err
            expected = RegistryAcl("User:alice", Operation.SUBJECT_READ, "a-value")
            assert server.acls is not None
            until(lambda: expected in server.acls.acls)  # type: ignore[union-attr]
            with console(b, server.url, **SASL) as c:
                alice = c.visitor()
                assert alice.login("alice", "alice-secret").status == 303
                html = ok(alice.get("/schemas"))
                assert [r[0] for r in rows(html, "subjects")] == ["a-value"]
                assert ok(alice.get("/schemas/a-value/versions/1"))
                refused_page = alice.get("/schemas/b-value/versions/1")
                assert refused_page.status == 403
                assert "User is denied operation Read on Subject: b-value" in refused_page.text
                bob = c.visitor()
                assert bob.login("bob", "bob-secret").status == 303
                assert "no-subjects" in ok(bob.get("/schemas"))
                assert bob.get("/schemas/a-value").status == 403
                root = c.visitor()
                assert root.login("admin", "admin-secret").status == 303
                html = ok(root.get("/schemas"))
                assert [r[0] for r in rows(html, "subjects")] == ["a-value", "b-value"]
                assert "admin-secret" not in html and "alice-secret" not in html
        finally:
            b.call(server.stop)


@pytest.mark.process
def test_the_console_beside_a_broker_shows_the_registry_the_broker_serves() -> None:
    from gregor.testing import BrokerProcess

    with BrokerProcess(
        config={
            "console.listener": "http://127.0.0.1:0",
            "schema.registry.listener": "http://127.0.0.1:0",
        }
    ) as b:
        found: dict[str, str] = {}

        def started() -> bool:
            assert b.proc is not None and b.proc.poll() is None, b.read_log()[-2000:]
            log = b.read_log()
            for event in ("console", "schema_registry"):
                m = re.search(rf"event={event}\.started url=(\S+)", log)
                if m:
                    found[event] = m.group(1)
            return len(found) == 2

        until(started)
        sr = SchemaRegistryClient({"url": found["schema_registry"]})
        schema_id = sr.register_schema("beside-value", Schema(ORDER_V1, "AVRO"))
        v = Console(found["console"]).visitor()
        html = ok(v.get("/schemas"))
        assert '<a href="/schemas" class="active">Schemas</a>' in html
        assert rows(html, "subjects") == [
            ["beside-value", "1", "AVRO", str(schema_id), "BACKWARD (global)"]
        ]
