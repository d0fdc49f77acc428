"""The metrics endpoint (issue 35, section 4): scrapes do not stall request handling, its
connections are capped, and it serves TLS and basic auth from a Prometheus exporter web
config file."""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from certs import Pki
from prometheus_client.parser import text_string_to_metric_families

import gregor.broker.metrics.broker_collector as metrics_module
from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.protocol.connection import ClientConnection
from gregor.protocol.messages.metadata import MetadataRequest
from gregor.testing import InProcessBroker

pytestmark = pytest.mark.interop


def _metadata(bootstrap: str) -> Any:
    """A Metadata request on a new connection, and its answer."""
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as s:
        conn = ClientConnection(client_id="probe")
        _, data = conn.send_request(
            MetadataRequest(topics=None, allow_auto_topic_creation=False), 4
        )
        s.sendall(data)
        while True:
            chunk = s.recv(65536)
            assert chunk, "closed"
            done = conn.receive_data(chunk)
            if done:
                return done[0].response


def _endpoint(b: InProcessBroker) -> Any:
    assert b.broker is not None
    return next(s for s in b.broker.servers if hasattr(s, "cache"))


def _url(b: InProcessBroker, scheme: str = "http") -> str:
    assert b.broker is not None
    return f"{scheme}://127.0.0.1:{b.broker.metrics_port}/metrics"


def _families(text: str) -> set[str]:
    return {f.name for f in text_string_to_metric_families(text)}


def test_a_slow_render_does_not_stall_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exposition is rendered off the event loop: while a render is held up, the broker
    still answers Metadata, and the render ran on another thread than the loop's."""
    real = metrics_module.generate_latest
    entered, release = threading.Event(), threading.Event()
    threads: list[int] = []

    def held_render(registry: Any) -> bytes:
        threads.append(threading.get_ident())
        entered.set()
        release.wait()
        return real(registry)

    monkeypatch.setattr(metrics_module, "generate_latest", held_render)
    with InProcessBroker({"metrics.listener": "http://127.0.0.1:0"}) as b:
        got: list[bytes] = []
        scraper = threading.Thread(
            target=lambda: got.append(urllib.request.urlopen(_url(b), timeout=60).read())
        )
        scraper.start()
        try:
            entered.wait()
            answer = _metadata(b.bootstrap_servers)  # while the render is held
            assert answer.brokers[0].node_id == 1
        finally:
            release.set()
            scraper.join()
        assert b._thread is not None and threads == [threads[0]] and threads[0] != b._thread.ident
        assert "kafka_server_replicamanager_partitioncount" in _families(got[0].decode())


def test_concurrent_scrapes_share_one_render_and_the_cache_serves_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = metrics_module.generate_latest
    entered, release = threading.Event(), threading.Event()

    def held_render(registry: Any) -> bytes:
        entered.set()
        release.wait()
        return real(registry)

    monkeypatch.setattr(metrics_module, "generate_latest", held_render)
    with InProcessBroker(
        {"metrics.listener": "http://127.0.0.1:0", "metrics.cache.ms": "3600000"}
    ) as b:
        endpoint = _endpoint(b)
        got: list[bytes] = []
        scrapers = [
            threading.Thread(
                target=lambda: got.append(urllib.request.urlopen(_url(b), timeout=60).read())
            )
            for _ in range(4)
        ]
        scrapers[0].start()
        entered.wait()
        for t in scrapers[1:]:
            t.start()

        async def waiting() -> int:
            return endpoint.open

        while b.call(waiting) < 4:  # all four are in, one render under way
            time.sleep(0.01)
        release.set()
        for t in scrapers:
            t.join()
        assert len(got) == 4 and len(set(got)) == 1
        assert urllib.request.urlopen(_url(b), timeout=60).read() == got[0]  # from the cache
        assert endpoint.cache.renders == 1


