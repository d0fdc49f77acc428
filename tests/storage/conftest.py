from __future__ import annotations

import os

import pytest
from storage_helpers import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def log_dir(tmp_path) -> str:  # noqa: ANN001
    path = os.path.join(tmp_path, "orders-0")
    return path
