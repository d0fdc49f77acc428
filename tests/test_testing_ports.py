"""The launchers' listening ports (``gregor.launch``): below the kernel's ephemeral range
(where no client's outgoing connection can take them while a broker restarts), and a broker
whose port another test took first moves to another one."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from gregor.launch import process as process_module
from gregor.launch.ports import ephemeral_low, free_port
from gregor.testing import BrokerProcess

pytestmark = pytest.mark.timeout(120)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def test_free_port_is_below_the_ephemeral_range_and_free() -> None:
    low = ephemeral_low()
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        assert low == int(f.read().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(1024 <= p < low for p in ports)
    assert len(ports) > 1  # random, so parallel workers rarely meet
    assert all(_bindable(p) for p in ports)


def test_a_broker_moves_off_a_port_taken_before_it_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        busy = taken.getsockname()[1]
        picks: list[int] = []

        def pick() -> Iterator[int]:
            yield busy  # what another test's broker took between the pick and the bind
            while True:
                yield free_port()

        ports = pick()

        def recorded() -> int:
            picks.append(next(ports))
            return picks[-1]

        monkeypatch.setattr(process_module, "free_port", recorded)
        with BrokerProcess() as b:
            assert picks[0] == busy and len(picks) == 2
            assert b.port == picks[1] != busy
            assert "address already in use" in b.read_log(since_start=False)
            socket.create_connection(("127.0.0.1", b.port)).close()
            b.restart()
            assert b.port == picks[1] and len(picks) == 2  # a restart keeps its port


def test_a_broker_that_fails_for_another_reason_is_not_retried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    picks: list[int] = []

    def recorded() -> int:
        picks.append(free_port())
        return picks[-1]

    monkeypatch.setattr(process_module, "free_port", recorded)
    b = BrokerProcess({"num.partitions": "0"})
    try:
        with pytest.raises(process_module.BrokerStartError, match="num.partitions"):
            b.start()
        assert len(picks) == 1 and b.port == 0
    finally:
        b.close()
