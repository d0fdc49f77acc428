"""Run a ``gregor`` command in-process against a broker, as tests of the commands do.

``run_command(bootstrap_servers, "topics", "list")`` invokes the command with
``-b bootstrap_servers`` appended (the client options belong to the leaf command) and returns
(exit code, stdout, stderr). An exception other than the command's own exit is raised, so a
bug in a command shows its traceback instead of an exit code.
"""

from __future__ import annotations

from click.testing import CliRunner


def run_command(bootstrap_servers: str, *args: str, input: str | None = None) -> tuple[int, str, str]:  # noqa: A002
    from gregor.cli.main import main

    result = CliRunner().invoke(main, [*args, "-b", bootstrap_servers], input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr
