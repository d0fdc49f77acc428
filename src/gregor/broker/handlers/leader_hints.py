"""KIP-951: where a partition's leader moved, sent with NOT_LEADER_OR_FOLLOWER and
FENCED_LEADER_EPOCH in Produce (v10+) and Fetch (v16+) responses, so a client goes to the
new leader without a Metadata round trip first.

``LeaderHints`` collects, per partition that failed so, the image's (leader id, leader epoch)
and, for the response's NodeEndpoints, the leaders' addresses on the listener the request
came in on.
"""

from __future__ import annotations

from gregor.broker.state import RequestContext
from gregor.protocol.errors import ErrorCode

HINTED_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


class LeaderHints:
    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx
        self.leaders: set[int] = set()

    def leader(self, topic: str, index: int, error: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) to send with ``error`` for this partition, or None."""
        if error not in HINTED_ERRORS:
            return None
        p = self.ctx.broker.image.partition(topic, index)
        if p is None or p.leader < 0:
            return None
        self.leaders.add(p.leader)
        return p.leader, p.leader_epoch

    def endpoints(self) -> list[tuple[int, str, int, str | None]]:
        """(node id, host, port, rack) of each hinted leader on this request's listener."""
        if not self.leaders:
            return []
        return [
            (node, e.host, e.port, rack)
            for node, e, rack in self.ctx.broker.endpoints(self.ctx.conn.listener)
            if node in self.leaders
        ]
