"""Apache Kafka and the Java client as test and benchmark peers (never part of Gregor's runtime).

    from gregor.testing.kafka import JavaHarness, KafkaBroker, KafkaCluster, classpath

    cp = classpath()                          # runs scripts/kafka.sh fetch (cached)
    with KafkaBroker(cp) as kafka:            # one KRaft node, broker and controller in one JVM
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    with KafkaCluster(cp, 3) as cluster:      # three combined nodes, one KRaft quorum
        cluster.kill(1)
    with JavaHarness(cp) as java:             # the Java client roles and Kafka's tools
        java.tool("kafka-topics", "--bootstrap-server", bootstrap, "--list")

Theory of operation. The class path (``scripts/kafka.sh fetch``, :func:`classpath`), Kafka's
tools and the Java harness are ``testing.java``; this module re-exports them. Nothing here
downloads anything.

:class:`KafkaBroker` writes a ``server.properties`` for one node in combined mode
(``process.roles=broker,controller``, a static one-voter quorum) into a temporary directory,
formats its log directory with Kafka's ``StorageTool`` and starts ``kafka.Kafka``; it is up
when its log says ``Kafka Server started``. Its PLAINTEXT listener and its controller listener
take free ports of 127.0.0.1 (``gregor.launch.ports``). :class:`KafkaCluster` does the same for N
nodes sharing one cluster id and one voter set; every node is both broker and controller, so a
kill takes a voter away too. The JVMs are started as Kafka's own scripts start them (G1, 1 GiB
heap) unless told other options.

``python -m gregor.testing.kafka broker|cluster [N]|tool NAME ARGS`` (``scripts/kafka.sh``)
starts a broker or a cluster and prints its bootstrap servers until Ctrl-C, or runs a tool.
"""

from __future__ import annotations

import base64
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from gregor.launch.child import ChildProcess
from gregor.launch.ports import free_port
from gregor.testing.java import (
    KAFKA_VERSION,
    QUICK_JVM_OPTIONS,
    TOOLS,
    JavaError,
    JavaHarness,
    KafkaStartError,
    KafkaUnavailable,
    ToolResult,
    classpath,
    java_binary,
    java_process,
    run_tool_process,
    spark_kafka_jars,
)

__all__ = [
    "KAFKA_VERSION",
    "TOOLS",
    "KafkaBrokerProcess",
    "JavaError",
    "JavaHarness",
    "KafkaBroker",
    "KafkaCluster",
    "KafkaStartError",
    "KafkaUnavailable",
    "ToolResult",
    "classpath",
    "java_process",
    "run_tool_process",
    "spark_kafka_jars",
]


#: The JVM options of Kafka's kafka-server-start.sh (heap) and kafka-run-class.sh (G1).
SERVER_JVM_OPTIONS = (
    "-Xms1g",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)

_STARTED = "Kafka Server started"
_LOG4J = """\
status = error
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
"""


