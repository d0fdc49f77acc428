"""Apache Iceberg's REST catalog test server as a test peer (never part of Gregor's runtime).

    from gregor.testing.iceberg_rest import IcebergRestCatalog

    with IcebergRestCatalog() as server:      # a JVM on a free port, a file:// warehouse
        broker_config = {"iceberg.catalog.type": "rest", "iceberg.catalog.uri": server.uri}

    s3 = S3Warehouse("s3://bucket/lake", "http://127.0.0.1:9000", access_key, secret_key)
    with IcebergRestCatalog(s3=s3) as server:  # its metadata files written to the bucket
        ...

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
directory, so the catalog outlives a client's restart). With an :class:`S3Warehouse` the
warehouse is an ``s3://`` location instead, and the server writes the metadata files there
with Iceberg's ``S3FileIO`` (``io-impl``; the AWS SDK is ``iceberg-aws-bundle`` on the class
path), given the store's endpoint, path-style addressing, the access key (``s3.*``) and the
region (``client.region``, and ``AWS_REGION`` for the SDK's own lookups): what brokers
sharing the catalog and the bucket need (each writes its data files and manifests with
pyiceberg's FileIO, the server the metadata files). The server is up when its
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from gregor.launch.child import ChildProcess
from gregor.launch.ports import free_port
from gregor.testing.java import QUICK_JVM_OPTIONS, KafkaUnavailable, java_binary

__all__ = [
    "MAIN",
    "S3_FILE_IO",
    "IcebergRestCatalog",
    "IcebergRestStartError",
    "S3Warehouse",
    "classpath",
]

MAIN = "org.apache.iceberg.rest.RESTCatalogServer"
#: Iceberg's FileIO for S3 (iceberg-aws, with the AWS SDK of iceberg-aws-bundle).
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
_REPO = Path(__file__).resolve().parents[3]


class IcebergRestStartError(RuntimeError):
    pass


@dataclass(frozen=True)
class S3Warehouse:
    """An ``s3://bucket/prefix`` warehouse in an S3-compatible store at ``endpoint`` (path-style
    addressing), reached with one access key."""

    location: str
    endpoint: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    region: str = "us-east-1"

    def __post_init__(self) -> None:
        if not self.location.startswith("s3://"):
            raise ValueError(f"an S3 warehouse is an s3:// location, not {self.location!r}")

    def catalog_properties(self) -> dict[str, str]:
        """The server's catalog properties for this warehouse (Iceberg's S3FileIO names)."""
        return {
            "warehouse": self.location.rstrip("/"),
            "io-impl": S3_FILE_IO,
            "s3.endpoint": self.endpoint,
            "s3.path-style-access": "true",
            "s3.access-key-id": self.access_key_id,
            "s3.secret-access-key": self.secret_access_key,
            "client.region": self.region,
        }


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
    ``directory/warehouse`` (or ``s3``'s location) and its JDBC catalog
    ``directory/catalog.db``; ``properties`` are more catalog properties
    (``{"catalog.name": "x"}`` is ``CATALOG_CATALOG_NAME=x``)."""

    def __init__(
        self,
        cp: str | None = None,
        directory: str | Path | None = None,
        properties: Mapping[str, str] | None = None,
        s3: S3Warehouse | None = None,
        jvm_options: Sequence[str] = (*QUICK_JVM_OPTIONS, "-Xmx256m"),
        start_timeout: float = 120.0,
    ) -> None:
        self.cp = cp if cp is not None else classpath()
        if directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gregor-iceberg-rest-")
            directory = self._tmp.name
        self.directory = Path(directory)
        self.properties = dict(properties or {})
        self.s3 = s3
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
        """The server's warehouse: a ``file://`` URL, or the S3 warehouse's location."""
        if self.s3 is not None:
            return self.s3.location.rstrip("/")
        return (self.directory / "warehouse").as_uri()

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")}
        props = {
            "rest.port": str(self.port),
            "warehouse": self.warehouse,
            "uri": f"jdbc:sqlite:{self.directory / 'catalog.db'}",
            **(self.s3.catalog_properties() if self.s3 is not None else {}),
            **self.properties,
        }
        for key, value in props.items():
            env["CATALOG_" + key.replace("-", "__").replace(".", "_").upper()] = value
        if self.s3 is not None:  # the AWS SDK's default region lookups, beside client.region
            env["AWS_REGION"] = self.s3.region
        return env

    def _log_options(self) -> list[str]:
        """The server logs its catalog properties at start, the S3 secret key among them:
        with an S3 warehouse only its warnings and errors are logged (its log is shown in a
        start failure's message)."""
        if self.s3 is None:
            return []
        return [f"-Dorg.slf4j.simpleLogger.log.{MAIN}=warn"]

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
                [java_binary(), *self.jvm_options, *self._log_options(), "-cp", self.cp, MAIN],
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
