#!/usr/bin/env bash
# Sets up the virtualenv and runs the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-deps.sh
bash scripts/setup.sh
exec .venv/bin/python -m pytest -n 2 "$@"
