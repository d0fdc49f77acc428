#!/usr/bin/env bash
# The main job: the reference pipeline end to end at volume, on embedded defaults. Installs
# what it needs (.venv with Gregor and PySpark, via setup.sh), starts a Gregor broker, creates
# the topics, produces 1,000,000 page views while the Spark streaming job (local mode) reads
# them, prints a progress line per micro-batch (events/s, lag, watermark, windows), checks
# the windowed result exactly against the generator's ground truth, prints a summary and
# stops everything. Extra arguments go to `python -m gregor.pipelines` (see --help), e.g.
#   bash scripts/run.sh --events 100000
#   bash scripts/run.sh --bootstrap-servers kafka:9092 --master spark://host:7077
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[run] Spark needs Java: installing openjdk-17-jre-headless"
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  else
    echo "[run] Spark needs Java 17 or later on the PATH (e.g. apt-get install openjdk-17-jre-headless)" >&2
    exit 1
  fi
fi
echo "[run] setting up .venv (first run downloads the pinned packages)"
bash scripts/setup.sh
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$PWD/.venv/bin/python}"
# The job's output (Parquet windows, Spark checkpoint, the broker's data). The job only ever
# removes what it wrote there itself; a directory of other files is refused, never emptied.
out="${GREGOR_PIPELINE_DIR:-${TMPDIR:-/tmp}/gregor-main-job}"
exec .venv/bin/python -m gregor.pipelines --output-dir "$out" "$@"
