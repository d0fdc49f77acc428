#!/usr/bin/env bash
# Start etcd and N (default 3) Gregor brokers on free ports of 127.0.0.1, print the bootstrap
# servers, and stop them all on Ctrl-C. Needs `bash scripts/setup.sh` and the etcd binary
# (`bash scripts/system-deps.sh` installs Debian's etcd-server).
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m gregor.testing.cluster "${1:-3}"
