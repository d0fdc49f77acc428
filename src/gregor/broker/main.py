"""Run a broker process: serve until SIGTERM/SIGINT, then stop cleanly.

Services beside the broker (the web console of ``console.listener``) are companions the command
layer passes in (``gregor.cli``): each starts once the broker listens and returns its stop, so
the broker imports none of them.

A broker that cannot start (a port in use, an address the host does not have, a log directory
it cannot create, write or lock, one that belongs to another broker) raises
:class:`BrokerStartupError`, whose message is one line for the person who started it.

With ``GREGOR_PROFILE=path`` set, the whole run is profiled with cProfile and the stats are
written to ``path`` at a clean stop (for ``bench/broker.py``).
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import signal
import socket
from collections.abc import Awaitable, Callable, Sequence

from gregor.broker.broker import Broker
from gregor.broker.config.broker_config import BrokerConfig
from gregor.storage.log_dirs import LogDirectoryError
from gregor.tables.settings import TablesUnavailableError

PROFILE_ENV = "GREGOR_PROFILE"

#: A service run beside the broker: started with the broker once it listens, it returns the
#: coroutine function that stops it (called before the broker stops).
Companion = Callable[[Broker], Awaitable[Callable[[], Awaitable[None]]]]

_BIND_HINTS = {
    errno.EADDRINUSE: "another process is listening there",
    errno.EADDRNOTAVAIL: "this host has no such address (listeners must name one of its own addresses, "
    "or 0.0.0.0 for all)",
    errno.EACCES: "ports below 1024 need privileges",
}


class BrokerStartupError(Exception):
    """The broker could not start; the message is one line that says why."""


def startup_error(exc: BaseException, config: BrokerConfig) -> BrokerStartupError | None:
    """The one-line start-up error for ``exc``, or None when it is not one we can explain."""
    if isinstance(exc, (LogDirectoryError, TablesUnavailableError)):
        return BrokerStartupError(str(exc))
    if (
        type(exc).__name__ == "EtcdUnavailableError"
    ):  # gregor.cluster.etcd_store's (the cluster extra)
        return BrokerStartupError(str(exc))
    if isinstance(exc, socket.gaierror):
        return BrokerStartupError(
            f"cannot resolve a listener's host ({exc.strerror}): {_listeners(config)}"
        )
    if isinstance(exc, OSError):
        text = (exc.strerror or str(exc)).strip()
        hint = _BIND_HINTS.get(exc.errno or 0)
        # asyncio's bind error names the address: "error while attempting to bind on address
        # ('127.0.0.1', 9092): address already in use"
        bind = _BIND_ERROR.search(text)
        if bind is not None:
            host, port, reason = bind.groups()
            where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            return BrokerStartupError(
                f"cannot listen on {where}: {reason}" + (f"; {hint}" if hint else "")
            )
        where = f"{exc.filename}: " if exc.filename else ""
        return BrokerStartupError(f"cannot start: {where}{text}")
    return None


_BIND_ERROR = re.compile(r"bind on address \('([^']*)', (\d+)(?:, \d+, \d+)?\): (.*)$")


def _listeners(config: BrokerConfig) -> str:
    return "listeners=" + ",".join(str(x) for x in config.listeners)


async def serve(config: BrokerConfig, companions: Sequence[Companion] = ()) -> int:
    broker = Broker(config)
    stops: list[Callable[[], Awaitable[None]]] = []
    try:
        await broker.start()
        for companion in companions:
            stops.append(await companion(broker))
    except Exception as e:
        error = startup_error(e, config)
        if error is None:
            raise
        raise error from e
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for stop_companion in reversed(stops):
        await stop_companion()
    await broker.stop()
    return 0


def run(config: BrokerConfig, companions: Sequence[Companion] = ()) -> int:
    """Serve until SIGTERM/SIGINT, with ``companions`` beside the broker."""
    profile_path = os.environ.get(PROFILE_ENV)
    if not profile_path:
        return _run_loop(config, companions)
    profile_path = profile_path.replace("%p", str(os.getpid()))  # one file per broker
    import cProfile

    prof = cProfile.Profile()
    try:
        return prof.runcall(_run_loop, config, companions)
    finally:
        prof.dump_stats(profile_path)


def _run_loop(config: BrokerConfig, companions: Sequence[Companion]) -> int:
    import uvloop

    return uvloop.run(serve(config, companions))
