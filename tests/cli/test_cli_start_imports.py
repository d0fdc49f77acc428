"""What a ``gregor`` process imports before it does its one job (issue 36).

Every broker process of the suite is ``python -m gregor serve`` and many tests run ``gregor``
as a command, so what they import at start is paid thousands of times a run. The command tree
imports a command's module when that command is looked up (``gregor.cli.main.COMMANDS``), the
client package imports its parts on first use, and a broker imports the table translators
(pyarrow, pyiceberg) only once a topic has a table. Each check runs in a fresh interpreter,
since the test process has imported everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.process

#: Heavy parts none of the start paths below needs.
HEAVY = (
    "pyarrow",
    "numpy",
    "pyiceberg",
    "aiohttp",
    "gregor.console",
    "gregor.client.admin",
    "gregor.client.producer",
    "gregor.client.consumer",
)


def imported_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_the_command_line_imports_no_command_before_one_is_run() -> None:
    modules = imported_after("import gregor.cli.main")
    assert heavy_in(modules) == []
    assert sorted(m for m in modules if m.startswith("gregor.cli.")) == [
        "gregor.cli.errors",
        "gregor.cli.main",
    ]


def test_a_broker_process_imports_no_client_role_and_no_table_writer() -> None:
    # what `gregor serve` imports before the broker starts (a broker with no table topic)
    modules = imported_after("import gregor.cli.main, gregor.broker.main")
    assert heavy_in(modules) == []


def test_a_command_is_imported_when_it_is_looked_up() -> None:
    modules = imported_after(
        "import click\n"
        "from gregor.cli.main import main\n"
        "assert main.get_command(click.Context(main), 'topics').name == 'topics'"
    )
    assert "gregor.cli.topics" in modules
    assert "gregor.cli.console" not in modules
