"""``ChildProcess``: the life cycle every server child process shares (broker, etcd).

A subclass starts its process in ``start()`` (setting ``self.proc``) and waits there for its own
readiness condition; this base gives it the rest: ``stop()`` (SIGTERM, resuming a paused process
first so it can act on it, SIGKILL if it does not end within ``timeout``), ``kill()`` (SIGKILL),
``pause()`` / ``resume()`` (SIGSTOP / SIGCONT), ``restart()``, ``close()`` (stop, then remove a
temporary data directory the subclass made) and use as a context manager. :func:`stop_all`
stops several at once: one SIGTERM each, then one deadline for all, so a launcher of N
children waits at most one timeout, and reaps each child as soon as it ends (none stays a
zombie while another is waited for). It imports nothing of
the broker, so applications (the pipelines) and the test harness (``gregor.testing``) share it.
"""

from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Self

__all__ = ["ChildProcess", "stop_all"]


class ChildProcess:
    proc: subprocess.Popen[bytes] | None = None
    _tmp: tempfile.TemporaryDirectory[str] | None = None

    def start(self) -> Self:
        raise NotImplementedError

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """Graceful stop with SIGTERM; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.resume()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, the next start runs recovery."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        """SIGSTOP: the process stops answering (connections stay open) until ``resume()``."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def restart(self, hard: bool = False) -> Self:
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def stop_all(children: Iterable[ChildProcess], timeout: float = 30.0) -> None:
    """Stop every running child gracefully and at once: SIGTERM to each (a paused one resumed
    first), then wait for all of them with one deadline, reaping whichever ends first; SIGKILL
    those still running at the deadline."""
    running = [c for c in children if c.proc is not None and c.proc.poll() is None]
    for c in running:
        c.resume()
        assert c.proc is not None
        c.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    waiting = {c.proc for c in running if c.proc is not None}
    while waiting and time.monotonic() < deadline:
        waiting = {p for p in waiting if p.poll() is None}  # poll() reaps an ended child
        if waiting:
            time.sleep(0.05)
    for proc in waiting:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
