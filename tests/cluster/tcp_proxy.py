"""A TCP proxy on 127.0.0.1 that a test can cut and heal, to partition one process from others.

``TcpProxy(target)`` listens on its own port (``port``) and forwards every connection to
``target()`` (a callable, read at connect time, so the target may start later). ``cut()``
closes every forwarded connection and refuses new ones (accepted, then closed at once);
``heal()`` lets connections through again. The proxies run on one event loop in a daemon
thread (``ProxyLoop``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
import threading
from collections.abc import Callable


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ProxyLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the proxies' loop and wait until it has run."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            fn()
            done.set_result(None)

        self.loop.call_soon_threadsafe(run)
        done.result(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()


class TcpProxy:
    def __init__(self, loop: ProxyLoop, target: Callable[[], int]) -> None:
        self.loop = loop
        self.target = target
        self.port = free_port()
        self.cut_off = False
        self._writers: set[asyncio.StreamWriter] = set()
        asyncio.run_coroutine_threadsafe(self._serve(), loop.loop).result(10)

    async def _serve(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_off:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target())
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    if self.cut_off:
                        break
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.IncompleteReadError):
                pass
            finally:
                dst.close()
                self._writers.discard(dst)

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        def do() -> None:
            self.cut_off = True
            for w in list(self._writers):
                w.close()
            self._writers.clear()

        self.loop.call(do)

    def heal(self) -> None:
        def do() -> None:
            self.cut_off = False

        self.loop.call(do)
