#!/usr/bin/env bash
# Debian packages the test suite uses: kcat (an older librdkafka, for interop tests), a Java
# runtime for Spark, a JDK and Maven for the JVM peers (scripts/kafka.sh), and etcd (etcd-server: the metadata store of a Gregor cluster, for
# tests/cluster and metadata.store=etcd://). Installed only when missing, and only where we may (root with apt-get).
set -euo pipefail
need=()
command -v kcat >/dev/null 2>&1 || need+=(kcat)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
# The JVM peers (scripts/kafka.sh): Maven fetches Kafka's jars, javac compiles the Java harness.
command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need+=(maven)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
# libfaketime: gregor.chaos's clock nemesis skews a broker's clock with it.
command -v faketime >/dev/null 2>&1 || need+=(faketime)
# The web console's browser tests (Chromium and its WebDriver) and its charts (Chart.js).
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
[ -d /usr/share/javascript/chart.js ] || need+=(libjs-chart.js)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[setup] installing ${need[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
else
  echo "[setup] missing ${need[*]}: install them (apt-get install ${need[*]})" >&2
  exit 1
fi
