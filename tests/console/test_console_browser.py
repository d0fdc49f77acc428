"""The web console in a real browser: Debian's Chromium, driven by Selenium through
chromium-driver, logs in and clicks through every page against a real broker; what each action
does is read back with confluent-kafka. A second broker, with SASL users and an authorizer,
shows two visitors who log in with their own Kafka credentials and see and do what their
ACLs allow. The refusals are tried as an attacker would, in the browser: a page on another
origin that posts a form to the console or frames it, a name rebound to the console's address
(DNS rebinding, by Chromium's host resolver rules), and forms with a forged or missing token.
Screenshots of each page go to ``$GREGOR_SCREENSHOTS`` (or the test's temporary directory).
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from console_http import start_console

from gregor.testing import BrokerProcess, InProcessBroker

pytestmark = [
    pytest.mark.interop,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        shutil.which("chromium") is None or shutil.which("chromedriver") is None,
        reason="no chromium / chromedriver (scripts/system-deps.sh installs them)",
    ),
]

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
def broker() -> Iterator[BrokerProcess]:
    # no auto-creation: the test's clients would bring the deleted topic back
    with BrokerProcess(
        config={
            "num.partitions": 1,
            "offsets.topic.num.partitions": 1,
            "auto.create.topics.enable": False,
        }
    ) as b:
        yield b


@pytest.fixture(scope="module")
def console(broker: BrokerProcess) -> Iterator[str]:
    """The console with a password (``--auth password``): the click-through logs in first."""
    c = start_console(
        "-b",
        broker.bootstrap_servers,
        "--auth",
        "password",
        env={"GREGOR_CONSOLE_PASSWORD": PASSWORD},
    )
    try:
        yield c.url
    finally:
        c.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager download a driver
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        # evil.example resolves to the console's address: a DNS rebinding attack's view
        "--host-resolver-rules=MAP evil.example 127.0.0.1",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        options=options, service=webdriver.ChromeService(shutil.which("chromedriver"))
    )
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("GREGOR_SCREENSHOTS")
    path = Path(where) if where else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def until(check: Any) -> Any:
    give_up = time.monotonic() + BUDGET_S
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < give_up, "condition not reached"
        time.sleep(0.1)


def submit(driver: Any, form_id: str, **values: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    form = driver.find_element(By.ID, form_id)
    for name, value in values.items():
        el = form.find_element(By.NAME, name)
        if el.tag_name == "select":
            Select(el).select_by_value(value)
        else:
            el.clear()
            el.send_keys(value)
    form.find_element(By.TAG_NAME, "button").click()
    wait_for_new_page(driver, form)


def wait_for_new_page(driver: Any, old_element: Any) -> None:
    """Until the page the form was on has been replaced by the answer's."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    # While the browser swaps pages, a script may find no document yet: ask again.
    wait = WebDriverWait(driver, BUDGET_S, ignored_exceptions=(WebDriverException,))
    wait.until(expected_conditions.staleness_of(old_element))
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")


