"""A fork server: start ``python -m <module> ...`` children as forks of a process that has
imported their modules already.

    server = ForkServer(preload=("gregor.cli.main", "gregor.broker.main"))
    proc = server.spawn(["-m", "gregor", "serve", ...], env, cwd, log_path)   # a Popen
    proc.poll(); proc.send_signal(signal.SIGTERM); proc.wait(30)

A broker process spends about half a CPU-second starting an interpreter and importing the
broker before it does anything. The test run starts about 400 of them, so it starts them from
this template instead (``gregor.launch.process.use_fork_server``); an application that starts
one broker has nothing to gain and starts it with ``subprocess`` as before.

Theory of operation. :class:`ForkServer` starts the template (``python -c`` calling
:func:`main`) on first use, with one end of a socket pair. The template imports
the ``preload`` modules by name, freezes what it has so far out of the collector's sight (its
children then share those pages rather than copy them when they collect), and waits. A request
is one JSON line: the child's arguments after the interpreter's name, its environment, its
working directory and the file its output goes to. The template forks; the child takes that
output as its stdout and stderr (``/dev/null`` as stdin), closes every other descriptor, takes
the environment and directory, seeds ``random`` afresh (a fork copies the template's state),
and runs the module as ``python -m`` would, ending with the exit code the interpreter would
give (``SystemExit``'s, or 1 after an uncaught exception's traceback) after running
``atexit``'s functions. The template answers with the child's pid and the read end of a pipe
(passed over the socket), reaps each child when ``SIGCHLD`` wakes it, and writes the exit code
(a negative signal number for a child a signal ended, as ``subprocess`` reports it) into that
child's pipe. On the client's side the child is a :class:`ForkedChild`: a ``subprocess.Popen``
whose ``poll``, ``wait`` and ``send_signal`` read that pipe, so the code that holds it cannot
tell the difference, and it signals the pid only while no exit code has arrived (as ``Popen``
does, so a reused pid is never signalled). When the socket closes (the client ended, however),
the template kills its remaining children and exits.

What differs from a fresh interpreter: the child shares the template's hash seed, its
``sys.path`` and anything a preloaded module computed at import, so a child whose environment
differs from the template's where start-up reads it is refused
(``ForkServer.differs_at_start``; the caller starts a new interpreter instead); its process
group is the template's, which is the client's (the template is started in it); and ``ps``
shows the template's command line for it.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import random
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence

__all__ = ["ForkServer", "ForkedChild", "request_fork"]

_CODE = struct.Struct("!i")
#: The template's command (``-c``: run as ``-m``, this module would be imported twice).
_TEMPLATE = "import sys; from gregor.launch.forkserver import main; main(sys.argv[1:])"


class ForkedChild(subprocess.Popen[bytes]):
    """A ``Popen`` of a fork server's child: its exit code comes through the status pipe."""

    def __init__(self, args: Sequence[str], pid: int, status_fd: int) -> None:
        # Popen's own __init__ starts a process; this one is started already. The attributes
        # Popen's other methods (repr, context manager, __del__) read are set here.
        self.args = list(args)
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = self.stdout = self.stderr = None
        self._child_created = False  # Popen.__del__: nothing of ours to reap
        self._status_fd = status_fd
        self._status_lock = threading.Lock()

    def _read_status(self, timeout: float | None) -> int | None:
        # As Popen: a poll while another thread waits answers "running" rather than block.
        if timeout == 0:
            locked = self._status_lock.acquire(blocking=False)
        else:
            locked = self._status_lock.acquire(timeout=-1 if timeout is None else timeout)
        if not locked:
            return self.returncode
        try:
            if self.returncode is None and select.select([self._status_fd], [], [], timeout)[0]:
                data = b""
                while len(data) < _CODE.size:
                    chunk = os.read(self._status_fd, _CODE.size - len(data))
                    if not chunk:  # the template was killed before it could tell: taken as killed
                        break
                    data += chunk
                os.close(self._status_fd)
                self.returncode = _CODE.unpack(data)[0] if len(data) == _CODE.size else -9
            return self.returncode
        finally:
            self._status_lock.release()

    def poll(self) -> int | None:
        return self._read_status(0)

    def wait(self, timeout: float | None = None) -> int:
        code = self._read_status(timeout)
        if code is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return code

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass  # it ended between the poll and the kill; the pipe will say so

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __del__(self) -> None:
        if self.returncode is None:
            try:
                os.close(self._status_fd)
            except OSError:
                pass


#: Environment variables read when an interpreter starts or a module is imported (the
#: interpreter's own, the dynamic loader's, the locale, the time zone): a child whose
#: environment differs from the template's in one of these cannot be a fork of it.
START_TIME_PREFIXES = ("PYTHON", "LD_", "LC_", "LANG", "TZ")