def _cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 without padding, as Kafka's, and as
    Kafka's ``Uuid.randomUuid`` never one that starts with "-" (``kafka-storage format -t``
    would take it for an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _properties(path: Path, props: Mapping[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


class _KafkaNode(ChildProcess):
    """One KRaft node (broker and controller) in ``directory``."""

    def __init__(
        self,
        cp: str,
        directory: Path,
        node_id: int,
        props: dict[str, str],
        jvm_options: Sequence[str],
    ) -> None:
        self.cp = cp
        self.directory = directory
        self.node_id = node_id
        self.props = props
        self.jvm_options = tuple(jvm_options)
        self.log_path = directory / "server.log"
        self._log_offset = 0

    @property
    def port(self) -> int:
        """The port of the PLAINTEXT listener."""
        for listener in self.props["listeners"].split(","):
            if listener.startswith("PLAINTEXT://"):
                return int(listener.rsplit(":", 1)[1])
        raise KafkaStartError(f"no PLAINTEXT listener in {self.props['listeners']}")

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def format(
        self, cluster_id: str, features: Sequence[str] = (), harness: JavaHarness | None = None
    ) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        _properties(self.directory / "server.properties", self.props)
        (self.directory / "log4j2.properties").write_text(_LOG4J)
        args = ["format", "-t", cluster_id, "-c", str(self.directory / "server.properties")]
        for f in features:
            args += ["--feature", f]
        r = (
            harness.tool("kafka-storage", *args)
            if harness is not None
            else run_tool_process(self.cp, "kafka-storage", *args)
        )
        if r.exit != 0:
            raise KafkaStartError(
                f"kafka-storage format failed ({r.exit}):\n{r.stdout}\n{r.stderr}"
            )

    def launch(self) -> None:
        """Start the JVM; :meth:`wait_started` waits for it to serve."""
        if self.running:
            raise KafkaStartError("already running")
        log = open(self.log_path, "ab")
        self._log_offset = log.tell()
        try:
            self.proc = subprocess.Popen(
                [
                    java_binary(),
                    *self.jvm_options,
                    f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
                    "-cp",
                    self.cp,
                    "kafka.Kafka",
                    str(self.directory / "server.properties"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        finally:
            log.close()

    def read_log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_started(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        assert self.proc is not None
        while deadline is None or time.monotonic() < deadline:
            text = self.read_log()
            if _STARTED in text:
                return
            if self.proc.poll() is not None:
                raise KafkaStartError(
                    f"Kafka node {self.node_id} exited with {self.proc.returncode}:\n{text[-4000:]}"
                )
            time.sleep(0.1)
        self.kill()
        raise KafkaStartError(
            f"Kafka node {self.node_id} did not start in {timeout}s:\n{self.read_log()[-4000:]}"
        )

    def start(self) -> Self:
        self.launch()
        self.wait_started()
        return self


class KafkaCluster:
    """``size`` KRaft nodes in combined mode on 127.0.0.1 (``node.id`` 1..size), one cluster id.

    ``config`` is added to every node's ``server.properties`` (replication factors of the
    internal topics default to min(3, size)); ``features`` go to ``kafka-storage format
    --feature`` (``share.version=1`` by default, so share groups work as on Gregor). Given a
    running :class:`JavaHarness` (``harness``), the log directories are formatted in its JVM
    instead of one JVM per node."""

    def __init__(
        self,
        cp: str | None = None,
        size: int = 3,
        config: Mapping[str, object] | None = None,
        jvm_options: Sequence[str] = SERVER_JVM_OPTIONS,
        features: Sequence[str] = ("share.version=1",),
        directory: str | Path | None = None,
        harness: JavaHarness | None = None,
        ports: Mapping[int, int] | None = None,
    ) -> None:
        self.cp = cp if cp is not None else classpath()
        self.harness = harness
        #: PLAINTEXT ports asked for, by node id (the others take free ports).
        self.fixed_ports = dict(ports or {})
        self.size = size
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        self.jvm_options = tuple(jvm_options)
        self.features = tuple(features)
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-kafka-")
            directory = self._tmp.name
        self.directory = Path(directory)
        self.cluster_id = _cluster_id()
        self.nodes: dict[int, _KafkaNode] = {}

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap_servers for n in self.nodes.values() if n.running)

    def node(self, node_id: int) -> _KafkaNode:
        return self.nodes[node_id]

    def _props(self, node_id: int, ports: dict[int, tuple[int, int]]) -> dict[str, str]:
        port, controller = ports[node_id]
        rf = str(min(3, self.size))
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node_id),
            "controller.quorum.voters": ",".join(
                f"{n}@127.0.0.1:{c}" for n, (_, c) in ports.items()
            ),
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.directory / f"node-{node_id}" / "data"),
            "offsets.topic.replication.factor": rf,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": str(min(2, self.size)),
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": str(min(2, self.size)),
            "group.initial.rebalance.delay.ms": "0",
        }
        extra = dict(self.config)
        if "listeners" in extra:  # the node's own listeners, plus its controller listener
            # Port 0 (any) becomes a free port: a listener's bound port must be known to
            # advertise it. PLAINTEXT keeps the node's own port.
            own = []
            for x in extra["listeners"].split(","):
                name, _, address = x.partition("://")
                if address.endswith(":0"):
                    address = f"{address[:-2]}:{port if name == 'PLAINTEXT' else free_port()}"
                own.append(f"{name}://{address}")
            extra["listeners"] = ",".join(own) + f",CONTROLLER://127.0.0.1:{controller}"
            if "listener.security.protocol.map" in extra:
                extra["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
            else:
                protocols = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
                extra["listener.security.protocol.map"] = (
                    ",".join(f"{p}:{p}" for p in protocols) + ",CONTROLLER:PLAINTEXT"
                )
            extra.setdefault(
                "advertised.listeners",
                ",".join(
                    x for x in extra["listeners"].split(",") if not x.startswith("CONTROLLER://")
                ),
            )
        props.update(extra)
        return props

    def start(self) -> KafkaCluster:
        taken: set[int] = set()

        def port() -> int:
            while (p := free_port()) in taken:
                pass
            taken.add(p)
            return p

        ports = {n: (self.fixed_ports.get(n) or port(), port()) for n in range(1, self.size + 1)}
        for n in ports:
            node = _KafkaNode(
                self.cp, self.directory / f"node-{n}", n, self._props(n, ports), self.jvm_options
            )
            node.format(self.cluster_id, self.features, self.harness)
            self.nodes[n] = node
        try:
            for node in self.nodes.values():
                node.launch()
            for node in self.nodes.values():
                node.wait_started()
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self, node_id: int) -> None:
        """SIGKILL one node (a broker and a voter)."""
        self.nodes[node_id].kill()

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.stop()
        node.start()

    def stop(self) -> None:
        for node in self.nodes.values():
            node.resume()
            if node.proc is not None and node.proc.poll() is None:
                node.proc.send_signal(signal.SIGTERM)
        for node in self.nodes.values():
            node.stop()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def read_log(self, node_id: int) -> str:
        return self.nodes[node_id].read_log()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class KafkaBroker(KafkaCluster):
    """One KRaft node in combined mode: ``bootstrap_servers``, ``proc``, ``read_log()``."""

    def __init__(
        self, cp: str | None = None, config: Mapping[str, object] | None = None, **kw: Any
    ) -> None:
        super().__init__(cp, 1, config, **kw)

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.nodes[1].proc if self.nodes else None

    @property
    def running(self) -> bool:
        return bool(self.nodes) and self.nodes[1].running

    @property
    def port(self) -> int:
        return self.nodes[1].port

    def read_log(self, node_id: int = 1) -> str:
        return super().read_log(node_id)


class KafkaBrokerProcess(ChildProcess):
    """A Kafka broker behind ``BrokerProcess``'s interface, so that a test written for a Gregor
    broker runs against Kafka unchanged (``GREGOR_INTEROP_BROKER=kafka`` in tests/interop).

    Its log directory is ``data_dir/logs`` as a Gregor broker's (the segment files have the
    same layout); ``restart()`` keeps the data and the port; ``read_log()`` is Kafka's log.
    ``config`` goes to ``server.properties`` as it is (``log_level`` is Gregor's and ignored)."""

    def __init__(
        self,
        config: Mapping[str, object] | None = None,
        data_dir: str | Path | None = None,
        port: int = 0,
        start_timeout: float | None = None,
        log_level: str = "INFO",
    ) -> None:
        self.config = {str(k): str(v) for k, v in (config or {}).items()}
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-kafka-")
            data_dir = self._tmp.name
        self.data_dir = Path(data_dir)
        self.port = port
        self.start_timeout = start_timeout
        self.listener_ports: dict[str, int] = {}
        self.metrics_url: str | None = None
        self._kafka: KafkaBroker | None = None

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.listener_ports[listener]}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "kafka" / "node-1" / "server.log"

    def start(self) -> Self:
        if self._kafka is None:
            config = {"log.dirs": str(self.data_dir / "logs"), **self.config}
            self._kafka = KafkaBroker(
                config=config,
                directory=self.data_dir / "kafka",
                jvm_options=(*QUICK_JVM_OPTIONS, "-Xmx512m"),
                ports={1: self.port} if self.port else None,
            )
            self._kafka.start()
        else:
            node = self._kafka.nodes[1]
            node.launch()
            node.wait_started(self.start_timeout)
        node = self._kafka.nodes[1]
        self.proc = node.proc
        self.port = node.port
        self.listener_ports = {
            x.split("://", 1)[0]: int(x.rsplit(":", 1)[1])
            for x in node.props["listeners"].split(",")
            if not x.startswith("CONTROLLER://")
        }
        return self

    def read_log(self, since_start: bool = True) -> str:
        if self._kafka is None:
            return ""
        if since_start:
            return self._kafka.nodes[1].read_log()
        return self.log_path.read_text(errors="replace")


def _serve(target: KafkaCluster) -> int:
    with target:
        print(target.bootstrap_servers, flush=True)
        print(f"(data and logs in {target.directory}; Ctrl-C stops)", file=sys.stderr, flush=True)
        try:
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
        except KeyboardInterrupt:
            pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("broker", "cluster", "tool"):
        print(
            "usage: python -m gregor.testing.kafka broker | cluster [N] | tool NAME [ARGS...]",
            file=sys.stderr,
        )
        return 2
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    if args[0] == "broker":
        return _serve(KafkaBroker())
    if args[0] == "cluster":
        return _serve(KafkaCluster(size=int(args[1]) if len(args) > 1 else 3))
    if len(args) < 2:
        print("tool: which one? " + " ".join(sorted(TOOLS)), file=sys.stderr)
        return 2
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    cp = classpath()
    proc = subprocess.run(
        [java_binary(), *QUICK_JVM_OPTIONS, "-cp", cp, TOOLS.get(args[1], args[1]), *args[2:]]
    )
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
