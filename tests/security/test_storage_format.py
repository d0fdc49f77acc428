"""``gregor storage format --add-scram`` (issue 35, section 4): the first SCRAM user exists
before the first start, so a broker whose only listener requires SCRAM lets its admin in."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from sasl_clients import authentication_error

from gregor.cli.storage import FormatterError, parse_add_scram
from gregor.security.scram import make_credential
from gregor.testing import BrokerProcess

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def _format(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gregor",
            "storage",
            "format",
            "-o",
            f"log.dirs={data_dir / 'logs'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _login(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.interop
def test_a_scram_only_broker_lets_its_formatted_admin_in(tmp_path: Path) -> None:
    done = _format(
        tmp_path,
        "-t",
        CLUSTER_ID,
        "--add-scram",
        "SCRAM-SHA-256=[name=admin,password=admin-secret]",
        "-S",
        'SCRAM-SHA-512=[name=admin,iterations=8192,password="admin,512"]',
    )
    assert done.returncode == 0, done.stderr
    assert "admin-secret" not in done.stdout + done.stderr
    path = tmp_path / "logs" / "cluster-metadata.json"
    assert path.stat().st_mode & 0o777 == 0o600 and "admin-secret" not in path.read_text()
    doc = json.loads(path.read_text())
    assert doc["cluster_id"] == CLUSTER_ID
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "num.partitions": 1,
    }
    with BrokerProcess(config=config, data_dir=tmp_path) as b:
        bootstrap = b.bootstrap("SASL_PLAINTEXT")
        admin_256 = _login(bootstrap, "SCRAM-SHA-256", "admin", "admin-secret")
        topic = f"formatted-{uuid.uuid4().hex[:6]}"
        p = Producer({**admin_256, "acks": "all"})
        for i in range(3):
            p.produce(topic, b"v%d" % i)
        assert p.flush(60) == 0
        del p
        c = Consumer(
            {
                **_login(bootstrap, "SCRAM-SHA-512", "admin", "admin,512"),
                "group.id": topic,
                "auto.offset.reset": "earliest",
            }
        )
        c.subscribe([topic])
        got: list[bytes | None] = []
        try:
            while len(got) < 3:
                m = c.poll(1.0)
                if m is not None:
                    assert m.error() is None, m.error()
                    got.append(m.value())
        finally:
            c.close()
        assert got == [b"v0", b"v1", b"v2"]
        # The admin creates the next user over the same SCRAM listener.
        admin = AdminClient(admin_256)
        assert admin.describe_cluster().result(timeout=30).cluster_id == CLUSTER_ID
        upsert = UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"
        )
        for f in admin.alter_user_scram_credentials([upsert]).values():
            assert f.result(timeout=30) is None
        bob = AdminClient(_login(bootstrap, "SCRAM-SHA-256", "bob", "bob-secret"))
        assert bob.describe_cluster().result(timeout=30).cluster_id == CLUSTER_ID
        # A wrong password is still refused.
        err = authentication_error({**admin_256, "sasl.password": "wrong"})
        assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in err.str()
        assert "admin-secret" not in b.read_log()


def test_a_formatted_directory_is_not_formatted_again(tmp_path: Path) -> None:
    assert _format(tmp_path, "-t", CLUSTER_ID).returncode == 0
    before = (tmp_path / "logs" / "cluster-metadata.json").read_text()
    again = _format(tmp_path, "-t", CLUSTER_ID, "-S", "SCRAM-SHA-256=[name=eve,password=x]")
    assert again.returncode == 1
    assert (
        f"Log directory {tmp_path / 'logs'} is already formatted. Use --ignore-formatted"
        in again.stderr
    )
    ignored = _format(tmp_path, "-t", CLUSTER_ID, "--ignore-formatted")
    assert ignored.returncode == 0 and "already formatted" in ignored.stdout
    assert (tmp_path / "logs" / "cluster-metadata.json").read_text() == before
    bad = _format(tmp_path / "other", "-t", "not-a-uuid")
    assert (
        bad.returncode == 1
        and "Cluster ID string not-a-uuid does not appear to be a valid UUID" in bad.stderr
    )
    assert not (tmp_path / "other" / "logs" / "cluster-metadata.json").exists()


@pytest.mark.parametrize(
    "argument, says",
    [
        ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument 'SCRAM-SHA-256'"),
        (
            "SCRAM-SHA-1=[name=a,password=b]",
            "The add-scram mechanism SCRAM-SHA-1 is not supported.",
        ),
        ("SCRAM-SHA-256=name=a,password=b]", "Expected configuration string to start with ["),
        ("SCRAM-SHA-256=[name=a,password=b", "Expected configuration string to end with ]"),
        ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
        (
            "SCRAM-SHA-256=[name=a]",
            "You must supply one of 'password' or 'saltedpassword' to add-scram",
        ),
        (
            "SCRAM-SHA-256=[name=a,saltedpassword=AAAA]",
            "You must supply 'salt' with 'saltedpassword' to add-scram",
        ),
        (
            "SCRAM-SHA-256=[name=a,password=b,iterations=100]",
            "The 'iterations' value must be >= 4096",
        ),
        (
            "SCRAM-SHA-256=[name=a,password=b,iterations=99999]",
            "The 'iterations' value must be <= 16384",
        ),
        ("SCRAM-SHA-256=[name=a,password=b,color=red]", "Unknown SCRAM configurations: color"),
        ("SCRAM-SHA-256=[name=a,password]", "No equals sign found in SCRAM component: password"),
    ],
)
def test_add_scram_arguments_are_checked_as_kafka_checks_them(argument: str, says: str) -> None:
    with pytest.raises(FormatterError) as e:
        parse_add_scram(argument)
    assert says in e.value.message


def test_a_salted_password_gives_the_credential_the_password_would() -> None:
    salt = b"0123456789abcdef"
    salted = hashlib.pbkdf2_hmac("sha512", b"pencil", salt, 8192)
    argument = (
        f"SCRAM-SHA-512=[name=carol,iterations=8192,salt={base64.b64encode(salt).decode()},"
        f"saltedpassword={base64.b64encode(salted).decode()}]"
    )
    assert parse_add_scram(argument) == (
        "carol",
        make_credential("SCRAM-SHA-512", "pencil", 8192, salt),
    )
