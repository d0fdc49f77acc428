"""The command layer's one error handler: every failure of a ``gregor`` command is one line.

Theory of operation. :class:`GregorGroup` is the top-level ``click`` group. Its ``main`` runs
the command tree with click's standalone mode off, so every exception comes back here, and
turns it into one line on stderr and an exit status:

- argument errors (click's usage errors, a bad ``-X`` setting): ``Error: ...`` with a pointer
  to ``--help``, exit 2 (click's and the shells' convention for a command typed wrong);
- everything else (the broker unreachable, a timeout, an error code the broker answered, a
  file that cannot be read, and any other exception): ``Error: ...``, exit 1.

``--debug`` anywhere on the command line (or ``GREGOR_DEBUG=1`` in the environment) lets the
exception through instead, with its traceback. :func:`one_line` is how an exception reads in
that line; commands that print a partial result first (a plan, some deleted topics) raise
after printing it, and the same handler says why they stopped.
"""

from __future__ import annotations

import errno
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

import click

DEBUG_ENV = "GREGOR_DEBUG"
DEBUG_FLAG = "--debug"
USAGE_EXIT = 2


def debug_requested(args: Sequence[str]) -> bool:
    if os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no"):
        return True
    return DEBUG_FLAG in _options_part(args)


def _options_part(args: Sequence[str]) -> list[str]:
    """``args`` up to a ``--`` (after it everything is an argument)."""
    args = list(args)
    return args[: args.index("--")] if "--" in args else args


def without_debug_flag(args: Sequence[str]) -> list[str]:
    head = _options_part(args)
    return [a for a in head if a != DEBUG_FLAG] + list(args)[len(head) :]


def _flat(text: str) -> str:
    return " ".join(str(text).split())


def one_line(exc: BaseException) -> str:
    """What went wrong, in one line, for someone who typed a command (not for a developer)."""
    from gregor.protocol.errors import KafkaError

    if isinstance(exc, click.ClickException):
        return _flat(exc.format_message())
    if isinstance(exc, KafkaError):
        text = _flat(str(exc))
        name = getattr(exc, "name", "")
        if name and name not in text and type(exc).__module__.startswith("gregor.protocol"):
            # a broker's error code: its Kafka name says more than the description alone
            return f"{name}: {text}" if text else name
        return text or name or type(exc).__name__
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve a host name: {exc.strerror}"
    if isinstance(exc, ConnectionError | TimeoutError):
        return _flat(str(exc)) or type(exc).__name__
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{exc.strerror or _flat(str(exc))}"
    # a message of many lines (Spark's carry the JVM's stack) is told by its first
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if type(exc).__module__.split(".")[0] in ("pyspark", "py4j"):
        return what  # Spark's own error (the main job's query failed)
    # anything else is a bug of ours: say what it was and how to see where
    return f"{what} (an unexpected error: run again with --debug for the traceback)"


class GregorGroup(click.Group):
    """The ``gregor`` group: its ``main`` is the one error handler (module docstring)."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        debug = debug_requested(argv)
        argv = without_debug_flag(argv)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            try:
                code = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            except click.exceptions.Exit as e:  # pragma: no cover - click returns it itself
                code = e.exit_code
        except click.UsageError as e:
            hint = f" (see '{e.ctx.command_path} --help')" if e.ctx is not None else ""
            click.echo(f"Error: {one_line(e)}{hint}", err=True)
            sys.exit(USAGE_EXIT)
        except click.ClickException as e:
            click.echo(f"Error: {one_line(e)}", err=True)
            sys.exit(e.exit_code)
        except (click.Abort, KeyboardInterrupt):
            click.echo("Aborted!", err=True)
            sys.exit(1)
        except OSError as e:
            if e.errno == errno.EPIPE:  # the reader went away (| head): stop quietly, as click does
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - stdout's close at exit must not fail
                sys.exit(1)
            if debug:
                raise
            click.echo(f"Error: {one_line(e)}", err=True)
            sys.exit(1)
        except Exception as e:
            if debug:
                raise
            click.echo(f"Error: {one_line(e)}", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)
