"""Every ``gregor`` command fails in one line when the broker is not there (issue 42).

The walk covers the whole click command tree: a command added without an entry in ``ARGS``
fails ``test_the_walk_covers_every_command``. Each command runs with arguments that take it
to the broker, against a port nothing listens on, and must print exactly one line,
``Error: ...``, exit 1, and no traceback. ``--debug`` (anywhere on the line) and
``GREGOR_DEBUG=1`` keep the traceback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gregor.cli.main import main


def leaf_commands(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[str]:
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):  # the top group imports its commands on lookup
            sub = cmd.get_command(ctx, name)
            assert sub is not None, name
            yield from leaf_commands(sub, (*path, name))
    else:
        yield " ".join(path)


@pytest.fixture(scope="module")
def closed_port() -> str:
    """An address where nothing listens (bound and closed: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cli-files")
    (d / "plan.json").write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1]}]})
    )
    return d


def args_for(closed: str, files: Path) -> dict[str, list[str]]:
    """Arguments that take each command to the broker (``-b`` is added unless listed)."""
    return {
        "acls add": ["--allow-principal", "User:a", "--operation", "Read", "--topic", "t"],
        "acls list": [],
        "acls remove": ["--topic", "t", "--force"],
        "clients alter": ["--name", "n", "--metrics", "org.apache.kafka."],
        "clients delete": ["--name", "n"],
        "clients describe": [],
        "clients list": [],
        "clients metrics": ["--metrics-url", f"http://{closed}/metrics"],
        "configs alter": [
            "--entity-type",
            "topics",
            "--entity-name",
            "t",
            "--add-config",
            "retention.ms=1",
        ],
        "configs describe": ["--entity-type", "topics", "--entity-name", "t"],
        "console": ["--listen", "127.0.0.1:0"],
        "consume": ["t", "--timeout-ms", "100"],
        "dump-log": ["--files", str(files / "no-such-segment.log")],
        "features describe": [],
        "features disable": ["--feature", "group.version"],
        "features downgrade": ["--feature", "group.version=0"],
        "features upgrade": ["--feature", "group.version=1"],
        "groups delete": ["g"],
        "groups describe": ["g"],
        "groups list": [],
        "groups reset-offsets": ["g", "t", "--to-earliest", "--execute"],
        "leader-election": ["--election-type", "preferred", "--all-topic-partitions"],
        "log-dirs describe": [],
        "offsets": ["t"],
        "perf consume": ["t", "--messages", "1"],
        "perf produce": ["t", "--num-records", "1", "--record-size", "1", "--throughput", "-1"],
        "pipeline run": [
            "--output-dir",
            str(files / "pipeline"),
            "--events",
            "10",
            "--value-format",
            "json",  # the Avro default would need the (closed) cluster's registry
            "--bootstrap-servers",
            closed,
        ],
        "produce": ["t"],
        "quotas alter": ["--client-id", "c", "--add-config", "producer_byte_rate=1"],
        "quotas describe": [],
        "reassign": ["--reassignment-json-file", str(files / "plan.json"), "--verify"],
        "schema-registry": ["--listener", "http://127.0.0.1:0"],
        "schemas compatibility": ["s", "-", "--registry", f"http://{closed}"],
        "schemas config": ["--registry", f"http://{closed}"],
        "schemas delete": ["s", "--registry", f"http://{closed}"],
        "schemas describe": ["s", "--registry", f"http://{closed}"],
        "schemas list": ["--registry", f"http://{closed}"],
        "schemas mode": ["--registry", f"http://{closed}"],
        "schemas register": ["s", "-", "--registry", f"http://{closed}"],
        "serve": [],  # run as a process of its own below
        "share-groups delete-offsets": ["g", "--topic", "t"],
        "storage format": [
            "-t",
            "notauuid",
            "-o",
            f"log.dirs={files / 'storage'}",
        ],  # no broker: a bad id
        "storage random-uuid": [],  # cannot fail: only prints an id
        "share-groups describe": ["g"],
        "share-groups list": [],
        "share-groups offsets": ["g"],
        "share-groups reset-offsets": ["g", "--topic", "t", "--to-earliest", "--execute"],
        "tables compact": ["t"],
        "tables describe": ["t"],
        "tables list": [],
        "tables snapshots": ["t"],
        "tokens create": [],
        "tokens describe": [],
        "tokens expire": ["--hmac", "AAAA"],
        "tokens renew": ["--hmac", "AAAA"],
        "topics alter": ["t", "-p", "3"],
        "topics create": ["t"],
        "topics delete": ["t"],
        "topics describe": ["t"],
        "topics list": [],
        "transactions abort": ["--topic", "t", "--partition", "0", "--start-offset", "0"],
        "transactions describe": ["--transactional-id", "x"],
        "transactions describe-producers": ["--topic", "t", "--partition", "0"],
        "transactions list": [],
        "users alter": ["alice", "--add-config", "SCRAM-SHA-256=[password=x]"],
        "users describe": [],
    }


NO_BROKER_FLAG = {
    "dump-log",
    "schemas compatibility",
    "schemas config",
    "schemas delete",
    "schemas describe",
    "schemas list",
    "schemas mode",
    "schemas register",
    "clients metrics",
    "pipeline run",
    "serve",
    "storage format",
    "storage random-uuid",
}
NEVER_FAILS = {"serve", "storage random-uuid"}  # serve is run as a process of its own below


