"""Bug: a follower never truncates its log after a leader change (the fetcher's truncation to
the leader's epoch end offset is skipped), so a former leader keeps the writes only it had and
fetches the new leader's records after them. When it leads again, readers see other values at
offsets they read before (inconsistent offsets) and acknowledged writes vanish."""

from __future__ import annotations

from gregor.broker.replication.partition import Partition
from gregor.broker.replication.replica_fetcher import LeaderFetcher

DESCRIPTION = "a follower skips truncation after a leader change"
NEMESIS = ("isolate", "kill")


def inject() -> None:
    truncate_log = LeaderFetcher._truncate_log

    def keep_log(p: Partition, offset: int) -> None:
        if p.topic.startswith("__"):
            truncate_log(p, offset)

    LeaderFetcher._truncate_log = staticmethod(keep_log)  # type: ignore[method-assign]
