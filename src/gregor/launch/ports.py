"""Listening ports for child processes (brokers, etcd) that restart on the port they first had.

A port the kernel picks for ``bind(("127.0.0.1", 0))`` comes from its ephemeral range, the range
every outgoing connection takes its local port from. A broker or etcd restarted on such a port
can find it taken by a client's connection opened while it was down, and fail with "address
already in use". :func:`free_port` picks a port below the ephemeral range instead, where no
outgoing connection lands, at random (so parallel test workers rarely meet) and only when
nothing is bound to it now. Two workers may still pick the same port before either binds it:
whoever starts a process there retries with another port when the bind fails
(``BrokerProcess.start``).
"""

from __future__ import annotations

import random
import socket

_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
_DEFAULT_EPHEMERAL_LOW = 32768  # Linux's default range is 32768-60999
_random = random.SystemRandom()


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        with open(_RANGE_FILE) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_LOW


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing is bound to now, below the ephemeral range when
    that leaves room (else one the kernel picks)."""
    high = ephemeral_low()
    low = max(1024, high // 2)
    for _ in range(64 if high - low >= 1024 else 0):
        port = _random.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


__all__ = ["ephemeral_low", "free_port"]
