"""``gregor schema-registry``: serves a cluster's registry on its listener, reports its URL,
and fails in one line when told something it cannot do."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

import pytest

from gregor.testing import InProcessBroker

pytestmark = pytest.mark.slow  # child processes, each importing Gregor


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gregor", "schema-registry", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_serves_and_reports_its_url(broker: InProcessBroker) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gregor",
            "schema-registry",
            "-b",
            broker.bootstrap_servers,
            "--listener",
            "http://127.0.0.1:0",
            "--topic",
            "_schemas_cli",
            "--output",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else ""
        url = json.loads(line)["url"]
        body = json.dumps({"schema": '"string"'}).encode()
        req = urllib.request.Request(
            f"{url}/subjects/cli-value/versions",
            data=body,
            method="POST",
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert json.loads(resp.read()) == {"id": 1, "version": 1}
        with urllib.request.urlopen(f"{url}/subjects", timeout=60) as resp:
            assert json.loads(resp.read()) == ["cli-value"]
    finally:
        proc.terminate()
        proc.wait(60)


def test_bad_listener_is_one_line() -> None:
    done = run("-b", "127.0.0.1:1", "--listener", "https://127.0.0.1:8081")
    assert done.returncode == 2
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert any("an https:// listener needs a certificate" in ln for ln in lines), done.stderr
    assert "Traceback" not in done.stderr
    done = run("-b", "127.0.0.1:1", "--listener", "nonsense")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_a_topic_with_two_partitions_is_one_line(broker: InProcessBroker) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("_schemas_cli_two", 2, 1, config={"cleanup.policy": "compact"})])[
        "_schemas_cli_two"
    ].result(30)
    done = run(
        "-b",
        broker.bootstrap_servers,
        "--topic",
        "_schemas_cli_two",
        "--listener",
        "http://127.0.0.1:0",
    )
    assert done.returncode == 1
    assert "Error: the topic _schemas_cli_two has 2 partitions" in done.stderr
    assert "Traceback" not in done.stderr


def test_beyond_loopback_needs_the_insecure_flag() -> None:
    done = run("-b", "127.0.0.1:1", "--listener", "http://0.0.0.0:0")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--auth is none" in done.stderr and "--insecure-no-auth" in done.stderr
    # with the flag it goes on (to the unreachable broker: one line, exit 1)
    done = run("-b", "127.0.0.1:1", "--listener", "http://0.0.0.0:0", "--insecure-no-auth")
    assert done.returncode == 1 and "cannot connect to 127.0.0.1:1" in done.stderr


def _serve(broker: InProcessBroker, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gregor", "schema-registry", "-b", broker.bootstrap_servers]
        + ["--listener", "http://127.0.0.1:0", "--output", "json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    return proc, json.loads(line)["url"]


def test_two_registries_elect_one_writer_and_forward(broker: InProcessBroker) -> None:
    import urllib.error

    shared = ("--topic", "_schemas_cli_pair", "--group-id", "cli-pair")
    writer, writer_url = _serve(broker, *shared)
    follower, follower_url = _serve(broker, *shared, "--no-leader-eligibility")
    try:
        body = json.dumps({"schema": '"string"'}).encode()
        req = urllib.request.Request(
            f"{follower_url}/subjects/pair-value/versions",
            data=body,
            method="POST",
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        )
        while True:  # 50004 while the follower's first election names no writer yet
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    assert json.loads(resp.read()) == {"id": 1, "version": 1}
                    break
            except urllib.error.HTTPError as e:
                assert json.loads(e.read())["error_code"] == 50004
        for url in (follower_url, writer_url):  # the follower reads its own write at once
            with urllib.request.urlopen(f"{url}/schemas/ids/1", timeout=60) as resp:
                assert json.loads(resp.read()) == {"schema": '"string"'}
    finally:
        for proc in (follower, writer):
            proc.terminate()
            proc.wait(60)


def test_bad_election_flags_are_one_line() -> None:
    done = run("-b", "127.0.0.1:1", "--advertised-url", "ftp://h:1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--advertised-url" in done.stderr and "is not http://HOST:PORT" in done.stderr
    done = run("-b", "127.0.0.1:1", "--group-id", " ")
    assert done.returncode == 2 and "a group id of 1 to 255 characters" in done.stderr
