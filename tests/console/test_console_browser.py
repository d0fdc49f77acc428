"""The web console in a real browser: Debian's Chromium, driven by Selenium through
chromium-driver, clicks through every page against a real broker; what each action does is
read back with confluent-kafka. Screenshots of each page go to ``$GREGOR_SCREENSHOTS`` (or the
test's temporary directory)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from gregor.testing import BrokerProcess

pytestmark = [
    pytest.mark.interop,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        shutil.which("chromium") is None or shutil.which("chromedriver") is None,
        reason="no chromium / chromedriver (scripts/system-deps.sh installs them)",
    ),
]

BUDGET_S = 60.0


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    # no auto-creation: the test's clients would bring the deleted topic back
    with BrokerProcess(config={"num.partitions": 1, "offsets.topic.num.partitions": 1,
                               "auto.create.topics.enable": False}) as b:
        yield b


@pytest.fixture(scope="module")
def console(broker: BrokerProcess) -> Iterator[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gregor", "console", "-b", broker.bootstrap_servers, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert m, f"console did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        yield m.group(0)
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    os.environ["SE_OFFLINE"] = "true"  # never let Selenium Manager download a driver
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(shutil.which("chromedriver")))
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

    element = WebDriverWait(driver, BUDGET_S).until(expected_conditions.presence_of_element_located((By.ID, element_id)))
    return str(element.text)


def committed_offsets(broker: BrokerProcess, group: str, topic: str, partitions: int) -> list[int]:
    """The group's committed offsets, read with confluent-kafka."""
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)]
    finally:
        c.close()


def test_click_through_every_page(broker: BrokerProcess, console: str, browser: Any, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    d = browser
    ck = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

    # topics: create one from the form
    d.get(console + "topics")
    submit(d, "create-topic", name="web-orders", partitions="2", configs="retention.ms=3600000")
    assert text_of(d, "message") == "Created topic web-orders."
    assert len(ck.list_topics(timeout=30).topics["web-orders"].partitions) == 2

    # produce from the topic page; confluent-kafka reads it back
    submit(d, "produce", key="order-1", value='{"item": "book", "qty": 2}', headers="source=console", partition="1")
    assert text_of(d, "message") == "Produced to partition 1 at offset 0."
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "web-readers",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("web-orders", 1, 0)])
        msg = until(lambda: next((m for m in c.consume(1, 1.0) if not m.error()), None))
        assert (msg.key(), json.loads(msg.value()), msg.headers()) == (
            b"order-1", {"item": "book", "qty": 2}, [("source", b"console")])
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
    entries = next(iter(ck.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "web-orders")]).values())).result(30)
    assert (entries["retention.ms"].value, entries["cleanup.policy"].value) == ("7200000", "compact,delete")
    submit(d, "add-partitions", count="3")
    assert text_of(d, "message") == "web-orders now has 3 partitions."
    assert len(ck.list_topics(timeout=30).topics["web-orders"].partitions) == 3

    # the message browser: JSON pretty-printed, hex, from an offset, headers shown
    d.get(console + "topics/web-orders/messages?partition=1&from=earliest&format=json")
    cells = [r.find_elements(By.TAG_NAME, "td") for r in d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")]
    assert [c[1].text for c in cells] == ["0", "1", "2", "3", "4"]
    assert cells[0][4].find_element(By.TAG_NAME, "pre").text == '{\n  "item": "book",\n  "qty": 2\n}'
    assert cells[0][5].text == "source: console"
    d.save_screenshot(str(shots / "messages.png"))
    d.get(console + "topics/web-orders/messages?partition=1&from=offset&offset=3&format=hex")
    cells = [r.find_elements(By.TAG_NAME, "td") for r in d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")]
    assert [(c[1].text, c[4].text) for c in cells] == [("3", b"plain-2".hex(" ")), ("4", b"plain-3".hex(" "))]
    d.get(console + "topics/web-orders/messages?partition=1&from=tail&limit=2")
    assert [r.text.split()[1] for r in d.find_elements(By.CSS_SELECTOR, "#messages tbody tr")] == ["3", "4"]

    # groups: the committed offset and lag, then a reset to the earliest offset
    d.get(console + "groups")
    assert "web-readers" in text_of(d, "groups")
    d.save_screenshot(str(shots / "groups.png"))
    d.get(console + "groups/web-readers")
    lag_rows = [r.text.split() for r in d.find_elements(By.CSS_SELECTOR, "#lag tbody tr")]
    assert [r[:5] for r in lag_rows] == [["web-orders", "1", "1", "5", "4"]]
    d.save_screenshot(str(shots / "group.png"))
    submit(d, "reset-offsets", topic="web-orders", strategy="duration", value="PT1H")  # an hour back: the start
    assert text_of(d, "message") == "Reset 3 offsets of web-readers on web-orders."
    assert committed_offsets(broker, "web-readers", "web-orders", 3) == [0, 0, 0]
    submit(d, "reset-offsets", topic="web-orders", strategy="offset", value="3")
    assert text_of(d, "message") == "Reset 3 offsets of web-readers on web-orders."
    assert committed_offsets(broker, "web-readers", "web-orders", 3) == [0, 3, 0]  # clamped to each end

    # the overview: cluster facts and live charts fed by /api/throughput
    d.get(console)
    assert text_of(d, "cluster-id") == ck.list_topics(timeout=30).cluster_id
    assert text_of(d, "under-replicated") == "0"
    assert d.find_element(By.ID, "brokers").text.count("controller") == 1
    until(lambda: (d.execute_script("return window.gregorPolls || 0") or 0) >= 2)
    assert d.find_element(By.ID, "throughput-chart").size["height"] > 50
    d.save_screenshot(str(shots / "overview.png"))

    # security pages on a broker without an authorizer
    d.get(console + "acls")
    assert "No authorizer" in text_of(d, "no-authorizer")
    d.save_screenshot(str(shots / "acls.png"))
    d.get(console + "users")
    assert d.find_elements(By.CSS_SELECTOR, "#users tbody tr") == []
    d.save_screenshot(str(shots / "users.png"))

    # bad input is an error on the page, not a crash; then delete the topic
    d.get(console + "topics")
    submit(d, "create-topic", name="bad name!", partitions="1")
    assert "cannot create bad name!" in text_of(d, "error")
    d.get(console + "topics/web-orders")
    delete = d.find_element(By.ID, "delete-topic")
    delete.find_element(By.TAG_NAME, "button").click()
    wait_for_new_page(d, delete)
    assert text_of(d, "message") == "Deleted topic web-orders."
    assert "web-orders" not in text_of(d, "topics")
    d.save_screenshot(str(shots / "topics.png"))
