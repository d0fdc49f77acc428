"""``ClusterProcess``: etcd plus N real brokers (``node.id`` 1..N) sharing one metadata store.

    with ClusterProcess(3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.kill(1)       # SIGKILL broker 1; it leaves Metadata after its session timeout
        cluster.restart(1)    # start it again on its data directory and port
        cluster.pause(2)      # SIGSTOP (resume(2): SIGCONT)

Each broker is a ``BrokerProcess`` (a child process on a free port of 127.0.0.1 with its data
in a temporary directory, or in ``data_dir/broker-<node id>`` when ``data_dir`` is given,
which is then kept) with ``metadata.store=etcd://<the EtcdProcess>/<a fresh prefix>``.
``python -m gregor.testing.cluster [N] [--keep] [--data-dir DIR]`` (``scripts/cluster.sh``)
starts one, prints the bootstrap servers and where each member's log and data are, and stops
everything on Ctrl-C, deleting the logs and data unless ``--keep`` (or ``--data-dir``) was
given. Imports nothing of the broker.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from gregor.launch.child import stop_all
from gregor.launch.process import BrokerProcess
from gregor.testing.etcd import EtcdCluster, EtcdProcess

__all__ = ["ClusterProcess"]


class ClusterProcess:
    def __init__(
        self,
        size: int = 3,
        config: Mapping[str, object] | None = None,
        session_timeout_ms: int = 2000,
        broker_config: Mapping[int, Mapping[str, object]] | None = None,
        etcd_members: int = 1,
        data_dir: str | Path | None = None,
    ) -> None:
        #: Where the members keep their logs and data (kept after ``close``); None: temporary
        #: directories, deleted by ``close``.
        self.data_dir = Path(data_dir) if data_dir is not None else None
        #: One etcd member, or (``etcd_members`` > 1) an etcd cluster whose every member the
        #: brokers know: ``etcd.kill(i)`` then takes one member away.
        self.etcd: EtcdProcess | EtcdCluster = (
            EtcdCluster(etcd_members)
            if etcd_members > 1
            else EtcdProcess(self.data_dir / "etcd" if self.data_dir is not None else None)
        )
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
                where = self.data_dir / f"broker-{node_id}" if self.data_dir is not None else None
                self.brokers[node_id] = BrokerProcess(props, data_dir=where).start()
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
        """Stop the brokers, all at once (a paused one is resumed so it can stop), then etcd,
        which they deregister from as they stop."""
        stop_all(self.brokers.values())
        for broker in self.brokers.values():
            broker.close()  # stopped: removes a temporary data directory
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
    import argparse

    ap = argparse.ArgumentParser(
        prog="scripts/cluster.sh", description="etcd and N Gregor brokers on 127.0.0.1."
    )
    ap.add_argument("size", nargs="?", type=int, default=3, help="brokers (default 3)")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the logs and data after Ctrl-C (in a new directory)",
    )
    ap.add_argument("--data-dir", default=None, help="keep the logs and data here (implies --keep)")
    a = ap.parse_args(argv[1:])
    data_dir = a.data_dir or (tempfile.mkdtemp(prefix="gregor-cluster-") if a.keep else None)

    def interrupt(signum: int, frame: object) -> None:
        # The first Ctrl-C (or SIGTERM) stops everything; another one while the members stop
        # must not cut that short and leave them running.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)  # a kill or timeout stops the members too
    with ClusterProcess(a.size, session_timeout_ms=9000, data_dir=data_dir) as cluster:
        etcd = cluster.etcd
        print(f"etcd: {etcd.url}  metadata.store={cluster.metadata_store}")
        if isinstance(etcd, EtcdProcess):
            print(f"  log: {etcd.log_path}  data: {etcd.data_dir}")
        for node_id, b in cluster.brokers.items():
            print(
                f"broker {node_id}: {b.bootstrap_servers}  log: {b.log_path}  data: {b.data_dir / 'logs'}"
            )
        print(f"bootstrap.servers={cluster.bootstrap_servers}", flush=True)
        try:  # from the line that invites Ctrl-C on, Ctrl-C is a clean stop
            if data_dir is None:
                print(
                    "Ctrl-C stops etcd and the brokers and deletes their logs and data "
                    "(scripts/cluster.sh --keep keeps them).",
                    flush=True,
                )
            else:
                print(
                    f"Ctrl-C stops etcd and the brokers; their logs and data stay in {data_dir}.",
                    flush=True,
                )
            signal.pause()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
