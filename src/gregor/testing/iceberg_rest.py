"""Apache Iceberg's REST catalog test server as a test peer (never part of Gregor's runtime).

    from gregor.testing.iceberg_rest import IcebergRestCatalog

    with IcebergRestCatalog() as server:      # a JVM on a free port, a file:// warehouse
        broker_config = {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": server.uri}

Theory of operation. The server is ``org.apache.iceberg.rest.RESTCatalogServer`` from
``iceberg-open-api``'s test fixtures, what the ``apache/iceberg-rest-fixture`` Docker image
runs: Iceberg's own REST catalog handlers (``RESTCatalogAdapter``) in Jetty over a
``JdbcCatalog``. Its class path comes from ``scripts/kafka.sh fetch-iceberg-rest`` (Maven,
cached outside the repository; ``GREGOR_ICEBERG_REST_CLASSPATH`` names one directly,
:func:`classpath`). It is configured, as the image is, by environment variables: ``CATALOG_X``
is the catalog property ``x`` (``_`` a dot, ``__`` a dash), so ``CATALOG_REST_PORT`` is its
port, ``CATALOG_WAREHOUSE`` the warehouse its tables' locations are made under (here a
``file://`` directory, which pyiceberg writes the data files into and the server's Hadoop FileIO
the metadata files), ``CATALOG_URI`` the JDBC catalog's database (here SQLite in the
directory, so the catalog outlives a client's restart). The server is up when its
``/v1/config`` answers. Jetty binds the port on every address with SO_REUSEPORT; the tests talk
to it on 127.0.0.1 only.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from gregor.launch.child import ChildProcess
from gregor.launch.ports import free_port
from gregor.testing.java import QUICK_JVM_OPTIONS, KafkaUnavailable, java_binary

__all__ = ["MAIN", "IcebergRestCatalog", "IcebergRestStartError", "classpath"]

MAIN = "org.apache.iceberg.rest.RESTCatalogServer"
_REPO = Path(__file__).resolve().parents[3]


class IcebergRestStartError(RuntimeError):
    pass


def classpath() -> str:
    """The REST catalog server's class path: ``GREGOR_ICEBERG_REST_CLASSPATH``, else what
    ``scripts/kafka.sh fetch-iceberg-rest`` fetches (a source checkout only; cached after the
    first run). Raises :class:`~gregor.testing.java.KafkaUnavailable` when it cannot be had."""
    named = os.environ.get("GREGOR_ICEBERG_REST_CLASSPATH")
    if named:
        return named
    script = _REPO / "scripts" / "kafka.sh"
    if not script.is_file() or shutil.which("mvn") is None:
        raise KafkaUnavailable("Iceberg's REST catalog server needs scripts/kafka.sh and mvn")
    proc = subprocess.run(
        ["bash", str(script), "fetch-iceberg-rest"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise KafkaUnavailable(
            f"scripts/kafka.sh fetch-iceberg-rest failed:\n{proc.stderr[-4000:]}"
        )
    cp = proc.stdout.strip().splitlines()[-1]
    os.environ["GREGOR_ICEBERG_REST_CLASSPATH"] = cp
    return cp


class IcebergRestCatalog(ChildProcess):
    """The REST catalog server in ``directory`` (a temporary one by default): its warehouse is
    ``directory/warehouse`` and its JDBC catalog ``directory/catalog.db``; ``properties`` are
    more catalog properties (``{"catalog.name": "x"}`` is ``CATALOG_CATALOG_NAME=x``)."""

    def __init__(
        self,
        cp: str | None = None,
        directory: str | Path | None = None,
        properties: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = (*QUICK_JVM_OPTIONS, "-Xmx256m"),
        start_timeout: float = 120.0,
    ) -> None:
        self.cp = cp if cp is not None else classpath()
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-iceberg-rest-")
            directory = self._tmp.name
        self.directory = Path(directory)
        self.properties = dict(properties or {})
        self.jvm_options = tuple(jvm_options)
        self.start_timeout = start_timeout
        self.port = 0
        self.log_path = self.directory / "server.log"
        self._log_offset = 0

    @property
    def uri(self) -> str:
        """What ``iceberg.catalog.uri`` (pyiceberg's ``uri``) is given."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def warehouse(self) -> str:
        """The server's warehouse, a ``file://`` URL."""
        return (self.directory / "warehouse").as_uri()

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")}
        props = {
            "rest.port": str(self.port),
            "warehouse": self.warehouse,
            "uri": f"jdbc:sqlite:{self.directory / 'catalog.db'}",
            **self.properties,
        }
        for key, value in props.items():
            env["CATALOG_" + key.replace("-", "__").replace(".", "_").upper()] = value
        return env

    def read_log(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def answers(self) -> bool:
        """``/v1/config`` answers 200."""
        try:
            with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=5) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def start(self) -> Self:
        if self.running:
            raise IcebergRestStartError("already running")
        (self.directory / "warehouse").mkdir(parents=True, exist_ok=True)
        if not self.port:  # a restart keeps the port (and the catalog, in catalog.db)
            self.port = free_port()
        log = open(self.log_path, "ab")
        self._log_offset = log.tell()
        try:
            self.proc = subprocess.Popen(
                [java_binary(), *self.jvm_options, "-cp", self.cp, MAIN],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._environment(),
            )
        finally:
            log.close()
        deadline = time.monotonic() + self.start_timeout
        while not self.answers():
            if self.proc.poll() is not None:
                raise IcebergRestStartError(
                    f"the REST catalog server exited with {self.proc.returncode}:\n"
                    f"{self.read_log()[-4000:]}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise IcebergRestStartError(
                    f"the REST catalog server did not answer in {self.start_timeout}s:\n"
                    f"{self.read_log()[-4000:]}"
                )
            time.sleep(0.1)
        return self
