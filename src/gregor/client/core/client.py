"""The shared core of the producer, consumer and admin client: connections and metadata.

Theory of operation. :class:`KafkaClient` keeps at most one :class:`BrokerConnection` per
broker node, opened on first use and reopened after a failure with exponential backoff
(``reconnect.backoff.ms`` doubling up to ``reconnect.backoff.max.ms``, with jitter). Before it
knows any node it talks to the bootstrap servers, in turn, until one answers.

Metadata is fetched for the topics the owner tracks (``add_topics``) or for every topic
(``track_all_topics``). Refreshes are coalesced: whoever asks while one is running waits for
the same one. Owners call :meth:`request_update` when an error code says the picture is stale
(NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, ...), and apply
KIP-951 leader hints through ``cluster.update_leader`` first, which often makes the refresh
unnecessary. A refresh also happens every ``metadata.max.age.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from gregor.client.core.config import Config
from gregor.client.core.conn import BrokerConnection, ConnectionOptions
from gregor.client.core.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    error_for_code,
)
from gregor.client.core.metadata import ClusterMetadata
from gregor.client.core.security import connection_security
from gregor.protocol.errors import ErrorCode, KafkaError, SaslAuthenticationFailedError
from gregor.protocol.messages import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    Message,
    MetadataRequest,
    MetadataResponse,
)

log = logging.getLogger("gregor.client")

#: Error codes after which the client's metadata is stale.
STALE_METADATA = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.BROKER_NOT_AVAILABLE,
    }
)


T = TypeVar("T")


def _retrieve(task: asyncio.Task[T]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.debug("background task %s failed: %r", task.get_name(), task.exception())


def spawn(coro: Coroutine[object, object, T], name: str | None = None) -> asyncio.Task[T]:
    """A background task whose failure is logged (at debug) rather than left unretrieved."""
    task = asyncio.get_running_loop().create_task(coro, name=name)
    task.add_done_callback(_retrieve)
    return task


class _Backoff:
    __slots__ = ("failures", "until")

    def __init__(self) -> None:
        self.failures = 0
        self.until = 0.0


class KafkaClient:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.cluster = ClusterMetadata()
        self.client_id = config["client.id"]
        self._bootstrap = config.bootstrap_servers
        self._ssl_context, self._sasl = connection_security(config.get)
        self._conns: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._backoff: dict[int, _Backoff] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._topics: set[str] = set()
        self._all_topics = False
        self._refresh: asyncio.Task[None] | None = None
        self._need_update = True
        #: Topics were added since the last refresh: refresh without the retry backoff.
        self._new_topics = False
        self._closed = False
        self._metadata_task: asyncio.Task[None] | None = None
        self.request_timeout = config["request.timeout.ms"] / 1000
        self.retry_backoff = config["retry.backoff.ms"] / 1000
        self.metadata_updated = asyncio.Event()
        self._update_wanted = asyncio.Event()
        #: Called (on the loop) after every metadata update: owners waiting on a leader wake up.
        self.listeners: list[Callable[[], None]] = []

    # --- lifecycle ---

    async def start(self) -> None:
        await self.refresh_metadata()
        self._metadata_task = spawn(self._metadata_loop(), "gregor-metadata")

    async def close(self) -> None:
        self._closed = True
        if self._metadata_task is not None:
            self._metadata_task.cancel()
            with contextlib.suppress(BaseException):
                await self._metadata_task
        for t in list(self._connecting.values()):
            t.cancel()
        for c in list(self._conns.values()):
            c.close()
        if self._bootstrap_conn is not None:
            self._bootstrap_conn.close()
        self._conns.clear()

    async def _metadata_loop(self) -> None:
        max_age = self.config["metadata.max.age.ms"] / 1000
        while not self._closed:
            age = time.monotonic() - self.cluster.last_refresh
            if self._new_topics:
                wait = 0.0  # new topics are looked up at once, as Kafka's clients do
            elif self._need_update:
                wait = max(0.0, self.retry_backoff - age)
            else:
                wait = max(0.0, max_age - age)
            if wait > 0:
                self._update_wanted.clear()
                try:  # asyncio.timeout keeps a cancellation that races the wake-up (3.11)
                    async with asyncio.timeout(wait):
                        await self._update_wanted.wait()
                except TimeoutError:
                    pass
                continue
            try:
                await self.refresh_metadata()
            except KafkaError as e:
                log.debug("metadata refresh failed: %s", e)
                await asyncio.sleep(self.retry_backoff)

    # --- topics the owner cares about ---

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track more topics; True when some were new (a refresh has been requested)."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self._new_topics = True
            self.request_update()
        return bool(new)

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self._topics:
            self._new_topics = self._new_topics or bool(topics - self._topics)
            self._topics = topics
            self.request_update()

    def track_all_topics(self, on: bool = True) -> None:
        self._all_topics = on
        self.request_update()

    def request_update(self) -> None:
        """Ask for a metadata refresh soon (after retry.backoff.ms since the last one)."""
        self._need_update = True
        self._update_wanted.set()

    # --- connections ---

    def _backoff_for(self, node_id: int) -> _Backoff:
        b = self._backoff.get(node_id)
        if b is None:
            b = self._backoff[node_id] = _Backoff()
        return b

    def _note_failure(self, node_id: int) -> None:
        b = self._backoff_for(node_id)
        b.failures += 1
        base = self.config["reconnect.backoff.ms"] / 1000
        cap = self.config["reconnect.backoff.max.ms"] / 1000
        delay = min(cap, base * (2 ** (b.failures - 1)))
        b.until = time.monotonic() + delay * random.uniform(0.8, 1.2)

    def ready(self, node_id: int) -> bool:
        c = self._conns.get(node_id)
        return c is not None and c.connected

    def connection_nowait(self, node_id: int) -> BrokerConnection | None:
        c = self._conns.get(node_id)
        return c if c is not None and c.connected else None

    async def connection(self, node_id: int) -> BrokerConnection:
        """A live connection to ``node_id`` (connecting, after any backoff, if needed)."""
        c = self._conns.get(node_id)
        if c is not None and c.connected:
            return c
        task = self._connecting.get(node_id)
        if task is None:
            task = spawn(self._open(node_id))
            self._connecting[node_id] = task
        return await asyncio.shield(task)

    def connection_options(self, node_id: int) -> ConnectionOptions:
        """This client's settings for a new connection to ``node_id`` (-1: a bootstrap server),
        of either kind (:class:`BrokerConnection`, :class:`~gregor.client.core.blocking.BlockingConnection`)."""
        return ConnectionOptions(
            node_id=node_id,
            client_id=self.client_id,
            request_timeout_ms=self.config["request.timeout.ms"],
            connect_timeout_ms=self.config["socket.connection.setup.timeout.ms"],
            ssl_context=self._ssl_context,
            sasl=self._sasl,
        )

    async def _open(self, node_id: int) -> BrokerConnection:
        try:
            b = self._backoff_for(node_id)
            delay = b.until - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            broker = self.cluster.brokers.get(node_id)
            if broker is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
            conn = BrokerConnection(broker.host, broker.port, **self.connection_options(node_id))
            try:
                await conn.connect()
            except KafkaError:
                self._note_failure(node_id)
                self.request_update()
                raise
            b.failures = 0
            self._conns[node_id] = conn
            return conn
        finally:
            self._connecting.pop(node_id, None)

    async def any_connection(self) -> BrokerConnection:
        """The least loaded live connection, or a new one to a known or bootstrap broker."""
        live = [c for c in self._conns.values() if c.connected]
        if live:
            return min(live, key=lambda c: c.in_flight)
        nodes = list(self.cluster.brokers)
        random.shuffle(nodes)
        for node_id in nodes:
            if self._backoff_for(node_id).until > time.monotonic():
                continue
            try:
                return await self.connection(node_id)
            except KafkaError:
                continue
        return await self._bootstrap_connection()

    async def _bootstrap_connection(self) -> BrokerConnection:
        c = self._bootstrap_conn
        if c is not None and c.connected:
            return c
        errors = []
        servers = list(self._bootstrap)
        random.shuffle(servers)
        for host, port in servers:
            conn = BrokerConnection(host, port, **self.connection_options(-1))
            try:
                await conn.connect()
            except SaslAuthenticationFailedError:
                raise  # the credentials are refused: another server will not take them either
            except KafkaError as e:
                errors.append(str(e))
                continue
            self._bootstrap_conn = conn
            return conn
        raise NoBrokersAvailableError("; ".join(errors) or "no bootstrap servers")

    async def send(
        self,
        node_id: int,
        message: Message,
        version: int | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """Send to ``node_id`` (connecting if needed); the response, of the request's API's
        response class (see :meth:`BrokerConnection.send`)."""
        conn = await self.connection(node_id)
        return await conn.send(message, version, timeout=timeout)

    async def with_retries(
        self, fn: Callable[[], Awaitable[T]], *, timeout: float | None = None
    ) -> T:
        """Run ``await fn()`` until it succeeds, retrying retriable errors until ``timeout``."""
        deadline = time.monotonic() + (
            self.config["default.api.timeout.ms"] / 1000 if timeout is None else timeout
        )
        attempt = 0
        while True:
            try:
                return await fn()
            except KafkaError as e:
                if not e.retriable or time.monotonic() >= deadline:
                    raise
                attempt += 1
                if isinstance(e, KafkaConnectionError) or getattr(e, "code", 0) in STALE_METADATA:
                    self.request_update()
                await asyncio.sleep(min(self.retry_backoff * (2 ** min(attempt, 4)), 1.0))

    # --- metadata ---

    async def refresh_metadata(self) -> None:
        """Refresh the tracked topics' metadata (coalescing concurrent calls)."""
        task = self._refresh
        if task is None or task.done():
            task = self._refresh = spawn(self._do_refresh())
        await asyncio.shield(task)

    async def _do_refresh(self) -> None:
        self._need_update = False
        self._new_topics = False
        topics = None if self._all_topics else sorted(self._topics)
        try:
            await self.fetch_metadata(
                topics, allow_auto_create=self.config["allow.auto.create.topics"]
            )
        except BaseException:
            self._need_update = True
            raise

    async def fetch_metadata(
        self, topics: list[str] | None, *, allow_auto_create: bool = False, update: bool = True
    ) -> MetadataResponse:
        """Send one Metadata request (None = all topics) and apply it to ``cluster``."""
        conn = await self.any_connection()
        version = conn.version(MetadataRequest.API_KEY)
        req = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.Topics(name=t) for t in topics],
            allow_auto_topic_creation=allow_auto_create,
        )
        if topics is None and version == 0:
            req.topics = []
        resp: MetadataResponse = await conn.send(req, version)
        if update:
            errors = self.cluster.update(resp, topics)
            if any(code in STALE_METADATA for code in errors.values()):
                self._need_update = True
            for t in self.cluster.topics.values():
                if any(p.leader < 0 for p in t.partitions.values()):
                    self._need_update = True
            self.metadata_updated.set()
            self.metadata_updated = asyncio.Event()
            for fn in list(self.listeners):
                fn()
        return resp

    async def wait_for_metadata(self, topic: str, timeout: float) -> list[int]:
        """The topic's partitions, refreshing until it is known or ``timeout`` passes."""
        deadline = time.monotonic() + timeout
        self.add_topics([topic])
        while True:
            parts = self.cluster.partitions_for(topic)
            if parts:
                return parts
            try:
                await self.refresh_metadata()
            except KafkaError as e:
                if not e.retriable:
                    raise
            parts = self.cluster.partitions_for(topic)
            if parts:
                return parts
            code = self.cluster.topic_errors.get(topic)
            if code in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_TOPIC_EXCEPTION):
                raise error_for_code(code)(topic)  # no refresh will change it, as Kafka's producer
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"topic {topic!r} not present in metadata after {timeout:.1f}s"
                )
            await asyncio.sleep(self.retry_backoff)

    async def find_coordinator(self, key: str, key_type: int = 0) -> int:
        """The node id of the group (key_type 0) or transaction (1) coordinator for ``key``."""
        conn = await self.any_connection()
        version = conn.version(FindCoordinatorRequest.API_KEY)
        if version >= 4:
            req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        else:
            req = FindCoordinatorRequest(key=key, key_type=key_type)
        resp: FindCoordinatorResponse = await conn.send(req, version)
        if version >= 4:
            c = resp.coordinators[0]
            code, msg, node_id, host, port = (
                c.error_code,
                c.error_message,
                c.node_id,
                c.host,
                c.port,
            )
        else:
            code, msg, node_id, host, port = (
                resp.error_code,
                resp.error_message,
                resp.node_id,
                resp.host,
                resp.port,
            )
        if code:
            raise error_for_code(code)(msg)
        known = self.cluster.brokers.get(node_id)
        if known is None or (known.host, known.port) != (host, port):
            from gregor.client.core.metadata import BrokerMetadata

            self.cluster.brokers[node_id] = BrokerMetadata(node_id, host, port)
        return node_id
