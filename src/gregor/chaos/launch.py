"""``python -m gregor.chaos.launch [--bug NAME] serve ...``: start a broker, a bug patched in first.

The harness starts every broker of a chaos run through this module. Without ``--bug`` it is
``python -m gregor serve ...``. With ``--bug NAME`` it first imports
``gregor.chaos.bugs.NAME`` and calls its ``inject()``, which monkeypatches one broker function
with a deliberately wrong one (see ``bugs``); the broker's own code has no switch for it.
"""

from __future__ import annotations

import importlib
import sys


def main(argv: list[str]) -> None:
    args = list(argv)
    if args[:1] == ["--bug"]:
        name = args[1]
        del args[:2]
        module = importlib.import_module(f"gregor.chaos.bugs.{name.replace('-', '_')}")
        module.inject()
        print(f"event=chaos.bug_injected bug={name}", flush=True)
    sys.argv = ["gregor", *args]
    from gregor.cli.main import main as gregor_main

    gregor_main()


if __name__ == "__main__":
    main(sys.argv[1:])
