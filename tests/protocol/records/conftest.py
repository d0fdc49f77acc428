"""Every record test here runs against each record walk that is built: the compiled one
(``_scan``) and the pure-Python reference (``_scan_py``). ``test_records_scan`` checks that the
compiled one is built unless ``GREGOR_NO_EXTENSIONS`` is set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gregor.protocol.records import scan


@pytest.fixture(params=scan.available(), autouse=True)
def record_walk(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = scan.set_implementation(request.param)
    try:
        yield request.param
    finally:
        scan.set_implementation(previous)
