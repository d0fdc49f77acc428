"""Kafka's start-up checks of the group coordinator's settings (GroupCoordinatorConfig,
ShareGroupConfig), in its order and words; no state. ``BrokerConfig`` turns the
``ValueError`` into its ``ConfigError``."""

from __future__ import annotations

from collections.abc import Mapping


def check_group_bounds(v: Mapping[str, int]) -> None:
    """Each default within its bounds, the bounds in order, the heartbeat interval below the
    session timeout; raises ``ValueError`` with Kafka's message at the first that is not."""

    def require(ok: bool, message: str) -> None:
        if not ok:
            raise ValueError(message)

    def at_least(a: str, b: str) -> None:
        require(v[a] >= v[b], f"{a} must be greater than or equal to {b}")

    def at_most(a: str, b: str) -> None:
        require(v[a] <= v[b], f"{a} must be less than or equal to {b}")

    for kind in ("consumer", "share"):
        heartbeat, session = (
            f"group.{kind}.heartbeat.interval.ms",
            f"group.{kind}.session.timeout.ms",
        )
        for value, low, high in (
            (
                heartbeat,
                f"group.{kind}.min.heartbeat.interval.ms",
                f"group.{kind}.max.heartbeat.interval.ms",
            ),
            (
                session,
                f"group.{kind}.min.session.timeout.ms",
                f"group.{kind}.max.session.timeout.ms",
            ),
        ):
            at_least(high, low)
            at_least(value, low)
            at_most(value, high)
        require(v[heartbeat] < v[session], f"{heartbeat} must be less than {session}")
    at_least("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms")
    at_least("group.share.max.record.lock.duration.ms", "group.share.record.lock.duration.ms")
