"""Kafka's feature names (KIP-584) and the levels of ``metadata.version``.

Facts shared by the broker (which supports and finalizes them) and the tools (which print
``metadata.version`` by release name): Kafka's feature levels 3.3-IV3 = 7 ... 4.2-IV1 = 29 and
the levels whose step changed the metadata records (a safe downgrade may not cross one).
"""

from __future__ import annotations

from collections.abc import Mapping

METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
SHARE_VERSION = "share.version"

#: UpdateFeatures v1 ``upgrade_type`` (v0's ``allow_downgrade`` maps to UPGRADE or SAFE_DOWNGRADE).
UPGRADE = 1
SAFE_DOWNGRADE = 2
UNSAFE_DOWNGRADE = 3

METADATA_RELEASES: Mapping[int, str] = {
    7: "3.3-IV3",
    8: "3.4-IV0",
    9: "3.5-IV0",
    10: "3.5-IV1",
    11: "3.5-IV2",
    12: "3.6-IV0",
    13: "3.6-IV1",
    14: "3.6-IV2",
    15: "3.7-IV0",
    16: "3.7-IV1",
    17: "3.7-IV2",
    18: "3.7-IV3",
    19: "3.7-IV4",
    20: "3.8-IV0",
    21: "3.9-IV0",
    22: "4.0-IV0",
    23: "4.0-IV1",
    24: "4.0-IV2",
    25: "4.0-IV3",
    26: "4.1-IV0",
    27: "4.1-IV1",
    28: "4.2-IV0",
    29: "4.2-IV1",
}

#: metadata.version levels whose step changed the metadata records (Kafka's ``didMetadataChange``).
METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23})


def metadata_level(release: str) -> int | None:
    """The level of a release name: ``3.9-IV0`` exactly, or ``3.9`` for its last level."""
    for level, name in METADATA_RELEASES.items():
        if name == release:
            return level
    levels = [lv for lv, name in METADATA_RELEASES.items() if name.split("-")[0] == release]
    return max(levels) if levels else None


def level_text(feature: str, level: int) -> str:
    """A level as Kafka's tool prints it: ``metadata.version`` by release name."""
    return METADATA_RELEASES.get(level, str(level)) if feature == METADATA_VERSION else str(level)