def test_the_walk_covers_every_command(closed_port: str, files: Path) -> None:
    assert set(leaf_commands(main)) == set(args_for(closed_port, files))


def test_every_command_fails_in_one_line_when_the_broker_is_unreachable(
    closed_port: str, files: Path
) -> None:
    failures = []
    for name, args in sorted(args_for(closed_port, files).items()):
        if name in NEVER_FAILS:
            continue
        argv = [*name.split(), *args, *([] if name in NO_BROKER_FLAG else ["-b", closed_port])]
        r = CliRunner().invoke(main, argv, input="x\n")
        lines = r.stderr.splitlines()
        exc = r.exception if not isinstance(r.exception, SystemExit) else None
        if (
            exc is not None
            or r.exit_code != 1
            or len(lines) != 1
            or not lines[0].startswith("Error: ")
        ):
            failures.append(
                f"{name}: exit {r.exit_code}, exception {exc!r}, stderr {r.stderr[-500:]!r}"
            )
        elif (
            name not in ("dump-log", "storage format") and closed_port.split(":")[1] not in lines[0]
        ):
            failures.append(f"{name}: the line does not name the address: {lines[0]!r}")
    assert not failures, "\n".join(failures)


def _gregor(
    *args: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gregor", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def test_commands_as_processes_print_one_line(closed_port: str) -> None:
    # what a shell sees: the console, produce and a topics command, each its own process
    for argv in (["topics", "list"], ["produce", "t"], ["console", "--listen", "127.0.0.1:0"]):
        r = _gregor(*argv, "-b", closed_port, stdin="x\n")
        assert r.returncode == 1, r.stderr
        assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith("Error: "), (
            r.stderr
        )
        assert "Traceback" not in r.stderr and "cannot connect to " + closed_port in r.stderr


def test_serve_that_cannot_listen_fails_in_one_line(tmp_path: Path) -> None:
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): an address no host has
    r = _gregor(
        "serve", "-o", "listeners=PLAINTEXT://192.0.2.1:9092", "-o", f"log.dirs={tmp_path / 'logs'}"
    )
    errors = [
        ln for ln in r.stderr.splitlines() if not ln.startswith("ts=")
    ]  # the broker's own log lines
    assert r.returncode == 1
    assert errors == [
        "Error: cannot listen on 192.0.2.1:9092: cannot assign requested address; this host has no "
        "such address (listeners must name one of its own addresses, or 0.0.0.0 for all)"
    ]


@pytest.mark.parametrize("where", ["first", "last", "env"])
def test_debug_keeps_the_traceback(closed_port: str, where: str) -> None:
    argv = ["topics", "list", "-b", closed_port]
    env = None
    if where == "first":
        argv = ["--debug", *argv]
    elif where == "last":
        argv = [*argv, "--debug"]
    else:
        env = {"GREGOR_DEBUG": "1"}
    r = _gregor(*argv, env=env)
    assert r.returncode == 1
    assert r.stderr.startswith("Traceback (most recent call last):")
    assert (
        r.stderr.rstrip()
        .splitlines()[-1]
        .endswith(
            f"NoBrokersAvailableError: cannot connect to {closed_port}: "
            "[Errno 111] Connection refused"
        )
    )


def test_a_command_typed_wrong_is_one_line_with_a_pointer_to_help() -> None:
    r = CliRunner().invoke(main, ["topics", "create"], prog_name="gregor")
    assert r.exit_code == 2
    assert (
        r.stderr
        == "Error: name a topic: TOPIC or --topic TOPIC (see 'gregor topics create --help')\n"
    )
    r = CliRunner().invoke(main, ["consume", "t", "--offset", "soon"], prog_name="gregor")
    assert r.exit_code == 2
    assert r.stderr == (
        "Error: Invalid value for --offset: 'soon': give beginning (earliest), end (latest) or an "
        "offset >= 0 (see 'gregor consume --help')\n"
    )


def test_a_port_that_is_not_a_kafka_listener_is_named_as_such() -> None:
    # a server that greets with its own protocol (as SSH does): the first four bytes read as a
    # frame size no Kafka answer has
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "gregor", "topics", "list", "-b", f"127.0.0.1:{port}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert err == (
        f"Error: 127.0.0.1:{port} did not complete Kafka's handshake (ApiVersions: bad response: frame "
        "size 1397966893 is outside 0..104857600): is it a Kafka listener, with the right "
        "security.protocol?\n"
    )


def test_a_silent_port_fails_within_the_connection_setup_timeout() -> None:
    # a listener that accepts and never answers: the handshake is part of the connection's
    # setup, so socket.connection.setup.timeout.ms ends it (not request.timeout.ms)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        r = _gregor(
            "topics",
            "list",
            "-b",
            f"127.0.0.1:{port}",
            "-X",
            "socket.connection.setup.timeout.ms=300",
            "-X",
            "request.timeout.ms=3600000",
        )
    assert r.returncode == 1
    assert r.stderr == (
        f"Error: 127.0.0.1:{port} did not complete Kafka's handshake (ApiVersions: no answer within "
        "300 ms): is it a Kafka listener, with the right security.protocol?\n"
    )
