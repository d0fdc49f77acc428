"""The JVM side of the test and benchmark peers (never part of Gregor's runtime): the class path
of the pinned Kafka release, Spark's Kafka connector, Kafka's command-line tools, and the Java
harness.

``scripts/kafka.sh fetch`` has Maven resolve the pinned Kafka release (``tools/jvm/pom.xml``)
from Maven Central into a cache outside the repository and compile the Java harness beside it;
it prints the file that holds the class path, which :func:`classpath` reads
(``GREGOR_JVM_CLASSPATH_FILE`` names one directly). Nothing here downloads anything.

:class:`JavaHarness` starts ``gregor.jvm.Harness`` (``tools/jvm/src``) once: a JVM that reads
JSON requests on stdin and runs each one, a client role or one of Kafka's tools (by its script
name, see ``TOOLS``), answering one JSON line per request. Tools run inside that JVM, so a call
costs milliseconds instead of a JVM start. :func:`run_tool_process` runs a tool in a JVM of its
own, :func:`java_process` any main class. Kafka's brokers themselves are ``testing.kafka``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

__all__ = [
    "KAFKA_VERSION",
    "QUICK_JVM_OPTIONS",
    "TOOLS",
    "JavaError",
    "JavaHarness",
    "KafkaStartError",
    "KafkaUnavailable",
    "ToolResult",
    "classpath",
    "java_binary",
    "java_process",
    "run_tool_process",
    "spark_kafka_jars",
]

#: The Kafka release tools/jvm/pom.xml pins (kept equal to its kafka.version).
KAFKA_VERSION = "4.1.1"

#: Kafka's command-line tools by their bin/ script name (without .sh): the main class each
#: script runs in this release.
TOOLS: Mapping[str, str] = {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-dump-log": "kafka.tools.DumpLogSegments",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
}

#: Short-lived JVMs of a test run: the quick compiler only, no class verification cost.
QUICK_JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss1m")

_REPO = Path(__file__).resolve().parents[3]


class KafkaUnavailable(RuntimeError):
    """The JVM peers cannot be had here (no java or mvn, or the fetch failed)."""


class KafkaStartError(RuntimeError):
    pass


class JavaError(RuntimeError):
    """A request the Java harness answered with an exception."""


def classpath() -> str:
    """The class path of the JVM peers: the file ``GREGOR_JVM_CLASSPATH_FILE`` names, else what
    ``scripts/kafka.sh fetch`` builds (a source checkout only; cached after the first run)."""
    named = os.environ.get("GREGOR_JVM_CLASSPATH_FILE")
    if named:
        return Path(named).read_text().strip()
    script = _REPO / "scripts" / "kafka.sh"
    if not script.is_file():
        raise KafkaUnavailable("no scripts/kafka.sh here: set GREGOR_JVM_CLASSPATH_FILE")
    if shutil.which("java") is None or shutil.which("mvn") is None:
        raise KafkaUnavailable("the JVM peers need java and mvn (bash scripts/system-deps.sh)")
    proc = subprocess.run(["bash", str(script), "fetch"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise KafkaUnavailable(f"scripts/kafka.sh fetch failed:\n{proc.stderr[-4000:]}")
    path = proc.stdout.strip().splitlines()[-1]
    os.environ["GREGOR_JVM_CLASSPATH_FILE"] = path
    return Path(path).read_text().strip()


def spark_kafka_jars() -> str:
    """Spark's own Kafka connector and the jars it needs beyond pyspark's, comma-separated (for
    ``spark.jars``): ``GREGOR_SPARK_KAFKA_JARS``, else what ``scripts/kafka.sh fetch-spark``
    fetches (a source checkout only; cached after the first run)."""
    named = os.environ.get("GREGOR_SPARK_KAFKA_JARS")
    if named:
        return named
    script = _REPO / "scripts" / "kafka.sh"
    if not script.is_file() or shutil.which("mvn") is None:
        raise KafkaUnavailable("Spark's Kafka connector needs scripts/kafka.sh and mvn")
    proc = subprocess.run(["bash", str(script), "fetch-spark"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise KafkaUnavailable(f"scripts/kafka.sh fetch-spark failed:\n{proc.stderr[-4000:]}")
    jars = proc.stdout.strip().splitlines()[-1]
    os.environ["GREGOR_SPARK_KAFKA_JARS"] = jars
    return jars


def java_binary() -> str:
    """The ``java`` of ``JAVA_HOME``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailable("no java on PATH")
    return java