def _all(sock: socket.socket) -> bytes:
    """Everything the endpoint sends until it ends the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_connections_over_the_cap_are_answered_503() -> None:
    with InProcessBroker(
        {"metrics.listener": "http://127.0.0.1:0", "metrics.max.connections": "2"}
    ) as b:
        port = b.broker.metrics_port  # type: ignore[union-attr]
        # Two connections that send nothing hold both slots (taken in the order they came).
        idle = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(2)]
        with socket.create_connection(("127.0.0.1", port), timeout=60) as third:
            third.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = _all(third)
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), answer[:200]
        assert b"Limit of concurrent requests reached (2), try again later." in answer
        endpoint = _endpoint(b)

        async def open_now() -> int:
            return endpoint.open

        assert b.call(open_now) == 2
        idle[0].close()
        while b.call(open_now) > 1:
            time.sleep(0.01)
        assert urllib.request.urlopen(_url(b), timeout=60).status == 200
        idle[1].close()


def _web_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return path


def _https(
    port: int, ctx: ssl.SSLContext, auth: tuple[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=60)
    headers = {}
    if auth is not None:
        headers["Authorization"] = (
            "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        )
    try:
        conn.request("GET", "/metrics", headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_tls_and_basic_auth_from_a_web_config_file(tmp_path: Path, pki: Pki) -> None:
    hashed = bcrypt.hashpw(b"scrape-pw", bcrypt.gensalt(rounds=4)).decode()
    other = bcrypt.hashpw(b"other-pw", bcrypt.gensalt(rounds=4)).decode().replace("$2b$", "$2y$", 1)
    web = _web_config(
        tmp_path,
        (
            "tls_server_config:\n"
            f"  cert_file: {pki.server.cert}\n"
            f"  key_file: {pki.server.key}\n"
            "http_server_config:\n"
            "  headers:\n"
            "    X-Content-Type-Options: nosniff\n"
            "basic_auth_users:\n"
            f"  prometheus: '{hashed}'\n"
            f"  grafana: '{other}'\n"
        ),
    )
    config = {"metrics.listener": "http://127.0.0.1:0", "metrics.web.config.file": str(web)}
    with InProcessBroker(config) as b:
        port = b.broker.metrics_port  # type: ignore[union-attr]
        ctx = ssl.create_default_context(cafile=str(pki.ca.ca_path))
        status, headers, _ = _https(port, ctx)
        assert (status, headers["www-authenticate"]) == (401, "Basic")
        assert _https(port, ctx, ("prometheus", "wrong"))[0] == 401
        assert _https(port, ctx, ("nobody", "scrape-pw"))[0] == 401
        status, headers, body = _https(port, ctx, ("prometheus", "scrape-pw"))
        assert status == 200 and headers["x-content-type-options"] == "nosniff"
        assert "kafka_server_replicamanager_partitioncount" in _families(body.decode())
        assert _https(port, ctx, ("grafana", "other-pw"))[0] == 200  # an htpasswd $2y$ hash
        # Plain HTTP is not served on the TLS port.
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            plain = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            plain.request("GET", "/metrics")
            plain.getresponse().read()
        assert (
            "event=broker.started" in b.read_log()
            and f"metrics=https://127.0.0.1:{port}/metrics" in b.read_log()
        )
        assert "scrape-pw" not in b.read_log()


def test_client_certificates_when_the_web_config_requires_them(tmp_path: Path, pki: Pki) -> None:
    web = _web_config(
        tmp_path,
        (
            "tls_server_config:\n"
            f"  cert_file: {pki.server.cert}\n"
            f"  key_file: {pki.server.key}\n"
            "  client_auth_type: RequireAndVerifyClientCert\n"
            f"  client_ca_file: {pki.ca.ca_path}\n"
            "  min_version: TLS13\n"
        ),
    )
    with InProcessBroker(
        {"metrics.listener": "http://127.0.0.1:0", "metrics.web.config.file": str(web)}
    ) as b:
        port = b.broker.metrics_port  # type: ignore[union-attr]
        anonymous = ssl.create_default_context(cafile=str(pki.ca.ca_path))
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
            _https(port, anonymous)
        alice = ssl.create_default_context(cafile=str(pki.ca.ca_path))
        alice.load_cert_chain(str(pki.alice.cert), str(pki.alice.key))
        assert _https(port, alice)[0] == 200


@pytest.mark.parametrize(
    "text, says",
    [
        ("tls_server_config:\n  cert_file: a.crt\n", "needs cert_file and key_file"),
        (
            "tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
            "cipher_suites is not supported",
        ),
        (
            "basic_auth_users:\n  bob: plain-text-password\n",
            "basic_auth_users.bob is not a bcrypt hash",
        ),
        ("basic_auth: {}\n", "web config.basic_auth is not a setting"),
        (
            "tls_server_config:\n  client_auth_type: RequireAnyClientCert\n  cert_file: a\n  key_file: b\n",
            "RequireAnyClientCert is not supported",
        ),
        ("http_server_config:\n  headers:\n    Authorization: x\n", "cannot set Authorization"),
        ("[not, a, mapping]\n", "must be a mapping"),
    ],
)
def test_a_web_config_the_broker_cannot_honour_stops_it(
    tmp_path: Path, text: str, says: str
) -> None:
    web = _web_config(tmp_path, text)
    with pytest.raises(ConfigError, match=says):
        BrokerConfig(
            {"metrics.listener": "http://127.0.0.1:0", "metrics.web.config.file": str(web)}
        )
    with pytest.raises(ConfigError, match="metrics.listener is not"):
        BrokerConfig({"metrics.web.config.file": str(web)})
