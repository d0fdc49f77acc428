"""Run a ``gregor`` command in-process against a broker, as tests of the commands do.

``run_command(bootstrap_servers, "topics", "list")`` invokes the command with
``-b bootstrap_servers`` appended (the client options belong to the leaf command; None for a
command that takes no broker) and returns
(exit code, stdout, stderr). An exception other than the command's own exit is raised, so a
bug in a command shows its traceback instead of an exit code.
"""

from __future__ import annotations

from click.testing import CliRunner


def run_command(
    bootstrap_servers: str | None, *args: str, input: str | None = None
) -> tuple[int, str, str]:  # noqa: A002
    from gregor.cli.main import main

    target = [] if bootstrap_servers is None else ["-b", bootstrap_servers]
    result = CliRunner().invoke(main, [*args, *target], input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr
