"""The console served beside a broker (``console.listener`` / ``gregor serve --console``), and
its refusal to start where it could not reach the broker."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient

from gregor.testing import BrokerProcess
from gregor.testing.process import BrokerStartError

pytestmark = pytest.mark.interop


def test_the_console_beside_a_broker() -> None:
    with BrokerProcess(config={"console.listener": "http://127.0.0.1:0"}) as b:
        m = None
        while m is None:  # the console starts right after the broker's started line
            m = re.search(r"event=console\.started url=(\S+)", b.read_log())
            assert b.proc is not None and b.proc.poll() is None, b.read_log()[-2000:]
            time.sleep(0.05)
        with urllib.request.urlopen(m.group(1), timeout=30) as resp:
            html = resp.read().decode()
        cluster_id = (
            AdminClient({"bootstrap.servers": b.bootstrap_servers})
            .list_topics(timeout=30)
            .cluster_id
        )
        assert f"<b id='cluster-id'>{cluster_id}</b>" in html


def test_a_console_that_cannot_reach_the_broker_stops_it() -> None:
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="a" password="b" user_a="b";'
    )
    with pytest.raises(BrokerStartError, match="console.listener needs a PLAINTEXT listener"):
        with BrokerProcess(
            config={
                "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                "console.listener": "http://127.0.0.1:0",
            }
        ):
            pass
    with pytest.raises(BrokerStartError, match="console.listener"):
        with BrokerProcess(config={"console.listener": "somewhere"}):
            pass


def test_gregor_console_reports_its_url_as_json() -> None:
    import json
    import subprocess
    import sys

    with BrokerProcess(config={}) as b:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gregor",
                "console",
                "-b",
                b.bootstrap_servers,
                "--listen",
                "127.0.0.1:0",
                "--output",
                "json",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            url = json.loads(proc.stdout.readline())["url"]
            with urllib.request.urlopen(url + "topics", timeout=30) as resp:
                assert resp.status == 200 and "<table id='topics'>" in resp.read().decode()
        finally:
            proc.terminate()
            proc.wait(30)


def test_the_console_beside_a_broker_has_the_guards_of_gregor_console() -> None:
    from console_http import Console

    with BrokerProcess(config={"console.listener": "http://127.0.0.1:0"}) as b:
        m = None
        while m is None:
            m = re.search(r"event=console\.started url=(\S+)", b.read_log())
            time.sleep(0.05)
        assert "event=console.no_login" in b.read_log()
        v = Console(m.group(1)).visitor()
        form = {"name": "forged", "partitions": "1", "replication_factor": "-1", "configs": ""}
        assert v.post("/topics", form, origin="http://evil.example").status == 403
        assert v.post("/topics", form).status == 401  # no session yet, so no token
        token = v.token("/topics")
        assert v.post("/topics", form, origin="http://evil.example").status == 403
        assert v.post("/topics", form).status == 403  # a session, but the form's token is missing
        assert v.get("/topics", host=f"evil.example:{v.console.port}").status == 403
        answer = v.post("/topics", {**form, "csrf_token": token})
        assert answer.status == 303
        assert (
            "forged"
            in AdminClient({"bootstrap.servers": b.bootstrap_servers})
            .list_topics(timeout=30)
            .topics
        )


def test_the_console_beside_a_broker_serves_on_loopback_only() -> None:
    with pytest.raises(
        BrokerStartError,
        match="console.listener=http://0.0.0.0:0: the console beside the broker has no login",
    ):
        with BrokerProcess(config={"console.listener": "http://0.0.0.0:0"}):
            pass