def run_tool_process(
    cp: str, name: str, *args: str, stdin: str = "", jvm_options: Sequence[str] = QUICK_JVM_OPTIONS
) -> ToolResult:
    """Run one of Kafka's tools in a JVM of its own (as its bin/ script would)."""
    main = TOOLS.get(name, name)
    proc = subprocess.run(
        [java_binary(), *jvm_options, "-cp", cp, main, *args],
        input=stdin,
        capture_output=True,
        text=True,
    )
    return ToolResult(proc.returncode, proc.stdout, proc.stderr)


def java_process(
    cp: str, main: str, *args: str, jvm_options: Sequence[str] = QUICK_JVM_OPTIONS, **popen: Any
) -> subprocess.Popen[bytes]:
    """Start ``main`` (a class on the JVM peers' class path, e.g. ``gregor.jvm.StreamsApp`` or
    Kafka Connect's ``ConnectDistributed``) as a process of its own."""
    return subprocess.Popen([java_binary(), *jvm_options, "-cp", cp, main, *args], **popen)


@dataclass(frozen=True)
class ToolResult:
    exit: int
    stdout: str
    stderr: str

    def check(self) -> ToolResult:
        if self.exit != 0:
            raise JavaError(
                f"tool exited with {self.exit}:\n{self.stdout[-3000:]}\n{self.stderr[-3000:]}"
            )
        return self


class JavaHarness:
    """The Java side of the interop tests: one JVM (``gregor.jvm.Harness``) that runs requests.

    ``call(op, **fields)`` sends one request and returns its ``result`` (a JSON value), raising
    :class:`JavaError` with the Java stack trace when the request failed; requests may be sent
    from several threads at once. ``tool(name, *args, stdin="")`` runs one of Kafka's tools in
    that JVM and returns a :class:`ToolResult`."""

    def __init__(
        self,
        cp: str | None = None,
        jvm_options: Sequence[str] = QUICK_JVM_OPTIONS,
        log_path: str | Path | None = None,
    ) -> None:
        self.cp = cp if cp is not None else classpath()
        self.jvm_options = tuple(jvm_options)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if log_path is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-java-")
            log_path = Path(self._tmp.name) / "harness.log"
        self.log_path = Path(log_path)
        self.proc: subprocess.Popen[bytes] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[threading.Event, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None

    def start(self) -> Self:
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [java_binary(), *self.jvm_options, "-cp", self.cp, "gregor.jvm.Harness"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        finally:
            log.close()
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        if not first or not json.loads(first).get("ready"):
            self.close()
            raise KafkaStartError(f"the Java harness did not start:\n{self.read_log()[-4000:]}")
        self._reader = threading.Thread(target=self._read, name="java-harness-reader", daemon=True)
        self._reader.start()
        return self

    def read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            answer = json.loads(line)
            with self._lock:
                waiter = self._pending.pop(answer["id"], None)
            if waiter is not None:
                waiter[1].append(answer)
                waiter[0].set()
        with self._lock:  # the JVM is gone: nobody will answer the rest
            pending, self._pending = self._pending, {}
        for event, box in pending.values():
            box.append({"error": "the Java harness exited", "trace": self.read_log()[-4000:]})
            event.set()

    def call(self, op: str, **fields: Any) -> Any:
        if self.proc is None or self.proc.stdin is None or self.proc.poll() is not None:
            raise JavaError(f"the Java harness is not running:\n{self.read_log()[-4000:]}")
        rid = next(self._ids)
        event = threading.Event()
        box: list[dict[str, Any]] = []
        line = (json.dumps({"id": rid, "op": op, **fields}) + "\n").encode()
        with self._lock:
            self._pending[rid] = (event, box)
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        event.wait()
        answer = box[0]
        if "error" in answer:
            raise JavaError(f"{op}: {answer['error']}\n{answer.get('trace', '')}")
        return answer["result"]

    def tool(self, name: str, *args: str, stdin: str = "") -> ToolResult:
        r = self.call("tool", main=TOOLS.get(name, name), args=list(args), stdin=stdin)
        return ToolResult(r["exit"], r["stdout"], r["stderr"])

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.stdin is not None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        if self._reader is not None:
            self._reader.join(5)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