def text_of(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    element = WebDriverWait(driver, BUDGET_S).until(
        expected_conditions.presence_of_element_located((By.ID, element_id))
    )
    return str(element.text)


def committed_offsets(broker: BrokerProcess, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets, read with confluent-kafka."""
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        return [
            tp.offset
            for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        ]
    finally:
        c.close()


def log_in(driver: Any, url: str, password: str, username: str | None = None) -> None:
    driver.get(url + "login")
    if username is not None:
        submit(driver, "login", username=username, password=password)
    else:
        submit(driver, "login", password=password)


def log_out(driver: Any) -> None:
    from selenium.webdriver.common.by import By

    out = driver.find_element(By.ID, "logout")
    out.find_element(By.TAG_NAME, "button").click()
    wait_for_new_page(driver, out)


def csp_violations(driver: Any) -> list[str]:
    return [
        e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]
    ]


def test_click_through_every_page(
    broker: BrokerProcess, console: str, browser: Any, shots: Path
) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    ck = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    # every page asks for the login first; a wrong password is refused
    d.get(console + "topics")
    assert d.current_url == console + "login?next=/topics"
    d.save_screenshot(str(shots / "login.png"))
    submit(d, "login", password="not the password")
    assert text_of(d, "error") == "Login failed: wrong user name or password."
    submit(d, "login", password=PASSWORD)
    assert d.current_url == console + "topics"
    assert text_of(d, "principal") == "console login, as the principal of its -X settings"

    # topics: create one from the form
    submit(d, "create-topic", name="web-orders", partitions="2", configs="retention.ms=3600000")
    assert text_of(d, "message") == "Created topic web-orders."
    assert len(ck.list_topics(timeout=30).topics["web-orders"].partitions) == 2

    # produce from the topic page; confluent-kafka reads it back
    submit(
        d,
        "produce",
        key="order-1",
        value='{"item": "book", "qty": 2}',
        headers="source=console",
        partition="1",
    )
    assert text_of(d, "message") == "Produced to partition 1 at offset 0."
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "web-readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.assign([TopicPartition("web-orders", 1, 0)])
        msg = until(lambda: next((m for m in c.consume(1, 1.0) if not m.error()), None))
        assert (msg.key(), json.loads(msg.value()), msg.headers()) == (
            b"order-1",
            {"item": "book", "qty": 2},
            [("source", b"console")],
        )
        c.commit(offsets=[TopicPartition("web-orders", 1, 1)], asynchronous=False)
    finally:
        c.close()
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(4):
        p.produce("web-orders", b"plain-%d" % i, partition=1)
    assert p.flush(30) == 0

    # the topic page: partitions with offsets, configs; edit configs and add a partition
    d.get(console + "topics/web-orders")
    rows = [r.text.split() for r in d.find_elements(By.CSS_SELECTOR, "#partitions tbody tr")]
    assert [r[:2] + r[4:6] for r in rows] == [["0", "1", "0", "0"], ["1", "1", "0", "5"]]
    d.save_screenshot(str(shots / "topic.png"))
    submit(d, "edit-configs", configs="retention.ms=7200000\ncleanup.policy=compact,delete")
    assert text_of(d, "message") == "Updated the configs of web-orders."
    entries = next(
        iter(
            ck.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "web-orders")]).values()
        )
    ).result(30)
    assert (entries["retention.ms"].value, entries["cleanup.policy"].value) == (
        "7200000",
        "compact,delete",
    )
    submit(d, "add-partitions", count="3")
    assert text_of(d, "message") == "web-orders now has 3 partitions."
    assert len(ck.list_topics(timeout=30).topics["web-orders"].partitions) == 3

    # the message browser: JSON pretty-printed, hex, from an offset, headers shown
    d.get(console + "topics/web-orders/messages?partition=1&from=earliest&format=json")
    cells = [
        r.find_elements(By.TAG_NAME, "td")
        for r in d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
    ]
    assert [c[1].text for c in cells] == ["0", "1", "2", "3", "4"]
    assert (
        cells[0][4].find_element(By.TAG_NAME, "pre").text == '{\n  "item": "book",\n  "qty": 2\n}'
    )
    assert cells[0][5].text == "source: console"
    d.save_screenshot(str(shots / "messages.png"))
    d.get(console + "topics/web-orders/messages?partition=1&from=offset&offset=3&format=hex")
    cells = [
        r.find_elements(By.TAG_NAME, "td")
        for r in d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
    ]
    assert [(c[1].text, c[4].text) for c in cells] == [
        ("3", b"plain-2".hex(" ")),
        ("4", b"plain-3".hex(" ")),
    ]
    d.get(console + "topics/web-orders/messages?partition=1&from=tail&limit=2")
    assert [r.text.split()[1] for r in d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")] == [
        "3",
        "4",
    ]

    # groups: the committed offset and lag, then resets to the earliest offset and to 3, each
    # shown as a plan first and done when confirmed
    d.get(console + "groups")
    assert "web-readers" in text_of(d, "groups")
    d.save_screenshot(str(shots / "groups.png"))
    d.get(console + "groups/web-readers")
    lag_rows = [r.text.split() for r in d.find_elements(By.CSS_SELECTOR, "#lag tbody tr")]
    assert [r[:5] for r in lag_rows] == [["web-orders", "1", "1", "5", "4"]]
    d.save_screenshot(str(shots / "group.png"))
    submit(
        d, "reset-offsets", topic="web-orders", strategy="duration", value="PT1H"
    )  # an hour back: the start
    plan = [r.text.split() for r in d.find_elements(By.CSS_SELECTOR, "#reset-plan tbody tr")]
    assert plan == [
        ["web-orders", "0", "-", "0"],
        ["web-orders", "1", "1", "0"],
        ["web-orders", "2", "-", "0"],
    ]
    assert committed_offsets(broker, "web-readers", "web-orders", 3) == [-1001, 1, -1001]  # not yet
    d.save_screenshot(str(shots / "reset-plan.png"))
    submit(d, "confirm-reset")
    assert text_of(d, "message") == "Reset 3 offsets of web-readers on web-orders."
    assert committed_offsets(broker, "web-readers", "web-orders", 3) == [0, 0, 0]
    submit(d, "reset-offsets", topic="web-orders", strategy="offset", value="3")
    submit(d, "confirm-reset")
    assert text_of(d, "message") == "Reset 3 offsets of web-readers on web-orders."
    assert committed_offsets(broker, "web-readers", "web-orders", 3) == [
        0,
        3,
        0,
    ]  # clamped to each end

    # delete records: the plan, then confirmed
    d.get(console + "topics/web-orders")
    submit(d, "delete-records", partition="1", offset="2")
    plan = [
        r.text.split() for r in d.find_elements(By.CSS_SELECTOR, "#delete-records-plan tbody tr")
    ]
    assert plan == [["1", "0", "5", "2", "2"]]
    submit(d, "confirm-delete-records")
    assert (
        text_of(d, "message")
        == "Deleted records of web-orders: partition 1 now starts at offset 2."
    )
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "web-watermarks"})
    try:
        assert c.get_watermark_offsets(TopicPartition("web-orders", 1), timeout=30) == (2, 5)
    finally:
        c.close()

    # the overview: cluster facts and live charts fed by /api/throughput, a colour per series
    for f in ck.create_topics([NewTopic("web-audit", 1, 1)]).values():
        f.result(30)
    d.get(console)
    assert text_of(d, "cluster-id") == ck.list_topics(timeout=30).cluster_id
    assert text_of(d, "under-replicated") == "0"
    assert d.find_element(By.ID, "brokers").text.count("controller") == 1
    until(lambda: (d.execute_script("return window.gregorPolls || 0") or 0) >= 2)
    assert d.find_element(By.ID, "throughput-chart").size["height"] > 50
    colours = d.execute_script(
        "return Chart.getChart(document.getElementById('throughput-chart')).data.datasets"
        ".map((s) => [s.label, s.borderColor, s.backgroundColor])"
    )
    assert sorted(label for label, _, _ in colours) == ["web-audit", "web-orders"]
    assert all(isinstance(line, str) and line == fill for _, line, fill in colours)
    assert len({line for _, line, _ in colours}) == len(
        colours
    )  # Debian's Chart.js 3 has no palette
    assert csp_violations(d) == []  # the charts run under the console's Content-Security-Policy
    d.save_screenshot(str(shots / "overview.png"))

    # security pages on a broker without an authorizer
    d.get(console + "acls")
    assert "No authorizer" in text_of(d, "no-authorizer")
    d.save_screenshot(str(shots / "acls.png"))
    d.get(console + "users")
    assert d.find_elements(By.CSS_SELECTOR, "#users tbody tr") == []
    d.save_screenshot(str(shots / "users.png"))

    # bad input is an error on the page, not a crash; then delete the topic, typing its name
    d.get(console + "topics")
    submit(d, "create-topic", name="bad name!", partitions="1")
    assert "cannot create bad name!" in text_of(d, "error")
    d.get(console + "topics/web-orders")
    submit(d, "delete-topic")
    d.save_screenshot(str(shots / "delete-topic.png"))
    submit(d, "confirm-delete-topic", confirm="web-order")
    assert text_of(d, "error") == "The name typed is not the topic's: nothing was deleted."
    assert "web-orders" in ck.list_topics(timeout=30).topics
    submit(d, "confirm-delete-topic", confirm="web-orders")
    assert text_of(d, "message") == "Deleted topic web-orders."
    assert "web-orders" not in text_of(d, "topics")
    d.save_screenshot(str(shots / "topics.png"))

    # logging out ends the session: the pages ask for the login again
    log_out(d)
    assert d.current_url == console + "login"
    d.get(console + "topics")
    assert d.current_url == console + "login?next=/topics"


# --- a visitor denied by ACLs ---


@pytest.fixture(scope="module")
def secured() -> Iterator[InProcessBroker]:
    """SASL PLAIN users and Kafka's authorizer: alice may read and write ``payroll``, bob may not."""
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
        "auto.create.topics.enable": False,
    }
    with InProcessBroker(config=config) as b:
        admin = AdminClient(as_user(b, "admin"))
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
        p = Producer(as_user(b, "admin"))
        p.produce("payroll", b"salary:100", partition=0)
        assert p.flush(30) == 0
        yield b


def as_user(b: Any, user: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": b.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": USERS[user],
    }


def test_each_visitor_acts_as_their_own_kafka_user(
    secured: InProcessBroker, browser: Any, shots: Path
) -> None:
    from selenium.webdriver.common.by import By

    c = start_console(
        "-b",
        secured.bootstrap_servers,
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
    )
    d = browser
    try:
        url = c.url
        d.delete_all_cookies()
        d.get(url + "topics")
        assert d.current_url == url + "login?next=/topics"
        submit(d, "login", username="alice", password="wrong")
        assert text_of(d, "error") == "Login failed: wrong user name or password."
        submit(d, "login", username="nobody", password="wrong")
        assert text_of(d, "error") == "Login failed: wrong user name or password."

        # alice: the topic is listed, its messages shown, her record produced
        submit(d, "login", username="alice", password=USERS["alice"])
        assert text_of(d, "principal") == "User:alice"
        assert "payroll" in text_of(d, "topics")
        d.get(url + "topics/payroll/messages?partition=0&from=earliest")
        assert [
            r.text.split()[1:2] + r.text.split()[-1:]
            for r in d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")
        ] == [["0", "salary:100"]]
        d.get(url + "topics/payroll")
        submit(d, "produce", key="", value="from-alice", headers="", partition="0")
        assert text_of(d, "message") == "Produced to partition 0 at offset 1."
        log_out(d)

        # bob: the topic is not listed, reading and writing it are refused by the cluster
        submit(d, "login", username="bob", password=USERS["bob"])
        assert text_of(d, "principal") == "User:bob"
        d.get(url + "topics")
        assert "payroll" not in text_of(d, "topics")
        d.get(url + "topics/payroll/messages?partition=0&from=earliest")
        assert "TOPIC_AUTHORIZATION_FAILED" in text_of(d, "error")
        assert "salary" not in d.page_source
        d.save_screenshot(str(shots / "denied.png"))
        d.get(url + "acls")
        assert "CLUSTER_AUTHORIZATION_FAILED" in text_of(d, "refused")
        log_out(d)
    finally:
        c.stop()
    got: list[bytes] = []
    consumer = Consumer(
        {**as_user(secured, "admin"), "group.id": "browser-check", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition("payroll", 0, 0)])
        until(
            lambda: (
                got.extend(m.value() for m in consumer.consume(10, 1.0) if not m.error())
                or len(got) >= 2
            )
        )
    finally:
        consumer.close()
    assert got == [b"salary:100", b"from-alice"]


# --- the refusals, as an attacker's page would try them ---


class Attacker:
    """Pages on another origin (127.0.0.1, another port): same site as the console, so the
    browser even sends its SameSite=Strict cookie; the Origin check and the form token stop
    what the cookie would allow."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        pages = self.pages

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = pages.get(self.path, "").encode()
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_the_refusals_in_the_browser(broker: BrokerProcess, console: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    ck = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    d.delete_all_cookies()
    log_in(d, console, PASSWORD)
    port = console.rstrip("/").rsplit(":", 1)[1]
    attacker = Attacker()
    try:
        # a form on another origin posting to the console, the visitor logged in: refused
        attacker.pages["/post"] = (
            f"<form id='f' method='post' action='{console}topics'><input name='name' value='csrf-attack'>"
            "<input name='partitions' value='1'><input name='replication_factor' value='-1'></form>"
            "<script>document.getElementById('f').submit()</script>"
        )
        d.get(attacker.url + "/post")
        until(
            lambda: (
                d.current_url == console + "topics"
                and "refused" in d.find_element(By.TAG_NAME, "body").text
            )
        )
        assert (
            "cross-origin requests that change something are refused"
            in d.find_element(By.TAG_NAME, "body").text
        )

        # the console in a frame of another origin: the browser does not show it
        attacker.pages["/frame"] = (
            f"<iframe id='victim' src='{console}topics' width='800' height='600'></iframe>"
        )
        d.get(attacker.url + "/frame")
        frame = d.find_element(By.ID, "victim")
        d.switch_to.frame(frame)
        try:
            until(lambda: d.execute_script("return document.readyState") == "complete")
            assert d.execute_script("return location.href") == "chrome-error://chromewebdata/"
            assert d.find_elements(By.ID, "topics") == []
        finally:
            d.switch_to.default_content()

        # DNS rebinding: evil.example resolves to the console's address; the console refuses the name
        d.get(f"http://evil.example:{port}/topics")
        assert "not an allowed host name" in d.find_element(By.TAG_NAME, "body").text
        assert d.find_elements(By.ID, "topics") == []
    finally:
        attacker.close()

    # the console's own form with its token removed, or replaced: refused
    for tamper in (
        "f.querySelector('[name=csrf_token]').remove()",
        "f.querySelector('[name=csrf_token]').value = 'forged-token'",
    ):
        d.get(console + "topics")
        form = d.find_element(By.ID, "create-topic")
        form.find_element(By.NAME, "name").send_keys("tampered")
        d.execute_script(f"const f = document.getElementById('create-topic'); {tamper}; f.submit()")
        wait_for_new_page(d, form)
        assert (
            "the form's token is missing or not this session's"
            in d.find_element(By.TAG_NAME, "body").text
        )
    assert {"csrf-attack", "tampered"}.isdisjoint(ck.list_topics(timeout=30).topics)
    # and the untouched form works
    d.get(console + "topics")
    submit(d, "create-topic", name="untampered", partitions="1")
    assert text_of(d, "message") == "Created topic untampered."
