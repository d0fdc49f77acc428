"""The whole run's order (tests/conftest.py): the modules handed out first still exist, and
collection puts their tests before every other test."""

from __future__ import annotations

import pytest
from suite_order import LONG_FIRST, TESTS


def test_every_long_first_module_exists() -> None:
    missing = [m for m in LONG_FIRST if not (TESTS / m).is_file()]
    assert missing == []


def test_the_long_modules_are_collected_first(request: pytest.FixtureRequest) -> None:
    modules = [i.path.relative_to(TESTS).as_posix() for i in request.session.items]
    if not set(modules) & set(LONG_FIRST):
        pytest.skip("this run collected none of the long modules")
    first_other = next(n for n, m in enumerate(modules) if m not in LONG_FIRST)
    assert all(m not in LONG_FIRST for m in modules[first_other:])
    long_ones = modules[:first_other]
    assert long_ones == sorted(long_ones, key=LONG_FIRST.index)
