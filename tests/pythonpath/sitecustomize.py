"""Imported at start-up by every Python process the test run starts (``tests/conftest.py`` puts
this folder on ``PYTHONPATH``).

Spark starts its Python data source's planning processes (``python -m pyspark.daemon`` with
the planner's worker module) and a stream's source process with Spark's zip of pyspark's
sources first on the path, and its setting ``spark.python.daemon.module`` (which
``gregor.spark.local_session`` points at :mod:`gregor.spark_daemon` for task workers) does not
reach them. Python compiles every module it imports from that zip again: about 0.8 CPU-seconds
a daemon and 0.3 more a worker it forks, some 200 processes a run. Here, as
:mod:`gregor.spark_daemon` does for task workers, the installed pyspark (the same files, with
their bytecode) is taken instead. A process without the zip on its path, or without Gregor,
is left as it is. Being first on the path, this module hides any other ``sitecustomize`` from
the run's processes (this machine's interpreter has none).
"""

import sys

if any(entry.endswith("pyspark.zip") for entry in sys.path):
    try:
        from gregor.spark_daemon import installed_only
    except ImportError:
        pass
    else:
        sys.path[:] = installed_only(sys.path)
