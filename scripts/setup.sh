#!/usr/bin/env bash
# Creates .venv (once) and installs Gregor with its pinned dependencies into it.
# Safe to run again: it only installs what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.gregor-installed
# Reinstall when the dependencies or the compiled accelerator's sources changed (pip install -e
# compiles the accelerators' .pyx files, which cimport src/gregor/_tuples.pxd, in place; Cython
# is a build requirement).
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
  || [ -n "$(find src \( -name '*.pyx' -o -name '*.pxd' -o -name '*.h' \) -newer "$stamp")" ]; then
  .venv/bin/pip install --quiet --disable-pip-version-check -e '.[dev,spark,cluster,console,schema-registry,tables]'
  touch "$stamp"
fi
# Byte-compile once: the generated codec is large, and with PYTHONDONTWRITEBYTECODE set
# every process would otherwise recompile it at import.
.venv/bin/python -m compileall -q src >/dev/null
