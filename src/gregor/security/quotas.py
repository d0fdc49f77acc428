"""Client quotas: which entities and keys exist, how a client's quota is found, and the
throttle time a rate over its quota earns (Kafka's ClientQuotaManager, KIP-13/55/219).

Entities. A quota entity is a set of (type, name) pairs, ``name`` None for the type's default:
``user`` and/or ``client-id`` (byte rates, request percentage, controller mutation rate), or
``ip`` alone (connection creation rate). It is kept as a tuple sorted by type
(``QuotaEntity``). ``validate_entity`` and ``validate_value`` give Kafka's INVALID_REQUEST
messages.

Resolution (KIP-55). For a request from (user, client-id) the quota of a key is the first
entity that sets it, in this order: (user, client-id), (user, default client-id), user,
(default user, client-id), (default user, default client-id), default user, client-id,
default client-id. The entity found is also the one whose traffic is counted: every client
the same entity covers shares one rate (``QuotaResolution.metric_key``).

Rate and throttle (``Rate``). Bytes are counted in ``samples`` windows of ``window_s`` seconds
(Kafka's quota.window.num=11 and quota.window.size.seconds=1). The rate is the total over the
windows kept, divided by the time they cover (at least ``samples - 1`` whole windows, so a
first burst is not measured over a few milliseconds). Over the quota, the throttle is the time
for the rate to fall back to the quota: (rate - quota) / quota x that span, in ms. The same
``Rate`` measures request time (``request_percentage``: seconds of handling x 100 per second)
and new connections per IP (``connection_creation_rate``).

Controller mutations (KIP-599, ``TokenBucket``). ``controller_mutation_rate`` is partitions
created or deleted per second, spent from a bucket that holds ``quota x samples x window_s``
tokens and refills at ``quota`` a second. A mutation is allowed while the bucket is not
negative, and may take it below zero; the throttle is then the time to refill to zero.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: key -> value type, per kind of entity (Kafka's QuotaConfigs).
CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: "long",
    CONSUMER_BYTE_RATE: "long",
    REQUEST_PERCENTAGE: "double",
    CONTROLLER_MUTATION_RATE: "double",
}
IP_KEYS = {CONNECTION_CREATION_RATE: "int"}

QuotaEntity = tuple[tuple[str, "str | None"], ...]

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


class QuotaError(ValueError):
    """Kafka's INVALID_REQUEST for a quota entity or value, with its message."""


