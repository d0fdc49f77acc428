#!/usr/bin/env bash
# Apache Kafka as a test and benchmark peer (never part of Gregor's runtime).
#
#   bash scripts/kafka.sh fetch          fetch the pinned Kafka jars with Maven and build the Java
#                                        harness (tools/jvm); prints the class path file
#   bash scripts/kafka.sh broker         a single KRaft broker (combined mode) on a free port
#   bash scripts/kafka.sh cluster [N]    an N-node KRaft cluster (default 3)
#   bash scripts/kafka.sh tool NAME ...  one of Kafka's tools by its script name, e.g.
#                                        kafka-topics --bootstrap-server HOST:PORT --list
#
# The jars come from Maven Central into Maven's local repository (~/.m2) and are copied, with the
# compiled harness, into ${GREGOR_JVM_CACHE:-~/.cache/gregor-jvm}/peers-<hash of tools/jvm>; a
# second run with the same tools/jvm only prints the path. broker and cluster keep their logs
# and data in a temporary directory, print the bootstrap servers and stop on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${GREGOR_JVM_CACHE:-$HOME/.cache/gregor-jvm}

fetch() {
  command -v mvn >/dev/null 2>&1 || { echo "[kafka] mvn not found: apt-get install maven" >&2; exit 1; }
  command -v java >/dev/null 2>&1 || { echo "[kafka] java not found: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
  local hash dir
  hash=$( (cat tools/jvm/pom.xml; find tools/jvm/src -type f | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-16)
  dir=$cache/peers-$hash
  mkdir -p "$cache"
  (
    flock 9
    if [ ! -f "$dir/classpath" ]; then
      local build
      build=$(mktemp -d "$cache/build.XXXXXX")
      cp -r tools/jvm/pom.xml tools/jvm/src "$build/"
      echo "[kafka] building the JVM peers (Kafka's jars from Maven Central, the Java harness) in $build" >&2
      if ! mvn -B -q -f "$build/pom.xml" package dependency:copy-dependencies \
          -DincludeScope=runtime -DoutputDirectory="$build/lib" >"$build/mvn.log" 2>&1; then
        cat "$build/mvn.log" >&2
        exit 1
      fi
      cp "$build"/target/gregor-jvm-peers-*.jar "$build/lib/"
      (cd "$build/lib" && ls -1 "$PWD"/*.jar) | paste -sd: >"$build/classpath.tmp"
      rm -rf "$build/target" "$build/src"
      sed -i "s#$build#$dir#g" "$build/classpath.tmp"
      rm -rf "$dir"
      mv "$build" "$dir"
      mv "$dir/classpath.tmp" "$dir/classpath"
    fi
  ) 9>"$cache/.lock"
  echo "$dir/classpath"
}

case "${1:-}" in
  fetch) fetch ;;
  broker | cluster | tool)
    cp_file=$(fetch)
    export GREGOR_JVM_CLASSPATH_FILE=$cp_file
    exec .venv/bin/python -m gregor.testing.kafka "$@" ;;
  *) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
