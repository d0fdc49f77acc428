"""The console's Tables pages (issue 39): every topic written as an Iceberg table with its lag,
and one table's catalog, snapshot, offsets and how to load it. A real in-process broker writes
the tables (pyiceberg's SQL catalog in its data directory); the console is served in-process and
read with a plain HTTP client; the records are produced with confluent-kafka."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from html import unescape
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from console_http import Answer, Console

from gregor.console.app import serve
from gregor.console.settings import resolve
from gregor.testing import InProcessBroker

pytest.importorskip("pyiceberg")

#: clicks: a table written every 50 ms; slow: one whose commits wait an hour (its records stay
#: in the translator's buffer, so its lag is all it holds); plain: no table.
CLICKS = {0: 7, 1: 5}
SLOW = 4


def rows(html: str, table_id: str) -> list[list[str]]:
    m = re.search(rf"<table id='{table_id}'>(.*?)</table>", html, re.S)
    assert m, f"no table {table_id} in {html[:2000]}"
    body = m.group(1).split("<tbody>", 1)[1]
    return [
        [
            unescape(re.sub(r"<[^>]+>", "", cell))
            for cell in re.findall(r"<td>(.*?)</td>", row, re.S)
        ]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def element(html: str, ident: str) -> str:
    m = re.search(rf"<(\w+) id='{ident}'>(.*?)</\1>", html, re.S)
    assert m, f"no #{ident} in {html[:2000]}"
    return unescape(re.sub(r"<[^>]+>", "", m.group(2)))


def until(condition: Callable[[], bool]) -> None:
    while not condition():
        time.sleep(0.05)


def ok(answer: Answer) -> str:
    assert answer.status == 200, (answer.status, answer.text[:2000])
    return answer.text


@pytest.fixture(scope="module")
def broker() -> Iterator[InProcessBroker]:
    with InProcessBroker({"num.partitions": 1}) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        table = {"iceberg.mode": "key_value"}
        futures = admin.create_topics(
            [
                NewTopic("clicks", 2, 1, config={**table, "iceberg.target.lag.ms": "50"}),
                NewTopic("slow", 1, 1, config={**table, "iceberg.target.lag.ms": "3600000"}),
                NewTopic("plain", 1, 1),
            ]
        )
        for f in futures.values():
            f.result(30)
        p = Producer({"bootstrap.servers": b.bootstrap_servers})
        for partition, n in CLICKS.items():
            for i in range(n):
                p.produce("clicks", f"v{partition}-{i}".encode(), b"k", partition=partition)
        for i in range(SLOW):
            p.produce("slow", f"s{i}".encode(), partition=0)
        p.produce("plain", b"x")
        assert p.flush(30) == 0
        yield b


@pytest.fixture(scope="module")
def site(broker: InProcessBroker) -> Iterator[Console]:
    settings, _ = resolve({"bootstrap.servers": broker.bootstrap_servers}, "127.0.0.1", 0)

    async def go() -> Any:
        return await serve(settings)

    runner, port = broker.call(go)
    try:
        yield Console(f"http://127.0.0.1:{port}/")
    finally:
        broker.call(runner.cleanup)


def caught_up(site: Console) -> str:
    """The Tables page once clicks' table holds every record (its lag 0)."""
    found: list[str] = []

    def done() -> bool:
        found[:] = [ok(site.visitor().get("/tables"))]
        # a catalog busy with the broker's commit may answer an error for a moment (the page
        # shows it in the row); the wait goes on until the lag reads 0
        return any(r[0] == "clicks" and r[4] == "0" for r in rows(found[0], "tables"))

    until(done)
    return found[0]


def test_the_tables_page_lists_each_table_with_its_lag(site: Console) -> None:
    html = caught_up(site)
    listed = rows(html, "tables")
    assert [r[0] for r in listed] == ["clicks", "slow"]  # plain has no table
    clicks, slow = listed
    assert clicks[:3] == ["clicks", "key_value", "gregor.clicks"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s ago\)", clicks[3]), clicks
    # nothing of slow's is committed: every record it holds is lag
    assert slow[1] == "key_value" and slow[4] == str(SLOW)
    assert slow[3] == "no commit yet"
    assert '<a href="/tables" class="active">Tables</a>' in html
    assert "Catalog: sql" in html


def test_a_tables_page_has_its_offsets_snapshot_and_a_snippet_that_loads_it(
    site: Console,
) -> None:
    caught_up(site)
    html = ok(site.visitor().get("/tables/clicks"))
    assert element(html, "identifier") == "gregor.clicks"
    assert rows(html, "partitions") == [
        ["0", str(CLICKS[0]), str(CLICKS[0]), "0"],
        ["1", str(CLICKS[1]), str(CLICKS[1]), "0"],
    ]
    assert element(html, "lag") == "Lag: 0 records"
    assert re.fullmatch(
        r"Current snapshot: \d+, committed .* UTC \(\d+ s ago\)", element(html, "snapshot")
    )
    # the snippet, run as shown, loads the very table: every record is in it
    scope: dict[str, Any] = {}
    exec(element(html, "load"), scope)  # noqa: S102 - the page's own code, the point of the test
    got = scope["table"].scan().to_arrow()
    assert sorted(zip(got["partition"].to_pylist(), got["value"].to_pylist(), strict=True)) == [
        (p, f"v{p}-{i}".encode()) for p, n in CLICKS.items() for i in range(n)
    ]


def test_a_table_not_yet_committed_shows_its_whole_lag(site: Console) -> None:
    html = ok(site.visitor().get("/tables/slow"))
    assert rows(html, "partitions") == [["0", "-", str(SLOW), str(SLOW)]]
    assert element(html, "snapshot") == "Current snapshot: none yet"


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/tables/plain", 404, "topic plain is not written as a table (iceberg.mode is disabled)"),
        ("/tables/nope", 404, "topic nope does not exist"),
        ("/tables/%3Cscript%3E", 404, "topic <script> does not exist"),
    ],
)
def test_a_topic_without_a_table_is_a_404_page(
    site: Console, path: str, status: int, message: str
) -> None:
    answer = site.visitor().get(path)
    assert answer.status == status
    assert element(answer.text, "tables-error") == message
    assert "<script>" not in answer.text