class ForkServer:
    """The client's side: starts the template on first :meth:`spawn`, one request at a time.

    The template's environment is this process's when the server is made; ``start_time_env``
    names variables of the ``preload`` modules that they read at import, beside those of
    :data:`START_TIME_PREFIXES`."""

    def __init__(self, preload: Sequence[str] = (), start_time_env: Sequence[str] = ()) -> None:
        self.preload = tuple(preload)
        self.env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.start_time_env = tuple(start_time_env)
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._template: subprocess.Popen[bytes] | None = None

    def _connect(self) -> socket.socket:
        if self._sock is not None and self._template is not None:
            if self._template.poll() is None:
                return self._sock
            self._sock.close()  # the template died: start another
        ours, theirs = socket.socketpair()
        self._template = subprocess.Popen(
            [sys.executable, "-c", _TEMPLATE, str(theirs.fileno()), *self.preload],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            env=self.env,
        )
        theirs.close()
        self._sock = ours
        return ours

    def differs_at_start(self, env: Mapping[str, str]) -> list[str]:
        """The variables read at start or import whose value in ``env`` is not the
        template's: a child with any of them must start as a fresh interpreter."""
        keys = set(env) | set(self.env)
        return sorted(
            k
            for k in keys
            if (k.startswith(START_TIME_PREFIXES) or k in self.start_time_env)
            and k != "PYTHONUNBUFFERED"
            and env.get(k) != self.env.get(k)
        )

    def spawn(
        self, args: Sequence[str], env: Mapping[str, str], cwd: str, output: str
    ) -> ForkedChild:
        """Start ``python <args>`` (``args`` begins with ``-m module``) as a fork of the
        template, its stdout and stderr appended to the file ``output``."""
        if len(args) < 2 or args[0] != "-m":
            raise ValueError("a fork server runs modules: args must begin with -m <module>")
        differ = self.differs_at_start(env)
        if differ:
            raise ValueError(f"not a fork of this template: {', '.join(differ)} differ")
        request = {"args": list(args), "env": dict(env), "cwd": cwd, "output": output}
        with self._lock:
            sock = self._connect()
            sock.sendall(json.dumps(request).encode() + b"\n")
            message, fds, _, _ = socket.recv_fds(sock, 64, 1)
            if not message or len(fds) != 1:
                raise OSError("the fork server did not answer")
            pid = int(message)
        return ForkedChild([sys.executable, *args], pid, fds[0])

    def close(self) -> None:
        """Close the socket: the template kills what is left of its children and exits."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._template is not None:
                self._template.wait()
                self._template = None


def request_fork(
    args: Sequence[str], env: Mapping[str, str], cwd: str, output: str, server: ForkServer
) -> ForkedChild:
    """``server.spawn(...)``: the one place a fork is asked for (the test run's process guard
    refuses it as it refuses ``subprocess``)."""
    return server.spawn(args, env, cwd, output)


# --- the template's side ---------------------------------------------------------------------


def _child(request: dict[str, object]) -> None:
    """In the forked child: become ``python <args>`` and never return."""
    code = 1
    try:  # everything but 0-2 is closed below: the socket, the other children's pipes
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        out = os.open(str(request["output"]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(str(request["cwd"]))
        random.seed()
        args = request["args"]
        assert isinstance(args, list)
        module = str(args[1])
        sys.argv = [module, *map(str, args[2:])]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            if e.code is None:
                code = 0
            elif isinstance(e.code, int):
                code = e.code
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    except BaseException:  # setting up failed (its output, its directory): say why, exit 1
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 (exiting: nothing left to tell)
                pass
        os._exit(code)


def _serve(sock: socket.socket) -> None:
    children: dict[int, int] = {}  # pid -> write end of its status pipe
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    reader = sock.makefile("rb")

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = children.pop(pid, None)
            if fd is not None:
                os.write(fd, _CODE.pack(os.waitstatus_to_exitcode(status)))
                os.close(fd)

    while True:
        try:
            ready, _, _ = select.select([sock.fileno(), wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 4096)
        reap()
        if sock.fileno() not in ready:
            continue
        line = reader.readline()
        if not line:  # the client is gone: so are its children
            for pid in list(children):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            while children:
                reap()
                time.sleep(0.01)
            return
        request = json.loads(line)
        status_r, status_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _child(request)
        children[pid] = status_w
        socket.send_fds(sock, [str(pid).encode()], [status_r])
        os.close(status_r)


def main(argv: Sequence[str]) -> None:
    """The template (:data:`_TEMPLATE`), with arguments ``FD MODULE...``."""
    sock = socket.socket(fileno=int(argv[0]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is for the children; EOF ends us
    for name in argv[1:]:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()
    _serve(sock)
