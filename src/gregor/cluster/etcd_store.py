"""A metadata store in etcd, shared by every broker of a cluster (``metadata.store=etcd://...``).

Theory of operation.

Keys, all under the prefix of the ``etcd://`` URL (``etcd_url``):

- ``<prefix>/version``: the image version as decimal text: the compare-and-set token.
- ``<prefix>/image``: the durable image (cluster id, version, next producer id, every topic)
  as one JSON value, encoded by ``codec`` exactly as the file store encodes its file. One
  value, not one key per topic: every change is then one compare on one key, and a section
  added to the image (configs, credentials) needs nothing here. etcd's default value limit
  (1.5 MiB) holds thousands of topics.
- ``<prefix>/brokers/<node_id>``: a broker registration (``codec.encode_registration``),
  attached to this store's lease.
- ``<prefix>/controller``: ``{"node_id": n}``, attached to the lease of the store that
  registered broker ``n``: the elected controller. The revision that created the key is the
  controller epoch (``image.controller_epoch``): each election creates it anew, higher.

Changes: a change computes the new image from the current one with the pure functions of
``changes`` (so refusals are the same Kafka errors as in every store), then commits it in one
etcd transaction guarded by ``value(<prefix>/version) == current version``: put the new version
and image, and put or delete the registration keys the change adds or removes. When the
compare fails another writer got there first: the store reloads and computes the change again
on the newer image (optimistic concurrency), so concurrent writers in any number of processes
never lose an update, and producer-id blocks never overlap. A refusal computed on the local
image leaves etcd untouched. Changes of one store are serialised by an ``asyncio.Lock`` and run
in their own task (``shielded``): a cancelled caller does not leave the image behind etcd.

Registrations are ephemeral: they live on one lease per store, granted at start with
TTL = ``broker.session.timeout.ms`` (rounded up to whole seconds; etcd may raise it to its
minimum, 1.5 election timeouts) and kept alive every third of it. When the process dies (or
stops answering) the lease expires and etcd deletes its keys: the broker disappears from
every image. A store that finds its lease gone (it was paused past
the TTL) takes a new one and registers its brokers again. ``close()`` revokes the lease.

The session fence (``session_confirmed()``): the store keeps a local deadline, the monotonic
time the last successful keepalive (or lease grant) was *sent* plus the TTL etcd returned.
etcd counts the TTL from when it received the request, so its expiry is at or after that
deadline: before it, etcd surely still holds the lease, this store's registrations are
live, and no other broker can have been given the partitions this one leads; after it, all
of that may have happened without this store hearing of it (cut off from etcd, or paused).
So ``session_confirmed()`` is False from the deadline on, and once a keepalive answers again
(or a new lease is granted) it stays False until the image has been reloaded by a read
issued after that answer: a broker that was cut off serves again only from an image at least
as new as its session. The coordinators answer NOT_COORDINATOR while it is False, instead of
serving committed offsets, groups or transactions from a cache that may be stale (seed 109's
committed-offset regression). Kafka's brokers have no such fence: a KRaft broker fenced by
the controller keeps serving its coordinators until it replays the metadata that moved them.

Controller election: registering an unfenced broker also creates ``<prefix>/controller`` for
it, in the same transaction, when no controller key exists (a nested transaction: compare
create_revision == 0). The first broker to register is controller until its lease ends or it
unregisters; then each store that holds a live registration campaigns the same way when its
watch sees the key deleted, and one wins. ``image.controller_id`` is the key's node id (-1
when there is none), not the lowest live id the local stores report.

Watching: a watch on the whole prefix marks the image stale; one task reloads everything under
the prefix at one revision (one range read), and when the result differs from the local image
swaps it and publishes a ``MetadataDelta`` to listeners and ``watch()`` streams, as if the
change had been made here. That is how a broker sees topics another broker created, brokers
that registered or expired, and a new controller. The store's own commits come back through
the watch too and reload to an equal image, so nothing is published twice. A registration
that expires, and a change of controller, do not change the durable ``version``: the delta of
such a change has ``image.version == previous.version``. If etcd becomes unreachable the watch
is set up again (after a short back-off) and the image reloaded once it answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any, TypeVar

import aetcd
from aetcd import transactions as txn

from gregor.cluster.codec import decode, decode_registration, encode, encode_registration
from gregor.cluster.etcd_url import EtcdTarget, parse_etcd_url
from gregor.cluster.image import EMPTY, BrokerRegistration, MetadataDelta, MetadataImage
from gregor.cluster.local_store import (
    ChangeMethods,
    DeltaStream,
    Listener,
    Subscribers,
    new_cluster_id,
    shielded,
)
from gregor.protocol.errors import InconsistentClusterIdError

__all__ = ["EtcdMetadataStore", "EtcdUnavailableError"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds an etcd call may take before it counts as failed (a paused or cut-off member).
CALL_TIMEOUT_S = 5
#: Back-off before the watch is set up again after etcd stopped answering.
RETRY_BACKOFF_S = 0.5
#: Attempts of one change when other writers keep winning the compare.
MAX_CONFLICTS = 100


class EtcdUnavailableError(RuntimeError):
    """etcd did not answer (at start: the broker cannot join its cluster and stops)."""


@dataclasses.dataclass(frozen=True)
class _Loaded:
    """What one range read of the prefix found."""

    image: MetadataImage
    exists: bool


class EtcdMetadataStore(ChangeMethods):
    """Metadata under a key prefix of an etcd cluster; see the module docstring."""

    def __init__(
        self,
        target: EtcdTarget | str,
        cluster_id: str | None = None,
        session_timeout_ms: int = 9000,
    ) -> None:
        self.target = parse_etcd_url(target) if isinstance(target, str) else target
        self._requested_cluster_id = cluster_id or None
        self.ttl_s = max(1, math.ceil(session_timeout_ms / 1000))
        p = self.target.prefix
        self._prefix = f"{p}/".encode()
        self._version_key = f"{p}/version".encode()
        self._image_key = f"{p}/image".encode()
        self._brokers_prefix = f"{p}/brokers/".encode()
        self._controller_key = f"{p}/controller".encode()
        self._client: aetcd.Client | None = None
        self._endpoint = 0
        self._lease_id = 0
        self._own: dict[int, BrokerRegistration] = {}
        self._image = EMPTY
        self._lock = asyncio.Lock()
        self._subscribers = Subscribers()
        self._stale = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._closed = False
        #: Monotonic time until which etcd surely holds the lease (see the module docstring).
        self._session_deadline = 0.0
        #: Set when the session lapsed and was confirmed again at this monotonic time: the
        #: image must be reloaded by a read issued after it before the session counts.
        self._resync_after: float | None = None

    # --- lifecycle, reading, listening ---

    @property
    def image(self) -> MetadataImage:
        return self._image

    def subscribe(self, listener: Listener) -> None:
        self._subscribers.subscribe(listener)

    def watch(self) -> DeltaStream:
        return self._subscribers.watch()

    def session_confirmed(self) -> bool:
        """True while etcd surely still holds this store's lease and the image is at least
        as new as the session (see the module docstring); one clock read."""
        return self._resync_after is None and time.monotonic() < self._session_deadline

    async def start(self) -> MetadataImage:
        async with self._lock:
            if self._closed:
                raise RuntimeError("metadata store is closed")
            if self._started:
                return self._image
            await self._connect()
            try:
                await self._initialise()
                await self._grant_lease()
            except (aetcd.ClientError, OSError) as e:
                await self._disconnect()
                raise EtcdUnavailableError(f"etcd at {self.target} did not answer: {e!r}") from e
            except BaseException:
                await self._disconnect()
                raise
            self._started = True
            self._tasks = [
                asyncio.create_task(self._watch_loop(), name="etcd-watch"),
                asyncio.create_task(self._reload_loop(), name="etcd-reload"),
                asyncio.create_task(self._keepalive_loop(), name="etcd-keepalive"),
            ]
            return self._image

    async def close(self) -> None:
        async with self._lock:
            if self._closed:
                return
            self._closed = True
            self._subscribers.end()
            await _cancel_and_wait(self._tasks)
            self._tasks.clear()
            if self._client is not None and self._lease_id:
                try:  # the registrations and a held controller key go now, not at expiry
                    await self._client.revoke_lease(self._lease_id)
                except (aetcd.ClientError, OSError) as e:
                    log.warning("could not revoke etcd lease %x: %r", self._lease_id, e)
            await self._disconnect()

    # --- etcd connection ---

    def _client_(self) -> aetcd.Client:
        if self._client is None:
            raise EtcdUnavailableError("not connected to etcd")
        return self._client

    async def _connect(self) -> None:
        """Connect to the first endpoint, from the current one on, that answers a read."""
        errors = []
        n = len(self.target.endpoints)
        for i in range(n):
            index = (self._endpoint + i) % n
            host, port = self.target.endpoints[index]
            client = aetcd.Client(host.strip("[]"), port, timeout=CALL_TIMEOUT_S)
            try:
                await client.get(self._version_key)
            except (aetcd.ClientError, OSError) as e:
                errors.append(f"{host}:{port}: {type(e).__name__}")
                await _close(client)
                continue
            old, self._client, self._endpoint = self._client, client, index
            if old is not None:
                await _close(old)
            return
        raise EtcdUnavailableError(
            f"metadata.store={self.target}: no etcd endpoint answered ({'; '.join(errors)})"
        )

    async def _disconnect(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await _close(client)

    # --- loading ---

    async def _initialise(self) -> None:
        """Create the image on first use (one writer wins), check the cluster id, load."""
        client = self._client_()
        cluster_id = self._requested_cluster_id or new_cluster_id()
        first = dataclasses.replace(EMPTY, cluster_id=cluster_id)
        await client.transaction(
            compare=[txn.Create(self._version_key) == 0],
            success=[
                txn.Put(self._version_key, b"0"),
                txn.Put(self._image_key, _dumps(encode(first))),
            ],
            failure=[],
        )
        loaded = await self._load()
        stored = loaded.image.cluster_id
        if self._requested_cluster_id and stored != self._requested_cluster_id:
            raise InconsistentClusterIdError(
                f"cluster.id {self._requested_cluster_id!r} does not match {stored!r} in "
                f"{self.target}"
            )
        self._image = loaded.image

    async def _load(self) -> _Loaded:
        """Everything under the prefix, read at one revision."""
        got = await self._client_().get_prefix(self._prefix)
        doc: dict[str, Any] | None = None
        brokers: dict[int, BrokerRegistration] = {}
        controller, controller_epoch = -1, 0
        for kv in got:
            key = bytes(kv.key)
            if key == self._image_key:
                doc = json.loads(kv.value)
            elif key == self._controller_key:
                controller = int(json.loads(kv.value)["node_id"])
                controller_epoch = int(kv.create_revision)
            elif key.startswith(self._brokers_prefix):
                reg = decode_registration(json.loads(kv.value))
                brokers[reg.node_id] = reg
        if doc is None:
            return _Loaded(dataclasses.replace(EMPTY, cluster_id=self._image.cluster_id), False)
        return _Loaded(
            dataclasses.replace(
                decode(doc),
                brokers=brokers,
                controller_id=controller,
                controller_epoch=controller_epoch,
            ),
            True,
        )

    # --- changes ---

    async def refresh(self) -> None:
        async with self._lock:
            if self._started and not self._closed:
                await self._reload_locked()

    async def _change(self, change: Callable[[MetadataImage], tuple[MetadataImage, T]]) -> T:
        return await shielded(self._apply(change))

    async def _apply(self, change: Callable[[MetadataImage], tuple[MetadataImage, T]]) -> T:
        async with self._lock:
            if self._closed:
                raise RuntimeError("metadata store is closed")
            if not self._started:
                raise RuntimeError("metadata store is not started")
            for _ in range(MAX_CONFLICTS):
                current = self._image
                image, result = change(current)
                try:
                    committed = await self._commit(current, image)
                except (
                    aetcd.exceptions.ConnectionFailedError,
                    aetcd.exceptions.ConnectionTimeoutError,
                ) as e:
                    # The member we talk to went away: move to one that answers (etcd's quorum
                    # carries on without it), reload (the commit may or may not have landed)
                    # and compute the change again.
                    log.warning(
                        "etcd member unreachable during a change (%r): moving to another", e
                    )
                    self._endpoint += 1
                    await self._connect()
                    await self._reload_locked()
                    continue
                except aetcd.ClientError as e:
                    if "lease not found" not in str(e):
                        raise
                    # Our lease ended before this change (the loop was busy past the TTL,
                    # at start say): take a new one and compute the change again.
                    self._session_lapsed()
                    await self._grant_lease()
                    log.warning("etcd lease expired before a change; took a new one")
                    await self._reload_locked()
                    continue
                if committed is not None:
                    self._swap(committed)
                    return result
                await self._reload_locked()  # someone else changed it first: again, on theirs
            raise EtcdUnavailableError(f"gave up after {MAX_CONFLICTS} conflicting writes")

    async def _commit(self, current: MetadataImage, image: MetadataImage) -> MetadataImage | None:
        """Write ``image`` if etcd still holds ``current``'s version; the image as committed
        (with the controller the transaction found or elected), or None on a conflict."""
        delta = MetadataDelta(current, image)
        ops: list[Any] = [
            txn.Put(self._version_key, str(image.version).encode()),
            txn.Put(self._image_key, _dumps(encode(image))),
        ]
        controller = current.controller_id
        own = dict(self._own)
        for node_id, reg in delta.changed_brokers.items():
            key = self._brokers_prefix + str(node_id).encode()
            if reg is None:
                ops.append(txn.Delete(key))
                own.pop(node_id, None)
                if node_id == controller:
                    # etcd refuses a put and a delete of one key in one transaction: the
                    # remaining brokers campaign after this commit (the reload does).
                    ops.append(txn.Delete(self._controller_key))
                    controller = -2
            else:
                ops.append(txn.Put(key, _dumps(encode_registration(reg)), lease=self._lease_id))
                own[node_id] = reg
        candidate = _lowest_live(own, image) if controller == -1 else None
        if candidate is not None:
            ops.append(self._campaign_op(candidate))
        ok, responses = await self._client_().transaction(
            compare=[txn.Value(self._version_key) == str(current.version).encode()],
            success=ops,
            failure=[],
        )
        if not ok:
            return None
        self._own = own
        epoch = current.controller_epoch
        if candidate is not None:
            nested = responses[-1].response_txn
            if nested.succeeded:
                controller = candidate
                epoch = int(nested.responses[1].response_range.kvs[0].create_revision)
            else:
                kvs = nested.responses[0].response_range.kvs
                controller = int(json.loads(kvs[0].value)["node_id"]) if kvs else -1
                epoch = int(kvs[0].create_revision) if kvs else 0
        elif controller == -2:
            controller = -1
            self._stale.set()
        return dataclasses.replace(
            image, controller_id=controller, controller_epoch=epoch if controller >= 0 else 0
        )

    def _campaign_op(self, node_id: int) -> txn.Txn:
        return txn.Txn(
            compare=[txn.Create(self._controller_key) == 0],
            success=[
                txn.Put(self._controller_key, _dumps({"node_id": node_id}), lease=self._lease_id),
                txn.Get(self._controller_key),  # its create revision: the controller epoch
            ],
            failure=[txn.Get(self._controller_key)],
        )

    def _swap(self, image: MetadataImage) -> None:
        delta = MetadataDelta(self._image, image)
        self._image = image
        self._subscribers.publish(delta)

    async def _reload_locked(self) -> None:
        issued = time.monotonic()
        loaded = await self._load()
        candidate = (
            _lowest_live(self._own, loaded.image) if loaded.image.controller_id == -1 else None
        )
        if loaded.exists and candidate is not None:
            await self._client_().transaction(
                compare=[], success=[self._campaign_op(candidate)], failure=[]
            )
            loaded = await self._load()
        if loaded.exists and loaded.image != self._image:
            self._swap(loaded.image)
        if self._resync_after is not None and issued >= self._resync_after:
            self._resync_after = None  # the image is as new as the session: serve again

    # --- background: watch, reload, keepalive ---

    async def _watch_loop(self) -> None:
        while not self._closed:
            try:
                watch = await self._client_().watch_prefix(self._prefix)
                if self._closed:  # a cancel that came as the watch was created may be lost
                    await watch.cancel()
                    return
                self._stale.set()  # whatever happened before the watch started
                async for _event in watch:
                    self._stale.set()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - etcd went away: watch again once it is back
                log.warning("etcd watch on %s ended: %r", self.target, e)
            await asyncio.sleep(RETRY_BACKOFF_S)
            if len(self.target.endpoints) > 1:
                await self._reconnect()  # one endpoint: gRPC reconnects the channel itself

    async def _reload_loop(self) -> None:
        while not self._closed:
            await self._stale.wait()
            self._stale.clear()
            try:
                async with self._lock:
                    if not self._closed:
                        await self._reload_locked()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - try again on the next event or retry
                log.warning("reloading metadata from etcd failed: %r", e)
                await asyncio.sleep(RETRY_BACKOFF_S)
                self._stale.set()

    async def _keepalive_loop(self) -> None:
        interval = self.ttl_s / 3
        while not self._closed:
            await asyncio.sleep(interval)
            try:
                sent, lease_id = time.monotonic(), self._lease_id
                reply = await self._client_().refresh_lease(lease_id)
                if lease_id != self._lease_id:
                    continue  # a change took a new lease meanwhile: this reply is about the old
                if reply is not None and reply.TTL <= 0:
                    self._session_lapsed()
                    await self._renew_lease()
                elif reply is not None:
                    self._session_confirmed_at(sent, int(reply.TTL))
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - etcd unreachable: the lease may expire
                log.warning("etcd lease keepalive failed: %r", e)

    async def _grant_lease(self) -> None:
        """Take a new lease; the session is confirmed from the request's send time on."""
        sent = time.monotonic()
        lease = await self._client_().lease(self.ttl_s)
        self._lease_id = int(lease.id)
        self._session_confirmed_at(sent, int(lease.ttl))

    def _session_lapsed(self) -> None:
        """etcd said the lease is gone: not confirmed until a new one is granted."""
        self._session_deadline = 0.0

    def _session_confirmed_at(self, sent: float, ttl_s: int) -> None:
        """etcd answered a keepalive or grant sent at ``sent`` with ``ttl_s``. If the session
        had lapsed before this answer, the image must be reloaded before it counts."""
        now = time.monotonic()
        if self._started and now >= self._session_deadline:
            self._resync_after = now
            self._stale.set()  # the reload loop reads the image again
            log.warning("etcd session confirmed again; serving once the image is reloaded")
        self._session_deadline = sent + ttl_s

    async def _renew_lease(self) -> None:
        """The lease expired (this process was paused or cut off past the session timeout):
        take a new one and register this store's brokers again."""
        await self._grant_lease()
        log.warning("etcd lease expired; registering %s again", sorted(self._own))
        async with self._lock:
            await self._reload_locked()  # the expired registrations are gone from the image
        for reg in list(self._own.values()):
            await self.register_broker(reg)

    async def _reconnect(self) -> None:
        async with self._lock:
            if self._closed:
                return
            try:
                await self._connect()
            except Exception as e:  # noqa: BLE001 - keep the current client; the next failure retries
                log.warning("reconnecting to etcd failed: %r", e)


async def _cancel_and_wait(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the background tasks and wait until they end. The cancel is sent again while any
    runs on: on Python 3.11 ``asyncio.wait_for`` (which aetcd awaits inside ``watch_prefix``)
    swallows a cancellation that arrives just as the awaited call completes, and the task
    would then wait on its watch forever."""
    pending = set(tasks)
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RETRY_BACKOFF_S)
    await asyncio.gather(*tasks, return_exceptions=True)  # all done: collects their outcomes


async def _close(client: aetcd.Client) -> None:
    """Close a client and its gRPC channel whatever state its watch stream is in (a channel
    left open would keep gRPC's poller bound to this event loop)."""
    channel = client.channel
    try:
        await client.close()
    except Exception as e:  # noqa: BLE001 - closing; the channel is closed below regardless
        log.debug("closing the etcd client: %r", e)
        if channel is not None:
            await channel.close()


def _lowest_live(own: dict[int, BrokerRegistration], image: MetadataImage) -> int | None:
    """The node a store campaigns for: its lowest unfenced registration present in ``image``."""
    live = [n for n, r in own.items() if not r.fenced and n in image.brokers]
    return min(live) if live else None


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
