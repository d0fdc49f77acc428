#!/usr/bin/env bash
# Sets up the virtualenv and runs the test suite. Extra arguments go to pytest.
#
#   bash scripts/test.sh          the whole suite (CI and the README run this)
#   bash scripts/test.sh --fast   all but the interop, spark, jvm, slow and process tests
#
# The fast run starts no child process: tests/conftest.py's process guard fails a test of it
# that tries (mark such a test `process`, or run its brokers in-process: InProcessBroker,
# InProcessCluster).
# The fast run needs no JVM or kcat, so it skips the Debian packages step and the JVM peers.
# The whole run fetches the JVM peers first (scripts/kafka.sh: Kafka's jars from Maven Central,
# cached outside the repository) and keeps the tests that use them on one xdist worker, so each
# JVM peer starts once per run (--dist loadgroup with the groups of tests/suite_order.py: the jvm
# modules on one worker, the Spark modules in three groups).
set -euo pipefail
cd "$(dirname "$0")/.."
# pytest rewrites the asserts of every test module (and of gregor itself: gregor.testing is a
# pytest plugin) at import, about 25 s of CPU per worker for this suite, and caches the result
# beside the sources, unless bytecode writing is off: with PYTHONDONTWRITEBYTECODE set (as on
# this machine) every worker of every run paid it again. The cache lives in __pycache__
# (ignored by git), so a second run collects in seconds.
unset PYTHONDONTWRITEBYTECODE
if [ "${1:-}" = "--fast" ]; then
  shift
  bash scripts/setup.sh
  # four workers on two cores: the fast run's tests wait on their in-process brokers about half
  # the time (two workers kept the cores 52 % busy: 2:19; four 1:41; six 1:46)
  exec .venv/bin/python -m pytest -n 4 -m "not interop and not spark and not jvm and not slow and not process" "$@"
fi
bash scripts/system-deps.sh
bash scripts/setup.sh
GREGOR_JVM_CLASSPATH_FILE=$(bash scripts/kafka.sh fetch)
GREGOR_SPARK_KAFKA_JARS=$(bash scripts/kafka.sh fetch-spark)
GREGOR_ICEBERG_REST_CLASSPATH=$(bash scripts/kafka.sh fetch-iceberg-rest)
export GREGOR_JVM_CLASSPATH_FILE GREGOR_SPARK_KAFKA_JARS GREGOR_ICEBERG_REST_CLASSPATH
# Each xdist worker collects the whole suite, and on a fresh checkout each would rewrite every
# module itself: three workers on two cores took ~100 s to collect, ~40 s with the cache filled.
# Two collecting processes, one per core with half of the test files each, fill it first (~25 s;
# a run with nothing to collect fell from 103 s to 79 s in all). No JVM archive is built for
# them, and what they find wrong the run itself reports.
mapfile -t test_files < <(find tests -name 'test_*.py' | sort)
prime() { GREGOR_TEST_JVM_ARCHIVE=off .venv/bin/python -m pytest -q --collect-only "$@" >/dev/null 2>&1 || true; }
prime "${test_files[@]:0:${#test_files[@]}/2}" &
prime "${test_files[@]:${#test_files[@]}/2}"
wait $!
# Six workers on two cores: the whole run's tests wait on brokers, JVMs and Spark about half
# of their time (two workers kept the cores about 50 % busy, three about 58 %). With broker
# processes forked from a template (tests/conftest.py), a module's brokers cost a worker little
# to start, and six workers kept the cores 94 % busy: pytest 10:36, four 11:34 (README).
exec .venv/bin/python -m pytest -n 6 --dist loadgroup "$@"
