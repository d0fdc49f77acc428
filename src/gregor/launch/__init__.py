"""Launchers: start a Gregor broker (or etcd) as a child process of an application, and stop it.

    from gregor.launch import BrokerProcess

    with BrokerProcess(data_dir="out/broker", config={"log.retention.ms": "-1"}) as broker:
        run_job(broker.bootstrap_servers)

``BrokerProcess`` runs ``python -m gregor serve`` on a free port of 127.0.0.1 and waits for its
``broker.started`` line; ``stop()`` ends it with SIGTERM (SIGKILL when it does not end in time).
It is how an application that is only a client of a broker (the pipelines) runs one embedded,
and the base of the test harness's broker processes (``gregor.testing``).

Nothing here imports the broker (an import contract in ``pyproject.toml`` keeps it so): a
launcher speaks to its children through their command line, their log and signals only.
"""

from __future__ import annotations

from gregor.launch.child import ChildProcess
from gregor.launch.ports import free_port
from gregor.launch.process import BrokerProcess, BrokerStartError

__all__ = ["BrokerProcess", "BrokerStartError", "ChildProcess", "free_port"]
