#!/usr/bin/env bash
# Apache Kafka as a test and benchmark peer (never part of Gregor's runtime).
#
#   bash scripts/kafka.sh fetch          fetch the pinned Kafka jars with Maven and build the Java
#                                        harness (tools/jvm); prints the class path file
#   bash scripts/kafka.sh fetch-spark    fetch Spark's Kafka connector (tools/jvm/spark-kafka);
#                                        prints its jars, comma-separated (spark.jars)
#   bash scripts/kafka.sh fetch-iceberg-rest
#                                        fetch Apache Iceberg's REST catalog test server
#                                        (tools/jvm/iceberg-rest); prints its class path
#   bash scripts/kafka.sh broker         a single KRaft broker (combined mode) on a free port
#   bash scripts/kafka.sh cluster [N]    an N-node KRaft cluster (default 3)
#   bash scripts/kafka.sh tool NAME ...  one of Kafka's tools by its script name, e.g.
#                                        kafka-topics --bootstrap-server HOST:PORT --list
#
# The jars come from Maven Central into Maven's local repository (~/.m2) and are copied into
# ${GREGOR_JVM_CACHE:-~/.cache/gregor-jvm}/lib-<hash of the pom>; the harness is compiled into
# harness-<hash of the pom and sources> beside it. A second run with the same tools/jvm only
# prints the path. broker and cluster keep their logs
# and data in a temporary directory, print the bootstrap servers and stop on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${GREGOR_JVM_CACHE:-$HOME/.cache/gregor-jvm}

fetch() {
  command -v mvn >/dev/null 2>&1 || { echo "[kafka] mvn not found: apt-get install maven" >&2; exit 1; }
  command -v javac >/dev/null 2>&1 || { echo "[kafka] javac not found: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
  local pom_hash src_hash lib out
  pom_hash=$(sha256sum tools/jvm/pom.xml | cut -c1-16)
  src_hash=$( (echo "$pom_hash"; find tools/jvm/src -type f | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-16)
  lib=$cache/lib-$pom_hash
  out=$cache/harness-$src_hash
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -f "$lib/.complete" ]; then
      # Kafka's jars: Maven resolves the pom's dependencies (into ~/.m2) and copies them here.
      local build
      build=$(mktemp -d "$cache/build.XXXXXX")
      echo "[kafka] fetching the JVM peers' jars (tools/jvm/pom.xml) from Maven Central into $lib" >&2
      if ! mvn -B -q -f tools/jvm/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
          -DoutputDirectory="$build/lib" >"$build/mvn.log" 2>&1; then
        cat "$build/mvn.log" >&2
        rm -rf "$build"
        exit 1
      fi
      rm -rf "$lib"
      mv "$build/lib" "$lib"
      rm -rf "$build"
      touch "$lib/.complete"
    fi
    if [ ! -f "$out/classpath" ]; then
      # The Java harness (tools/jvm/src), compiled against those jars.
      local build
      build=$(mktemp -d "$cache/build.XXXXXX")
      mkdir -p "$build/classes"
      if ! javac -nowarn -encoding UTF-8 --release 17 -cp "$lib/*" -d "$build/classes" \
          $(find tools/jvm/src/main/java -name '*.java') >"$build/javac.log" 2>&1; then
        cat "$build/javac.log" >&2
        rm -rf "$build"
        exit 1
      fi
      cp -r tools/jvm/src/main/resources/. "$build/classes/"
      (echo "$out/classes"; ls -1 "$lib"/*.jar) | paste -sd: >"$build/classpath"
      rm -rf "$out"
      mv "$build" "$out"
    fi
  ) 9>"$cache/.lock"
  echo "$out/classpath"
}

# The runtime jars of tools/jvm/NAME/pom.xml (and its extra mvn arguments), fetched once per
# version of the pom into the cache; prints their directory.
fetch_jars() {
  local name=$1 label=$2
  shift 2
  command -v mvn >/dev/null 2>&1 || { echo "[kafka] mvn not found: apt-get install maven" >&2; exit 1; }
  local hash dir
  hash=$(sha256sum "tools/jvm/$name/pom.xml" | cut -c1-16)
  dir=$cache/$name-$hash
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -f "$dir/.complete" ]; then
      local build
      build=$(mktemp -d "$cache/build.XXXXXX")
      echo "[kafka] fetching $label (tools/jvm/$name/pom.xml) into $dir" >&2
      if ! mvn -B -q -f "tools/jvm/$name/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
          "$@" -DoutputDirectory="$build/jars" >"$build/mvn.log" 2>&1; then
        cat "$build/mvn.log" >&2
        rm -rf "$build"
        exit 1
      fi
      rm -rf "$dir"
      mv "$build/jars" "$dir"
      rm -rf "$build"
      touch "$dir/.complete"
    fi
  ) 9>"$cache/.lock" || exit 1
  echo "$dir"
}

# Spark's own Kafka connector for tests/spark and bench/spark.py: the connector and the jars it
# needs that pyspark does not ship; prints them comma-separated (for spark.jars).
fetch_spark() {
  local dir
  dir=$(fetch_jars spark-kafka "Spark's Kafka connector" \
    -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2) || exit 1
  ls -1 "$dir"/*.jar | paste -sd,
}

# Apache Iceberg's REST catalog test server (org.apache.iceberg.rest.RESTCatalogServer) for
# tests/tables/test_tables_rest_catalog.py (gregor.testing.iceberg_rest); prints its class path,
# colon-separated.
fetch_iceberg_rest() {
  local dir
  dir=$(fetch_jars iceberg-rest "Iceberg's REST catalog server") || exit 1
  ls -1 "$dir"/*.jar | paste -sd:
}

case "${1:-}" in
  fetch) fetch ;;
  fetch-spark) fetch_spark ;;
  fetch-iceberg-rest) fetch_iceberg_rest ;;
  broker | cluster | tool)
    cp_file=$(fetch)
    export GREGOR_JVM_CLASSPATH_FILE=$cp_file
    exec .venv/bin/python -m gregor.testing.kafka "$@" ;;
  *) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
