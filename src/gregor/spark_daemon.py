"""Spark's Python daemon, importing the installed pyspark instead of Spark's zip of its sources.

Spark starts its Python workers (a task's, and for a Python data source the driver's planning
workers) from a daemon: ``python -m pyspark.daemon <worker module>``, which forks one process per
worker, with ``$SPARK_HOME/python/lib/pyspark.zip`` and the py4j zip first on ``PYTHONPATH``.
When pyspark is pip-installed, ``SPARK_HOME`` is the installed package itself, and the zip holds
the same files without their bytecode: Python compiles every pyspark module it takes from the zip
again, in every daemon and in every worker it forks (a worker imports its worker module after the
fork), about 0.7 s of CPU a process.

Spark puts its core jar (no Python in it) on that path too, and every zip or jar on the path
costs again: ``importlib.metadata`` (which some packages ask for their own version at import)
reads the whole directory of each it passes, and a worker's ``importlib.invalidate_caches()``
(pyspark calls it before a task) reads every zip it has opened once more, 0.1-0.3 s a process.
This daemon takes off the path the zips and jars that are the installed distributions' own
(inside the pyspark package on the path; a py4j zip only when the installed py4j has its
version), then runs pyspark's daemon; every other entry stays where Spark put it.
``gregor.spark.local_session`` sets ``spark.python.daemon.module`` to this module unless the
configuration names one.

A top-level module on purpose: ``python -m`` imports the packages above a module first, and
importing ``gregor.spark`` starts pyarrow, which has no place in a process that forks.
"""

from __future__ import annotations

import os
import sys

MODULE = "gregor.spark_daemon"


def installed_only(path: list[str]) -> list[str]:
    """``path`` without the installed pyspark's own zips and jars."""
    dropped: set[str] = set()
    for entry in path:
        parent, name = os.path.split(entry)
        if os.path.basename(parent) == "jars" and name.endswith(".jar"):
            home = os.path.dirname(parent)  # Spark puts spark-core's jar on the path too
        elif parent.endswith(os.path.join("", "python", "lib")) and name.endswith(".zip"):
            home = os.path.dirname(os.path.dirname(parent))
        else:
            continue
        site = os.path.dirname(home)
        if not (
            os.path.basename(home) == "pyspark"
            and site in path
            and os.path.isfile(os.path.join(home, "__init__.py"))
        ):
            continue
        if name.startswith("py4j-") and name.endswith("-src.zip"):
            version = name[len("py4j-") : -len("-src.zip")]
            if not os.path.isdir(os.path.join(site, f"py4j-{version}.dist-info")):
                continue
        dropped.add(entry)
    return [e for e in path if e not in dropped]


def main() -> None:
    sys.path[:] = installed_only(sys.path)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
