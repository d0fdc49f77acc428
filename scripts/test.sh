#!/usr/bin/env bash
# Sets up the virtualenv and runs the test suite. Extra arguments go to pytest.
#
#   bash scripts/test.sh          the whole suite (CI and the README run this)
#   bash scripts/test.sh --fast   all but the interop, spark and slow tests: under a minute
#
# The fast run needs no JVM or kcat, so it skips the Debian packages step.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fast" ]; then
  shift
  bash scripts/setup.sh
  exec .venv/bin/python -m pytest -n 2 -m "not interop and not spark and not slow" "$@"
fi
bash scripts/system-deps.sh
bash scripts/setup.sh
exec .venv/bin/python -m pytest -n 2 "$@"
