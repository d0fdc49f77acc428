"""Run a broker process: serve until SIGTERM/SIGINT, then stop cleanly.

With ``GREGOR_PROFILE=path`` set, the whole run is profiled with cProfile and the stats are
written to ``path`` at a clean stop (for ``bench/broker.py``).
"""

from __future__ import annotations

import asyncio
import os
import signal

from gregor.broker.broker import Broker
from gregor.broker.config import BrokerConfig

PROFILE_ENV = "GREGOR_PROFILE"


async def serve(config: BrokerConfig) -> int:
    broker = Broker(config)
    await broker.start()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await broker.stop()
    return 0


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
