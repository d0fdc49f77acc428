"""Run a broker process: serve until SIGTERM/SIGINT, then stop cleanly.

With ``GREGOR_PROFILE=path`` set, the whole run is profiled with cProfile and the stats are
written to ``path`` at a clean stop (for ``bench/broker.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

from gregor.broker.broker import Broker
from gregor.broker.config import BrokerConfig
from gregor.broker.events import log_event

PROFILE_ENV = "GREGOR_PROFILE"


async def serve(config: BrokerConfig) -> int:
    broker = Broker(config)
    await broker.start()
    console = None
    if config.console_address is not None:
        console = await _start_console(broker, *config.console_address)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    if console is not None:
        await console.cleanup()
    await broker.stop()
    return 0


async def _start_console(broker: Broker, host: str, port: int) -> Any:
    """The web console beside the broker, a client of its first PLAINTEXT listener, without a
    login: on a loopback address only (the config refuses others; ``gregor console`` is the
    console with logins and TLS)."""
    from gregor.console.app import serve as serve_console
    from gregor.console.settings import resolve

    name, bind_host, bound = next(
        (n, h, p) for n, h, p in broker.bound_listeners if broker.config.security_protocol(n) == "PLAINTEXT"
    )
    target = "127.0.0.1" if bind_host in ("", "0.0.0.0", "::") else bind_host
    settings, _ = resolve({"bootstrap.servers": f"{target}:{bound}"}, host, port, auth="none")
    runner, console_port = await serve_console(settings)
    log = logging.getLogger("gregor.broker")
    log_event(log, "console.started", url=f"http://{host}:{console_port}/", listener=name)
    log_event(log, "console.no_login", logging.WARNING, reason="console.listener serves without a login: everyone "
              "who can reach it on this machine acts as the listener's anonymous principal; use gregor console "
              "for logins")
    return runner


def run(config: BrokerConfig) -> int:
    """Serve until SIGTERM/SIGINT."""
    profile_path = os.environ.get(PROFILE_ENV)
    if not profile_path:
        return _run_loop(config)
    profile_path = profile_path.replace("%p", str(os.getpid()))  # one file per broker
    import cProfile

    prof = cProfile.Profile()
    try:
        return prof.runcall(_run_loop, config)
    finally:
        prof.dump_stats(profile_path)


def _run_loop(config: BrokerConfig) -> int:
    import uvloop

    return uvloop.run(serve(config))
