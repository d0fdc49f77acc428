"""Fixtures for the security tests: a test PKI (made once per session) and brokers with
TLS and SASL listeners."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from certs import Authority, Pki  # noqa: E402


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d: Path = tmp_path_factory.mktemp("pki")
    ca = Authority(d / "ca")
    other = Authority(d / "other", "Untrusted CA")
    return Pki(
        ca=ca,
        server=ca.server(),
        alice=ca.client("alice", CN="alice", OU="eng", O="Gregor"),
        stranger=other.client("mallory", CN="mallory", O="Elsewhere"),
        other_ca=other,
    )
