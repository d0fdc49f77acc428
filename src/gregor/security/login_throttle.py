"""What logging in over HTTP may cost the cluster: ``LoginThrottle``.

Each login the console or the schema registry checks opens a Kafka connection and a SASL
exchange (for SCRAM, thousands of hash rounds on the broker), so a stranger must not be able to
ask for many. The throttle allows a fixed number of logins in progress at once (``begin`` /
``end``) and gives each client address a token bucket of ``attempts`` per ``window_s``
(``admit``); it remembers at most ``MAX_ADDRESSES`` addresses, the least recently seen
forgotten first, so its own memory is bounded too. ``clock`` is a monotonic clock in seconds
(a test may pass its own). Not thread-safe: one event loop owns it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

MAX_ADDRESSES = 4096

Clock = Callable[[], float]


class LoginThrottle:
    def __init__(
        self, attempts: int, window_s: float, concurrent: int, clock: Clock = time.monotonic
    ) -> None:
        self.capacity = float(attempts)
        self.rate = attempts / window_s
        self.concurrent = concurrent
        self.in_progress = 0
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # (tokens, at)

    def admit(self, address: str) -> float:
        """Take one attempt from ``address``'s bucket: 0.0 when allowed, else the seconds until
        the next one is."""
        now = self.clock()
        tokens, at = self._buckets.pop(address, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - at) * self.rate)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets[address] = (tokens, now)
        while len(self._buckets) > MAX_ADDRESSES:
            self._buckets.popitem(last=False)
        return 0.0 if allowed else (1.0 - tokens) / self.rate

    def begin(self) -> bool:
        """A slot for one login in progress (False: all are taken); ``end()`` gives it back."""
        if self.in_progress >= self.concurrent:
            return False
        self.in_progress += 1
        return True

    def end(self) -> None:
        self.in_progress -= 1
