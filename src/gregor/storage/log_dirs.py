"""A broker's claim on its log directories: Kafka's ``.lock`` and ``meta.properties``.

Theory of operation. :func:`open_log_dirs` runs first at broker start, before the metadata
store (whose file, ``cluster-metadata.json``, lives in the first log directory) or any log is
opened. For each directory it

1. creates it if missing and checks that it can be written (a one-line
   :class:`LogDirectoryError` otherwise);
2. takes an exclusive ``flock`` on ``<dir>/.lock``, held until :meth:`LogDirs.release` (or the
   process ends, which releases it even after SIGKILL). A second broker on the same directory,
   in another process or in this one, fails here, as Kafka's ``LogManager.lockLogDirs`` does,
   before it could "recover" the live broker's logs or write a clean-shutdown marker for them;
3. reads ``meta.properties`` (Kafka's v1 format: ``version``, ``node.id``, ``cluster.id``,
   ``directory.id``) and refuses a directory whose stored ``node.id`` is not this broker's, as
   Kafka's ``MetaPropertiesEnsemble.verify`` does.

Once the store is open, :meth:`LogDirs.claim` checks the cluster id against every
``meta.properties`` that has one (a directory of another cluster is refused) and writes the file
where it is missing or lacks the cluster id: directories from before this file existed start
as they did and get it on that first start. A store that keeps nothing across restarts
(``metadata.store=memory``) has no cluster id worth keeping, so none is written or checked.
"""

from __future__ import annotations

import base64
import fcntl
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from gregor.protocol.errors import ErrorCode
from gregor.storage.checkpoint import write_atomically
from gregor.storage.errors import StorageError

LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
VERSION = 1

__all__ = [
    "LOCK_FILE",
    "META_PROPERTIES",
    "LogDirectoryError",
    "LogDirs",
    "MetaProperties",
    "open_log_dirs",
    "read_meta_properties",
]


class LogDirectoryError(StorageError):
    """A log directory this broker cannot use: it stops the broker at start."""

    code: ClassVar[ErrorCode] = ErrorCode.KAFKA_STORAGE_ERROR


def new_directory_id() -> str:
    """A random id in Kafka's Uuid text form (URL-safe base64, no padding)."""
    while True:
        raw = uuid.uuid4().bytes
        if raw[:-1] != bytes(15) or raw[-1] > 2:  # Kafka reserves the ids 0, 1 and 2
            return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True)
class MetaProperties:
    node_id: int
    directory_id: str
    cluster_id: str | None = None
    version: int = VERSION

    def to_text(self) -> str:
        lines = [
            "#Written by Gregor: the node and cluster this log directory belongs to",
            f"version={self.version}",
        ]
        if self.cluster_id:
            lines.append(f"cluster.id={self.cluster_id}")
        lines += [f"node.id={self.node_id}", f"directory.id={self.directory_id}"]
        return "\n".join(lines) + "\n"

    @classmethod
    def parse(cls, text: str, path: str) -> MetaProperties:
        props: dict[str, str] = {}
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise LogDirectoryError(f"{path} is not a properties file (line {raw!r})")
            props[key.strip()] = value.strip()
        # v0 files (Kafka's ZooKeeper era) name the node broker.id
        node = props.get("node.id", props.get("broker.id"))
        if node is None:
            raise LogDirectoryError(f"node.id was not specified in {path}")
        try:
            version = int(props.get("version", "0"))
            node_id = int(node)
        except ValueError:
            raise LogDirectoryError(f"{path} has an invalid version or node.id") from None
        return cls(node_id, props.get("directory.id", ""), props.get("cluster.id") or None, version)


def read_meta_properties(directory: str | Path) -> MetaProperties | None:
    """The directory's ``meta.properties``, or None when it has none."""
    path = os.path.join(directory, META_PROPERTIES)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise LogDirectoryError(f"cannot read {path}: {e.strerror}") from None
    return MetaProperties.parse(text, path)


class LogDirs:
    """The locked log directories of one broker (see the module docstring)."""

    def __init__(
        self,
        node_id: int,
        dirs: list[str],
        locks: list[int],
        found: dict[str, MetaProperties | None],
    ) -> None:
        self.node_id = node_id
        self.dirs = dirs
        self._locks = locks
        self._found = found

    def claim(self, cluster_id: str | None) -> dict[str, MetaProperties]:
        """Check ``cluster_id`` (None: the store keeps none) against every directory's
        ``meta.properties`` and write the file where it is missing or incomplete."""
        if cluster_id:
            for d, meta in self._found.items():
                if meta is not None and meta.cluster_id and meta.cluster_id != cluster_id:
                    raise LogDirectoryError(
                        f"{os.path.join(d, META_PROPERTIES)} says cluster.id={meta.cluster_id}, but this broker's "
                        f"cluster is {cluster_id}: the directory belongs to another cluster"
                    )
        seen: dict[str, str] = {}
        written: dict[str, MetaProperties] = {}
        for d, meta in self._found.items():
            want = meta or MetaProperties(self.node_id, new_directory_id(), cluster_id)
            if not want.directory_id or want.directory_id in seen:
                want = replace(want, directory_id=new_directory_id())
            if cluster_id and not want.cluster_id:
                want = replace(want, cluster_id=cluster_id)
            want = replace(want, version=VERSION)
            seen[want.directory_id] = d
            if want != meta:
                write_atomically(os.path.join(d, META_PROPERTIES), want.to_text().encode())
            written[d] = want
            self._found[d] = want
        return written

    def release(self) -> None:
        """Give the directories up (at the broker's stop)."""
        locks, self._locks = self._locks, []
        for fd in locks:
            os.close(fd)  # closing the only descriptor releases its flock


def _usable(d: str) -> None:
    try:
        os.makedirs(d, exist_ok=True)
    except FileExistsError:
        raise LogDirectoryError(
            f"log directory {d} cannot be created: a file is in the way"
        ) from None
    except OSError as e:
        raise LogDirectoryError(f"log directory {d} cannot be created: {e.strerror}") from None
    if not os.access(d, os.W_OK | os.X_OK):
        raise LogDirectoryError(f"log directory {d} is not writable")


def _lock(d: str) -> int:
    path = os.path.join(d, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise LogDirectoryError(f"cannot open {path}: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirectoryError(
            f"failed to acquire lock on file {LOCK_FILE} in {d}: a broker in another process or thread "
            "is using this directory"
        ) from None
    except OSError as e:
        os.close(fd)
        raise LogDirectoryError(f"cannot lock {path}: {e.strerror}") from None
    return fd


def open_log_dirs(dirs: Sequence[str | Path], node_id: int) -> LogDirs:
    """Create, check and lock every log directory and verify the node id stored in each."""
    paths = [os.path.abspath(d) for d in dirs]
    locks: list[int] = []
    try:
        found: dict[str, MetaProperties | None] = {}
        for d in paths:
            _usable(d)
            locks.append(_lock(d))
            found[d] = meta = read_meta_properties(d)
            if meta is not None and meta.node_id != node_id:
                raise LogDirectoryError(
                    f"{os.path.join(d, META_PROPERTIES)} says node.id={meta.node_id}, but this broker is "
                    f"node.id={node_id}: the directory belongs to another broker (if you moved the data, set "
                    f"node.id={meta.node_id}; a new broker needs empty log directories)"
                )
    except BaseException:
        for fd in locks:
            os.close(fd)
        raise
    return LogDirs(node_id, paths, locks, found)
