"""``InProcessBroker``: the real broker in this process (a background thread or the caller's
event loop), real sockets on a free port."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from gregor.launch.process import BrokerStartError, level_number

if TYPE_CHECKING:
    from gregor.broker.broker import Broker
    from gregor.broker.config.broker_config import BrokerConfig

T = TypeVar("T")


class _BrokerLog(logging.Handler):
    """Appends the broker's log lines (logfmt, as ``gregor serve`` writes them) to a file.

    Only records from the broker's own loggers (``gregor.broker``, ``gregor.storage``,
    ``gregor.coordinator``) are kept, and, when the broker runs on a thread of its own, only
    those emitted on that thread or its executor threads; a test's client logs stay out.
    """

    _NAMES = ("gregor.broker", "gregor.storage", "gregor.coordinator")

    def __init__(self, path: Path, threads: Callable[[logging.LogRecord], bool] | None) -> None:
        super().__init__()
        from gregor.broker.common.events import LogfmtFormatter

        self.setFormatter(LogfmtFormatter())
        self._path = path
        self._threads = threads

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith(self._NAMES):
            return
        if self._threads is not None and not self._threads(record):
            return
        try:
            line = self.format(record) + "\n"
            with open(self._path, "a", encoding="utf-8") as f:
                f.write(line)
        except Exception:  # noqa: BLE001 - logging must never break the broker
            self.handleError(record)


class _RootLevel:
    """Sets the root logger's level while any in-process broker runs (``gregor serve
    --log-level`` does the same in its own process), and puts the old level back after the
    last one stops."""

    _lock = threading.Lock()
    _users = 0
    _saved = logging.WARNING

    @classmethod
    def acquire(cls, level: str) -> None:
        with cls._lock:
            root = logging.getLogger()
            if cls._users == 0:
                cls._saved = root.level
            cls._users += 1
            root.setLevel(level.upper())

    @classmethod
    def release(cls) -> None:
        with cls._lock:
            cls._users -= 1
            if cls._users == 0:
                logging.getLogger().setLevel(cls._saved)


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a pinned dependency
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class InProcessBroker:
    """The real Gregor broker, built in this process: real sockets, no child process.

    Theory of operation. The broker is ``gregor.broker.broker.Broker`` on a ``BrokerConfig``
    with the same defaults as ``BrokerProcess`` (data in a temporary directory, no initial
    rebalance delay) but ``listeners=PLAINTEXT://127.0.0.1:0``: the OS picks the port; after
    start ``bootstrap_servers`` names it, read from ``Broker.bound_listeners``.

    Two ways to run it:

    - ``async with InProcessBroker() as broker:`` starts the broker on the running event
      loop, for tests that are themselves asyncio code (the gregor asyncio client, aiokafka,
      ``ClientConnection`` over asyncio streams). The test must yield to the loop for the
      broker to answer: blocking socket calls from that thread would deadlock.
    - ``with InProcessBroker() as broker:`` starts an event loop (uvloop when installed) on a
      background thread and runs the broker there, for tests that drive it with blocking
      clients (confluent-kafka, kafka-python, gregor's sync client, plain sockets).
      ``broker.call(coro_fn)`` runs a coroutine function on that loop and returns its result,
      which is how a test may look at broker state without racing the broker's thread.

    Log lines go to ``data_dir/broker.log`` in ``gregor serve``'s format; ``read_log()`` returns
    those written since the last start, as ``BrokerProcess.read_log`` does. While a broker
    runs, the root logger's level is ``log_level`` (as in the broker's own process).

    A graceful ``restart()`` keeps the data directory and the port. SIGKILL and other crash
    tests need ``BrokerProcess``: a broker in this process cannot be killed without it.
    """

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        data_dir: str | Path | None = None,
        log_level: str = "INFO",
    ) -> None:
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-test-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.port = 0
        level_number(log_level)
        self.log_level = log_level
        self.log_path = self.data_dir / "broker.log"
        self._log_offset = 0
        self.broker: Broker | None = None
        self._handler: _BrokerLog | None = None
        # Set only when the broker runs on its own thread (the synchronous form).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def listener_ports(self) -> dict[str, int]:
        """Bound port of every listener by name, as ``BrokerProcess.listener_ports``."""
        if self.broker is None:
            return {}
        return {name: port for name, _, port in self.broker.bound_listeners}

    def bootstrap(self, listener: str) -> str:
        """``host:port`` of the listener named ``listener`` (its bound port)."""
        return f"127.0.0.1:{self.listener_ports[listener]}"

    @property
    def running(self) -> bool:
        return self.broker is not None

    def read_log(self, since_start: bool = True) -> str:
        try:
            with open(self.log_path, "rb") as f:
                if since_start:
                    f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    # --- on the broker's event loop ---

    async def start_async(self) -> InProcessBroker:
        """Build and start the broker on the running event loop."""
        from gregor.broker.config.broker_config import BrokerConfig

        if self.broker is not None:
            raise BrokerStartError("broker already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.data_dir / "logs"),
            "group.initial.rebalance.delay.ms": "0",
        }
        props.update(self.config)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._handler = _BrokerLog(self.log_path, self._log_filter())
        logging.getLogger("gregor").addHandler(self._handler)
        _RootLevel.acquire(self.log_level)
        try:
            broker = self._new_broker(BrokerConfig(props))
            await broker.start()
        except BaseException:
            self._drop_log_handler()
            raise
        self.broker = broker
        self.port = broker.bound_listeners[0][2]
        return self

    def _new_broker(self, config: BrokerConfig) -> Broker:
        from gregor.broker.broker import Broker

        return Broker(config)

    def _log_filter(self) -> Callable[[logging.LogRecord], bool] | None:
        """Which of the broker loggers' records are this broker's (None: all of them)."""
        return self._own_thread if self._loop is not None else None

    async def stop_async(self) -> None:
        """Stop the broker gracefully (its logs closed clean, as on SIGTERM)."""
        broker, self.broker = self.broker, None
        if broker is None:
            return
        try:
            await broker.stop()
        finally:
            self._drop_log_handler()

    async def restart_async(self) -> InProcessBroker:
        await self.stop_async()
        return await self.start_async()

    def _drop_log_handler(self) -> None:
        if self._handler is not None:
            logging.getLogger("gregor").removeHandler(self._handler)
            self._handler = None
            _RootLevel.release()

    def _own_thread(self, record: logging.LogRecord) -> bool:
        """The record comes from this broker's loop thread or one of its executor threads."""
        loop_thread = self._thread.ident if self._thread else None
        return record.thread == loop_thread or (record.threadName or "").startswith(
            self._executor_prefix
        )

    @property
    def _executor_prefix(self) -> str:
        return f"gregor-broker-{id(self):x}"

    async def __aenter__(self) -> InProcessBroker:
        return await self.start_async()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop_async()
        self._cleanup()

    # --- on a background thread, for blocking clients ---

    def call(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``fn()`` on the broker's event loop thread and return its result."""
        if self._loop is None:
            raise RuntimeError("call() needs the synchronous form (with InProcessBroker() as b:)")
        return asyncio.run_coroutine_threadsafe(fn(), self._loop).result()

    def start(self) -> InProcessBroker:
        if self._loop is None:
            loop = _new_event_loop()
            self._executor = ThreadPoolExecutor(thread_name_prefix=self._executor_prefix)
            loop.set_default_executor(self._executor)
            self._thread = threading.Thread(
                target=self._run_loop, args=(loop,), name=self._executor_prefix, daemon=True
            )
            self._loop = loop
            self._thread.start()
        try:
            return self.call(self.start_async)
        except BaseException:
            self._stop_thread()
            raise

    def stop(self) -> None:
        if self._loop is None:
            return
        try:
            self.call(self.stop_async)
        finally:
            self._stop_thread()

    def restart(self) -> InProcessBroker:
        """Graceful stop, then a new broker on the same data directory and port."""
        self.stop()
        return self.start()

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            # Whatever the stopped broker left behind (a connection's task between frames).
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()

    def _stop_thread(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = self._executor = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()

    def close(self) -> None:
        self.stop()
        self._cleanup()

    def _cleanup(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> InProcessBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
