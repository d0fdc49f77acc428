"""Sessions and logins of the console in this process, on a clock the test moves: idle expiry
(the visitor's Kafka client closed with it), the per-address login throttle, the bound on
logins in progress (against a broker address that accepts and never answers) and on sessions.
The console, a real broker and an aiohttp client share the test's event loop."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from gregor.console.app import serve
from gregor.console.settings import resolve
from gregor.console.state import STATE
from gregor.testing import InProcessBroker

pytestmark = pytest.mark.timeout(300)

USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    + " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    + ";"
)
SASL_BROKER = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "num.partitions": 1,
    "offsets.topic.num.partitions": 1,
}
SASL_CLIENT = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
PASSWORD = "correct horse battery staple"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Browser:
    """An aiohttp client session that keeps cookies for 127.0.0.1 and sends the console's
    Origin on posts, as a browser on the console's pages does."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))

    async def get(self, path: str) -> tuple[int, str, Any]:
        async with self.http.get(self.base + path, allow_redirects=False) as r:
            return r.status, await r.text(), r.headers

    async def post(self, path: str, form: dict[str, str]) -> tuple[int, str, Any]:
        async with self.http.post(
            self.base + path, data=form, allow_redirects=False, headers={"Origin": self.base}
        ) as r:
            return r.status, await r.text(), r.headers

    async def login(self, username: str | None, password: str) -> tuple[int, str, Any]:
        status, text, _ = await self.get("/login")
        assert status == 200, text[:300]
        token = re.search(r"name='csrf_token' value='([^']+)'", text)
        assert token
        form = {"csrf_token": token.group(1), "password": password}
        if username is not None:
            form["username"] = username
        return await self.post("/login", form)

    async def close(self) -> None:
        await self.http.close()


