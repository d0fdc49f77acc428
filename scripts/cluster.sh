#!/usr/bin/env bash
# Start etcd and N (default 3) Gregor brokers on free ports of 127.0.0.1, print the bootstrap
# servers and where each member's log and data are, and stop them all on Ctrl-C. Stopping
# deletes the logs and data unless --keep (a new directory, printed) or --data-dir DIR is given:
#   bash scripts/cluster.sh 3 --keep
# Needs `bash scripts/setup.sh` and the etcd binary (`bash scripts/system-deps.sh` installs
# Debian's etcd-server).
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m gregor.testing.cluster "$@"
