"""Enforcing client byte-rate quotas: what a produce or fetch costs its client.

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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from gregor.security.quotas import QuotaEntity, Rate, resolve


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
        self._used: dict[tuple[str, QuotaEntity], float] = {}
        self._next_sweep = 0.0

    @property
    def active(self) -> bool:
        """Is any client quota set? Without one, callers need not even count bytes."""
        return bool(self._quotas())

    def throttle_ms(
        self, key: str, principal: str, client_id: str | None, size: int, *, count_if_throttled: bool = True
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
        metric = (key, found.metric_key)
        rate = self._rates.get(metric)
        if rate is None:
            rate = self._rates[metric] = Rate(self.samples, self.window_s)
        rate.record(size, now)
        self._used[metric] = now
        if now >= self._next_sweep:
            self._sweep(now)
        throttle = rate.throttle_ms(found.limit, now)
        if throttle and not count_if_throttled:
            rate.record(-size, now)
        return throttle

    def _sweep(self, now: float) -> None:
        span = self.samples * self.window_s
        for metric, used in list(self._used.items()):
            if now - used > span:
                del self._used[metric]
                self._rates.pop(metric, None)
        self._next_sweep = now + span
