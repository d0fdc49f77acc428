"""The client's event loop thread: one daemon thread per process runs the asyncio loop that the
synchronous clients (:mod:`gregor.client.sync`) and the bulk readers
(:mod:`gregor.client.consumer.bulk`) share.

Theory of operation. :meth:`LoopThread.get` starts the thread (uvloop when installed) the first
time any synchronous client needs it, and again if it died. Calls from other threads hop onto
it with ``run_coroutine_threadsafe`` and wait for the result (``run``); a call from the loop
thread itself would wait on itself, so it is refused.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import TypeVar

T = TypeVar("T")


class LoopThread:
    _instance: LoopThread | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        try:
            import uvloop

            self.loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover
            self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="gregor-client-loop", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> LoopThread:
        with cls._lock:
            if cls._instance is None or not cls._instance.thread.is_alive():
                cls._instance = LoopThread()
            return cls._instance

    def run(self, coro: Coroutine[object, object, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self.thread:
            raise RuntimeError(
                "a synchronous gregor client cannot be called from its own loop thread"
            )
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise

    def call(self, fn: Callable[[], T]) -> T:
        async def wrapper() -> T:
            return fn()

        return self.run(wrapper())


__all__ = ["LoopThread"]
