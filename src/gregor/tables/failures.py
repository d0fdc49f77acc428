"""How the table service says that something it retries keeps failing.

Theory of operation. The translators, the table opener and the maintenance pass retry a failed
step (the catalog or the warehouse may come back: an object store that is down, a commit that
lost a race). A warehouse that stays unreachable would otherwise write the same traceback to the
log every second. A :class:`RepeatedFailure` (one per retrying loop) logs a failure's traceback
the first time its kind of error (the exception's type: a message names a new file each time)
is seen; while that kind repeats it logs one line, with the count and the latest message, on
the 2nd, 4th, 8th, ... attempt and then every ``every`` attempts; another kind is logged in
full again; and the first success after failures says how many attempts it took. Nothing is
retried more or less often than before: only the log changes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field


@dataclass
class RepeatedFailure:
    """The failures of one retrying loop (``what``: what it does, for the log lines)."""

    log: logging.Logger
    what: str
    every: int = 64
    failures: int = 0
    _error: type[BaseException] | None = field(default=None, repr=False)
    _same: int = 0

    def failed(self, error: BaseException) -> None:
        """Log ``error`` (raised by the loop's step) as this policy says."""
        self.failures += 1
        key = type(error)
        if key is not self._error:
            self._error, self._same = key, 1
            self.log.error("%s failed; trying again", self.what, exc_info=error)
            return
        self._same += 1
        n = self._same
        if (n & (n - 1) == 0 and n <= self.every) or n % self.every == 0:
            self.log.warning(
                "%s failed again (%d times in a row): %s: %s; trying again",
                self.what,
                n,
                type(error).__name__,
                error,
            )

    def succeeded(self) -> None:
        """The step worked: say so once if it had been failing."""
        if self.failures:
            self.log.warning("%s works again after %d failed attempts", self.what, self.failures)
        self.failures, self._error, self._same = 0, None, 0
