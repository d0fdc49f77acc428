"""``ClusterProcess``: etcd plus N real brokers (``node.id`` 1..N) sharing one metadata store.

    with ClusterProcess(3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.kill(1)       # SIGKILL broker 1; it leaves Metadata after its session timeout
        cluster.restart(1)    # start it again on its data directory and port
        cluster.pause(2)      # SIGSTOP (resume(2): SIGCONT)

Each broker is a ``BrokerProcess`` (a child process on a free port of 127.0.0.1 with its data
in a temporary directory) with ``metadata.store=etcd://<the EtcdProcess>/<a fresh prefix>``.
``python -m gregor.testing.cluster [N]`` (``scripts/cluster.sh``) starts one, prints the
bootstrap servers and stops everything on Ctrl-C. Imports nothing of the broker.
"""

from __future__ import annotations

import signal
import sys
import uuid
from collections.abc import Mapping
from types import TracebackType

from gregor.testing.etcd import EtcdCluster, EtcdProcess
from gregor.testing.process import BrokerProcess

__all__ = ["ClusterProcess"]


class ClusterProcess:
    def __init__(
        self,
        size: int = 3,
        config: Mapping[str, object] | None = None,
        session_timeout_ms: int = 2000,
        broker_config: Mapping[int, Mapping[str, object]] | None = None,
        etcd_members: int = 1,
    ) -> None:
        #: One etcd member, or (``etcd_members`` > 1) an etcd cluster whose every member the
        #: brokers know: ``etcd.kill(i)`` then takes one member away.
        self.etcd: EtcdProcess | EtcdCluster = EtcdCluster(etcd_members) if etcd_members > 1 else EtcdProcess()
        self.size = size
        self.config = dict(config or {})
        #: Settings of one broker only (``broker.rack``, say), by node id, over ``config``.
        self.broker_config = {n: dict(c) for n, c in (broker_config or {}).items()}
        self.session_timeout_ms = session_timeout_ms
        self.brokers: dict[int, BrokerProcess] = {}

    @property
    def metadata_store(self) -> str:
        return self._url

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.running)

    def start(self) -> ClusterProcess:
        self.etcd.start()
        self._url = f"{self.etcd.url}/gregor-{uuid.uuid4().hex[:12]}"
        try:
            for node_id in range(1, self.size + 1):
                props: dict[str, object] = {
                    "node.id": node_id,
                    "metadata.store": self._url,
                    "broker.session.timeout.ms": self.session_timeout_ms,
                }
                props.update(self.config)
                props.update(self.broker_config.get(node_id, {}))
                self.brokers[node_id] = BrokerProcess(props).start()
        except BaseException:
            self.close()
            raise
        return self

    def broker(self, node_id: int) -> BrokerProcess:
        return self.brokers[node_id]

    def kill(self, node_id: int) -> None:
        self.brokers[node_id].kill()

    def stop(self, node_id: int) -> None:
        self.brokers[node_id].stop()

    def restart(self, node_id: int) -> BrokerProcess:
        broker = self.brokers[node_id]
        if broker.running:
            broker.stop()
        return broker.start()

    def pause(self, node_id: int) -> None:
        self.brokers[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.brokers[node_id].resume()

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.close()  # a paused broker is resumed so it can stop
        self.brokers.clear()
        self.etcd.close()

    def __enter__(self) -> ClusterProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def main(argv: list[str]) -> int:
    size = int(argv[1]) if len(argv) > 1 else 3

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)  # a kill or timeout stops the members too
    with ClusterProcess(size, session_timeout_ms=9000) as cluster:
        print(f"etcd: {cluster.etcd.url}  metadata.store={cluster.metadata_store}")
        print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        print("Ctrl-C stops etcd and the brokers.", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