def entity_of(pairs: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    """The canonical entity for ``pairs``; QuotaError for an empty one or a type twice."""
    if not pairs:
        raise QuotaError("Invalid empty client quota entity")
    types = [t for t, _ in pairs]
    if len(set(types)) != len(types):
        raise QuotaError(
            f"Duplicate {next(t for t in types if types.count(t) > 1)} entity type in the request"
        )
    return tuple(sorted((str(t), None if n is None else str(n)) for t, n in pairs))


def validate_entity(entity: QuotaEntity) -> Mapping[str, str]:
    """The keys the entity may set (key -> type), or QuotaError with Kafka's message."""
    types = {t for t, _ in entity}
    unknown = types - set(ENTITY_TYPES)
    if unknown:
        raise QuotaError(f"Unhandled client quota entity type: {sorted(unknown)[0]}")
    if IP in types:
        if len(types) > 1:
            raise QuotaError(
                "Invalid quota entity combination, IP entity should not be combined with User or ClientId"
            )
        name = dict(entity)[IP]
        if name is not None:
            try:
                ipaddress.ip_address(name)
            except ValueError:
                raise QuotaError(f"{name} is not a valid IP or resolvable host.") from None
        return IP_KEYS
    return CLIENT_KEYS


def validate_value(keys: Mapping[str, str], key: str, value: float) -> None:
    kind = keys.get(key)
    if kind is None:
        raise QuotaError(f"Invalid configuration key {key}")
    if not value > 0 or math.isinf(value):
        raise QuotaError(f"Quota {key} must be greater than 0")
    if kind == "int" and value > _INT_MAX:
        raise QuotaError(f"Proposed value for {key} is too large for an INT.")
    if kind == "long" and value > _LONG_MAX:
        raise QuotaError(f"Proposed value for {key} is too large for a LONG.")
    if kind in ("int", "long") and value != int(value):
        raise QuotaError(f"Proposed value for {key} must be a whole number.")


def matches(
    entity: QuotaEntity, components: Sequence[tuple[str, int, str | None]], strict: bool
) -> bool:
    """DescribeClientQuotas' filter: each component (type, match type, match) must hold for the
    entity (0: that name, 1: the default, 2: any name but the default); ``strict`` also wants
    no other type in the entity."""
    names = dict(entity)
    for etype, match_type, match in components:
        if etype not in names:
            return False
        name = names[etype]
        if match_type == 0 and name != match:
            return False
        if match_type == 1 and name is not None:
            return False
        if match_type == 2 and name is None:
            return False
    return not strict or len(names) == len(components)


@dataclass(frozen=True)
class QuotaResolution:
    """A client's quota for one key: the limit and the entity whose traffic counts against it."""

    limit: float
    metric_key: QuotaEntity


def resolve(
    quotas: Mapping[QuotaEntity, Mapping[str, float]], user: str, client_id: str, key: str
) -> QuotaResolution | None:
    """The quota of ``key`` for (user, client-id), KIP-55's order; None when no entity sets it."""
    if not quotas:
        return None
    order: tuple[QuotaEntity, ...] = (
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    )
    for entity in order:
        values = quotas.get(entity)
        if values is not None and key in values:
            # The metric is per matched entity, with the default names filled in by the client's.
            metric = tuple((t, user if t == USER else client_id) for t, _ in entity)
            return QuotaResolution(values[key], metric)
    return None


class Rate:
    """Bytes per second over ``samples`` windows of ``window_s`` seconds."""

    __slots__ = ("samples", "window_s", "_windows")

    def __init__(self, samples: int = 11, window_s: float = 1.0) -> None:
        self.samples = samples
        self.window_s = window_s
        self._windows: list[list[float]] = []  # [start, amount], oldest first

    def record(self, amount: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        w = self._windows
        if not w or now - w[-1][0] >= self.window_s:
            w.append([now, 0.0])
            del w[: max(0, len(w) - self.samples)]
        w[-1][1] += amount

    def _measured(self, now: float) -> tuple[float, float]:
        """(bytes, seconds) over the windows still kept; the span is at least samples - 1 windows."""
        w = [x for x in self._windows if now - x[0] < self.samples * self.window_s]
        if not w:
            return 0.0, self.window_s
        # (never zero: one window of one sample may have just begun)
        return sum(x[1] for x in w), max(now - w[0][0], (self.samples - 1) * self.window_s, 0.001)

    def rate(self, now: float | None = None) -> float:
        total, span = self._measured(time.monotonic() if now is None else now)
        return total / span if total else 0.0

    def throttle_ms(self, limit: float, now: float | None = None) -> int:
        """How long the client waits for the rate to come back to ``limit``; 0 when within it."""
        total, span = self._measured(time.monotonic() if now is None else now)
        rate = total / span if total else 0.0
        if rate <= limit:
            return 0
        cap = self.samples * self.window_s * 1000  # Kafka's longest throttle: the whole window
        return int(min((rate - limit) / limit * span * 1000, cap))


class TokenBucket:
    """Kafka's token bucket for controller mutations (KIP-599); the limit is given per call,
    so a changed quota applies at once."""

    __slots__ = ("samples", "window_s", "_tokens", "_last")

    def __init__(self, samples: int = 11, window_s: float = 1.0) -> None:
        self.samples = samples
        self.window_s = window_s
        self._tokens: float | None = None  # full on first use
        self._last = 0.0

    def _refill(self, limit: float, now: float) -> float:
        burst = limit * self.samples * self.window_s
        if self._tokens is None:
            self._tokens = burst
        else:
            self._tokens = min(burst, self._tokens + limit * max(0.0, now - self._last))
        self._last = now
        return self._tokens

    def exceeded(self, limit: float, now: float | None = None) -> bool:
        return self._refill(limit, time.monotonic() if now is None else now) < 0

    def record(self, amount: float, limit: float, now: float | None = None) -> None:
        self._refill(limit, time.monotonic() if now is None else now)
        assert self._tokens is not None
        self._tokens -= amount

    def throttle_ms(self, limit: float, now: float | None = None) -> int:
        """The time until the bucket is back at zero; 0 when it is not negative."""
        tokens = self._refill(limit, time.monotonic() if now is None else now)
        return 0 if tokens >= 0 else math.ceil(-tokens / limit * 1000)
