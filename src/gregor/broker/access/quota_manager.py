"""Enforcing client quotas: what a produce, a fetch, a request's handling time, a topic
mutation or a new connection costs its client.

Theory of operation. For each request that carries client data (produce: the record bytes
sent; a consumer's fetch: the record bytes returned; a follower's fetch is never counted) the
handler asks ``throttle_ms(key, principal, client_id, size)``. The quota is looked up in the
current metadata image (KIP-55's order, ``security.quotas.resolve``); with none, nothing is
counted and the answer is 0. Otherwise the bytes are added to the ``Rate`` of the entity that
matched (all clients an entity covers share it) and the throttle time that rate earns is
returned: the handler puts it in the response's throttle_time_ms (a throttled fetch answers
with no data and takes its bytes back, as Kafka's does) and the dispatcher holds the
connection for that long (KIP-219: after the answer for new request versions, before it for
old ones). Rates of entities nobody has used for a whole window span are dropped.

The other three quotas work the same way on other measures:

- ``request_percentage``: the dispatcher times each request's handling (the handler's own
  steps on the event loop, not its waits, plus encoding the answer) and records it as a
  percentage of one second; over the quota, the answer carries the throttle time and the
  connection is held. Requests on the inter-broker listener are exempt.
- ``controller_mutation_rate`` (KIP-599): CreateTopics, CreatePartitions and DeleteTopics ask
  ``mutation_quota``; partitions created or deleted are spent from the entity's
  ``TokenBucket``. From CreateTopics v6, CreatePartitions v3 and DeleteTopics v5 (strict) a
  topic asked for once the bucket is negative gets THROTTLING_QUOTA_EXCEEDED; older versions
  are never refused, only throttled.
- ``connection_creation_rate`` (KIP-612), per IP (the ``ip`` entity of the address, else the
  default ip): each accepted connection counts; one over the rate is not counted, takes no
  request and is closed once its throttle time has passed, as Kafka closes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from gregor.security.quotas import (
    CONNECTION_CREATION_RATE,
    CONTROLLER_MUTATION_RATE,
    IP,
    QuotaEntity,
    Rate,
    TokenBucket,
    resolve,
)


def user_of(principal: str) -> str:
    """The quota user of a principal: ``User:alice`` -> ``alice``; ``User:ANONYMOUS`` too."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class QuotaManager:
    def __init__(
        self,
        quotas: Callable[[], Mapping[QuotaEntity, Mapping[str, float]]],
        samples: int = 11,
        window_s: float = 1.0,
    ) -> None:
        self._quotas = quotas
        self.samples = samples
        self.window_s = window_s
        self._rates: dict[tuple[str, QuotaEntity], Rate] = {}
        self._buckets: dict[QuotaEntity, TokenBucket] = {}
        self._used: dict[tuple[str, QuotaEntity], float] = {}
        self._next_sweep = 0.0
        self._keys_for: object = None
        self._keys: frozenset[str] = frozenset()

    @property
    def active(self) -> bool:
        """Is any client quota set? Without one, callers need not even count bytes."""
        return bool(self._quotas())

    def has(self, key: str) -> bool:
        """Does any entity set ``key``? (Computed once per set of quotas.)"""
        quotas = self._quotas()
        if quotas is not self._keys_for:
            self._keys = frozenset(k for values in quotas.values() for k in values)
            self._keys_for = quotas
        return key in self._keys

    def _rate(self, metric: tuple[str, QuotaEntity], now: float) -> Rate:
        rate = self._rates.get(metric)
        if rate is None:
            rate = self._rates[metric] = Rate(self.samples, self.window_s)
        self._used[metric] = now
        if now >= self._next_sweep:
            self._sweep(now)
        return rate

    def throttle_ms(
        self,
        key: str,
        principal: str,
        client_id: str | None,
        size: float,
        *,
        count_if_throttled: bool = True,
    ) -> int:
        """The throttle time ``size`` more bytes earn (0 without a quota). With
        ``count_if_throttled=False`` bytes that earn a throttle are taken back: the caller
        answers without them (a throttled fetch returns no data, as in Kafka)."""
        quotas = self._quotas()
        if not quotas:
            return 0
        found = resolve(quotas, user_of(principal), client_id or "", key)
        if found is None:
            return 0
        now = time.monotonic()
        rate = self._rate((key, found.metric_key), now)
        rate.record(size, now)
        throttle = rate.throttle_ms(found.limit, now)
        if throttle and not count_if_throttled:
            rate.record(-size, now)
        return throttle

    def mutation_quota(
        self, principal: str, client_id: str | None, strict: bool
    ) -> MutationQuota | None:
        """The controller mutation quota of this client, None when it has none."""
        quotas = self._quotas()
        if not quotas:
            return None
        found = resolve(quotas, user_of(principal), client_id or "", CONTROLLER_MUTATION_RATE)
        if found is None:
            return None
        bucket = self._buckets.get(found.metric_key)
        if bucket is None:
            bucket = self._buckets[found.metric_key] = TokenBucket(self.samples, self.window_s)
        return MutationQuota(bucket, found.limit, strict)

    def connection_throttle_ms(self, ip: str) -> int:
        """A new connection from ``ip``: 0 (counted) or the throttle time (not counted: the
        connection is refused)."""
        quotas = self._quotas()
        if not quotas:
            return 0
        values = quotas.get(((IP, ip),)) or {}
        limit = values.get(CONNECTION_CREATION_RATE)
        if limit is None:
            limit = (quotas.get(((IP, None),)) or {}).get(CONNECTION_CREATION_RATE)
        if limit is None:
            return 0
        now = time.monotonic()
        rate = self._rate((CONNECTION_CREATION_RATE, ((IP, ip),)), now)
        rate.record(1, now)
        throttle = rate.throttle_ms(limit, now)
        if throttle:
            rate.record(-1, now)
        return throttle

    def _sweep(self, now: float) -> None:
        span = self.samples * self.window_s
        for metric, used in list(self._used.items()):
            if now - used > span:
                del self._used[metric]
                self._rates.pop(metric, None)
        self._next_sweep = now + span


class MutationQuota:
    """One request's view of its client's controller mutation bucket."""

    __slots__ = ("_bucket", "_limit", "strict")

    def __init__(self, bucket: TokenBucket, limit: float, strict: bool) -> None:
        self._bucket = bucket
        self._limit = limit
        self.strict = strict

    def refused(self) -> bool:
        """Strict requests: is the bucket already negative? (Then the topic is refused.)"""
        return self.strict and self._bucket.exceeded(self._limit)

    def record(self, partitions: int) -> None:
        self._bucket.record(partitions, self._limit)

    def throttle_ms(self) -> int:
        return self._bucket.throttle_ms(self._limit)
