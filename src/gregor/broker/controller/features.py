"""Feature flags (KIP-584): the levels this broker supports, the finalized levels and the rules
of UpdateFeatures.

Theory of operation. A feature is a name with an integer level. ``SUPPORTED`` is what this
broker can run at, advertised in ApiVersions (v3+) as supported features. The finalized levels
are cluster-wide and live in the metadata image (``image.features``, set by UpdateFeatures);
a feature the image has no entry for is at its ``default`` level, so a new cluster starts at
the defaults and every broker of a cluster reads the same levels. A finalized level of 0 means
the feature is off and is not listed among the finalized features, as Kafka lists them.

What follows the levels here: ``group.version`` 1 turns on the consumer group protocol
(KIP-848; at 0 ConsumerGroupHeartbeat and ConsumerGroupDescribe answer UNSUPPORTED_VERSION, as
Kafka does). ``metadata.version`` has no behaviour of its own in Gregor (the metadata store is
not Kafka's metadata log); it is kept with Kafka's levels and downgrade rules so tools that
read or set it work. ``share.version`` 1 turns share groups on (KIP-932; at 0 their APIs answer
UNSUPPORTED_VERSION). ``transaction.version`` (KIP-890) is 2 on a new cluster, as Kafka 4.x
formats one (``TransactionVersion.LATEST_PRODUCTION``): clients read the finalized level to
decide whether to speak the transaction protocol version 2 (EndTxn v5 with an epoch bump per
transaction, partitions added by the leaders); the transaction coordinator writes flexible
(version 1) ``__transaction_state`` values from level 1 and, at level 2, takes the version 2
path for the aborts it starts itself (fences and timeouts). What a client sends decides how
the coordinator treats that client's requests, whatever the level, as in Kafka. Levels 1 and 0
can be set back with a downgrade.

The names and ``metadata.version``'s levels are Kafka's (``protocol.features``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gregor.protocol.errors import InvalidUpdateVersionError
from gregor.protocol.features import (
    GROUP_VERSION,
    METADATA_CHANGED,
    METADATA_VERSION,
    SAFE_DOWNGRADE,
    SHARE_VERSION,
    TRANSACTION_VERSION,
    UNSAFE_DOWNGRADE,
    UPGRADE,
)

__all__ = [
    "GROUP_VERSION",
    "METADATA_VERSION",
    "SAFE_DOWNGRADE",
    "SHARE_VERSION",
    "SUPPORTED",
    "TRANSACTION_VERSION",
    "UNSAFE_DOWNGRADE",
    "UPGRADE",
    "FeatureUpdate",
    "SupportedFeature",
    "apply",
    "finalized",
    "level",
]


@dataclass(frozen=True, slots=True)
class SupportedFeature:
    name: str
    min_level: int
    max_level: int
    default: int


SUPPORTED: Mapping[str, SupportedFeature] = {
    f.name: f
    for f in (
        SupportedFeature(METADATA_VERSION, 7, 29, 29),
        SupportedFeature(GROUP_VERSION, 0, 1, 1),
        SupportedFeature(TRANSACTION_VERSION, 0, 2, 2),
        SupportedFeature(SHARE_VERSION, 0, 1, 1),
    )
}


def finalized(explicit: Mapping[str, int]) -> dict[str, int]:
    """Every feature's finalized level: the image's levels over the defaults."""
    levels = {name: f.default for name, f in SUPPORTED.items()}
    levels.update(explicit)
    return levels


def level(explicit: Mapping[str, int], name: str) -> int:
    if name in explicit:
        return explicit[name]
    feature = SUPPORTED.get(name)
    return feature.default if feature is not None else 0


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    feature: str
    max_version_level: int
    upgrade_type: int


def _refuse(message: str) -> InvalidUpdateVersionError:
    return InvalidUpdateVersionError(message)


def _check(update: FeatureUpdate, current: int) -> None:
    name, new = update.feature, update.max_version_level
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise _refuse(f"unknown upgrade type {update.upgrade_type} for feature {name}")
    if new < 0:
        raise _refuse(f"feature {name}: a level cannot be below 0, got {new}")
    supported = SUPPORTED.get(name)
    if supported is None:
        raise _refuse(f"feature {name} is not supported by this cluster")
    if new != 0 or supported.min_level > 0:
        if not supported.min_level <= new <= supported.max_level:
            raise _refuse(
                f"feature {name}: level {new} is outside the supported range "
                f"{supported.min_level}-{supported.max_level}"
            )
    if new < current and update.upgrade_type == UPGRADE:
        raise _refuse(
            f"feature {name}: lowering it from {current} to {new} needs the upgrade type "
            "safe or unsafe downgrade"
        )
    if new > current and update.upgrade_type != UPGRADE:
        raise _refuse(f"feature {name}: a downgrade cannot raise the level from {current} to {new}")
    if name == METADATA_VERSION and new < current:
        if update.upgrade_type == UNSAFE_DOWNGRADE:
            raise _refuse("unsafe metadata.version downgrades are not supported")
        crossed = sorted(v for v in METADATA_CHANGED if new < v <= current)
        if crossed:
            raise _refuse(
                f"metadata.version cannot go safely from {current} to {new}: level {crossed[-1]} "
                "changed the metadata"
            )


def apply(explicit: Mapping[str, int], updates: Sequence[FeatureUpdate]) -> dict[str, int]:
    """The levels to finalize for ``updates`` (all or nothing), given the image's finalized
    levels; InvalidUpdateVersionError for the first update Kafka's rules refuse."""
    names = [u.feature for u in updates]
    if len(set(names)) != len(names):
        raise _refuse("a feature may be named only once in a request")
    for u in updates:
        _check(u, level(explicit, u.feature))
    return {u.feature: u.max_version_level for u in updates}