def run(body: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(body())


def test_an_idle_session_ends_and_closes_the_visitors_kafka_client() -> None:
    async def body() -> None:
        async with InProcessBroker(config=SASL_BROKER) as broker:
            clock = Clock()
            settings, _ = resolve(
                {"bootstrap.servers": broker.bootstrap_servers, **SASL_CLIENT},
                "127.0.0.1",
                0,
                idle_timeout_s=600.0,
                session_lifetime_s=3600.0,
            )
            runner, port = await serve(settings, clock)
            browser = Browser(port)
            try:
                store = runner.app[STATE].store
                status, _, headers = await browser.login("alice", USERS["alice"])
                assert status == 303, _
                [session] = store.sessions()
                assert session.principal == "User:alice" and session.owns_client
                assert (await browser.get("/topics"))[0] == 200
                clock.now += 590
                assert (await browser.get("/api/throughput"))[0] == 200  # a poll is not a page view
                clock.now += 20
                status, _, headers = await browser.get("/topics")
                assert status == 303 and headers["Location"].startswith("/login")
                assert len(store) == 0
                assert session.admin.client._closed  # the visitor's client went with the session
                # a page view restarts the idle time; the lifetime ends a session all the same
                assert (await browser.login("alice", USERS["alice"]))[0] == 303
                for _ in range(7):
                    clock.now += 500
                    assert (await browser.get("/"))[0] == 200
                clock.now += 500  # 4000 s since the login
                assert (await browser.get("/"))[0] == 303
                assert len(store) == 0
            finally:
                await browser.close()
                await runner.cleanup()

    run(body)


def test_login_attempts_are_throttled_per_address() -> None:
    async def body() -> None:
        async with InProcessBroker() as broker:
            clock = Clock()
            settings, _ = resolve(
                {"bootstrap.servers": broker.bootstrap_servers},
                "127.0.0.1",
                0,
                auth="password",
                password=PASSWORD,
                login_attempts=3,
                login_window_s=60.0,
            )
            runner, port = await serve(settings, clock)
            browser = Browser(port)
            try:
                for _ in range(3):
                    assert (await browser.login(None, "guess"))[0] == 401
                status, text, headers = await browser.login(None, PASSWORD)  # right, but too many
                assert (
                    status == 429
                    and "Too many login attempts" in text
                    and headers["Retry-After"] == "20"
                )
                clock.now += 20  # one attempt back
                status, _, headers = await browser.login(None, PASSWORD)
                assert status == 303 and headers["Location"] == "/"
                assert (await browser.get("/topics"))[0] == 200
            finally:
                await browser.close()
                await runner.cleanup()

    run(body)


def test_logins_in_progress_are_bounded() -> None:
    """Two logins wait on a broker address that accepts and never answers: a third is
    answered at once, without opening a connection; when the address goes away the waiting
    ones get the unreachable page."""

    async def body() -> None:
        accepted: list[asyncio.StreamWriter] = []
        two = asyncio.Event()

        async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            accepted.append(writer)
            if len(accepted) == 2:
                two.set()
            await reader.read()  # until the peer goes away

        server = await asyncio.start_server(stall, "127.0.0.1", 0)
        stalled = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        settings, _ = resolve(
            {"bootstrap.servers": stalled, **SASL_CLIENT}, "127.0.0.1", 0, max_concurrent_logins=2
        )
        runner, port = await serve(settings, Clock())
        browsers = [Browser(port) for _ in range(3)]
        try:
            waiting = [asyncio.create_task(b.login("alice", USERS["alice"])) for b in browsers[:2]]
            await two.wait()
            status, text, headers = await browsers[2].login("alice", USERS["alice"])
            assert (
                status == 503
                and "Too many logins are in progress" in text
                and headers["Retry-After"] == "1"
            )
            assert len(accepted) == 2
            for w in accepted:
                w.close()
            for status, text, _ in await asyncio.gather(*waiting):
                assert status == 503 and "id='unreachable'" in text
            assert runner.app[STATE].throttle.in_progress == 0
        finally:
            for b in browsers:
                await b.close()
            await runner.cleanup()
            server.close()
            await server.wait_closed()

    run(body)


def test_sessions_with_their_own_client_are_bounded() -> None:
    async def body() -> None:
        async with InProcessBroker(config=SASL_BROKER) as broker:
            settings, _ = resolve(
                {"bootstrap.servers": broker.bootstrap_servers, **SASL_CLIENT},
                "127.0.0.1",
                0,
                max_sessions=1,
            )
            runner, port = await serve(settings, Clock())
            first, second = Browser(port), Browser(port)
            try:
                assert (await first.login("alice", USERS["alice"]))[0] == 303
                status, text, _ = await second.login("admin", USERS["admin"])
                assert status == 503 and "as many sessions as it may" in text
                assert len(runner.app[STATE].store) == 1
                assert (await first.get("/topics"))[0] == 200  # the first visitor keeps theirs
                status, _, _ = await first.post(
                    "/logout", {"csrf_token": runner.app[STATE].store.sessions()[0].csrf}
                )
                assert status == 303
                assert (await second.login("admin", USERS["admin"]))[0] == 303
            finally:
                await first.close()
                await second.close()
                await runner.cleanup()

    run(body)


def test_behind_a_tls_proxy_cookies_are_secure_and_origins_https() -> None:
    """``--tls-proxy``: browsers reach the console over HTTPS through a proxy, which talks plain
    HTTP to it; cookies carry Secure (and the __Host- prefix) and posts must come from https."""

    async def body() -> None:
        async with InProcessBroker() as broker:
            settings, warnings = resolve(
                {"bootstrap.servers": broker.bootstrap_servers},
                "10.0.0.1",
                0,
                auth="password",
                password=PASSWORD,
                tls_proxy=True,
                allowed_hosts=("console.example",),
            )
            assert warnings == []  # beyond loopback, but TLS is the proxy's
            settings = dataclasses.replace(settings, host="127.0.0.1")  # this test's listener
            runner, port = await serve(settings, Clock())
            try:
                async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
                    base = f"http://127.0.0.1:{port}"
                    host = {"Host": "console.example"}
                    async with http.get(base + "/login", headers=host) as r:
                        assert r.status == 200
                        login_cookie = r.headers["Set-Cookie"]
                        assert (
                            login_cookie.startswith("__Host-gregor_login=")
                            and "; Secure" in login_cookie
                        )
                        text = await r.text()
                    token = re.search(r"name='csrf_token' value='([^']+)'", text)
                    assert token
                    nonce = login_cookie.split(";")[0].split("=", 1)[1]
                    form = {"csrf_token": token.group(1), "password": PASSWORD}
                    cookie = {"Cookie": f"__Host-gregor_login={nonce}"}
                    for origin, status in (
                        ("http://console.example", 403),
                        ("https://console.example", 303),
                    ):
                        async with http.post(
                            base + "/login",
                            data=form,
                            allow_redirects=False,
                            headers={**host, **cookie, "Origin": origin},
                        ) as r:
                            assert r.status == status, (origin, r.status)
                    session_cookie = r.headers.getall("Set-Cookie")
                    assert any(
                        c.startswith("__Host-gregor_session=")
                        and "; Secure" in c
                        and "HttpOnly" in c
                        for c in session_cookie
                    )
            finally:
                await runner.cleanup()

    run(body)
