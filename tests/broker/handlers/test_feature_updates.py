"""Features at the handler, one node: ApiVersions v3+ reports the supported ranges and the
finalized levels, UpdateFeatures (v0 and v1) changes them with Kafka's checks, all or nothing,
and the consumer group protocol follows ``group.version``. (Across brokers and a restart:
tests/client/test_cli_features.py and tests/cluster/test_controller_apis.py.)"""

from __future__ import annotations

import pytest
from handler_wire import Wire

from gregor.protocol.errors import ErrorCode
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from gregor.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from gregor.protocol.messages.update_features import UpdateFeaturesRequest

pytestmark = pytest.mark.timeout(60)

UPGRADE, SAFE, UNSAFE = 1, 2, 3


def api_versions(wire: Wire, version: int = 3) -> object:
    return wire.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), version
    )


def finalized(wire: Wire) -> dict[str, int]:
    av = api_versions(wire)
    levels = {f.name: f.max_version_level for f in av.finalized_features}  # type: ignore[attr-defined]
    assert all(f.min_version_level == f.max_version_level for f in av.finalized_features)  # type: ignore[attr-defined]
    return levels


def update(
    wire: Wire, *updates: tuple[str, int, int], validate_only: bool = False, version: int = 1
) -> object:
    return wire.request(
        UpdateFeaturesRequest(
            timeout_ms=10000,
            validate_only=validate_only,
            feature_updates=[
                UpdateFeaturesRequest.FeatureUpdates(
                    feature=name,
                    max_version_level=level,
                    upgrade_type=kind,
                    allow_downgrade=kind != UPGRADE,
                )
                for name, level, kind in updates
            ],
        ),
        version,
    )


def errors(resp: object) -> tuple[int, dict[str, int]]:
    return resp.error_code, {r.feature: r.error_code for r in resp.results}  # type: ignore[attr-defined]


def heartbeat(wire: Wire) -> object:
    return wire.request(
        ConsumerGroupHeartbeatRequest(
            group_id="g",
            member_id="m-1",
            member_epoch=0,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=["t"],
            server_assignor=None,
            topic_partitions=[],
        ),
        0,
    )


def test_api_versions_reports_supported_and_finalized_features(wire: Wire) -> None:
    av = api_versions(wire)
    supported = {f.name: (f.min_version, f.max_version) for f in av.supported_features}  # type: ignore[attr-defined]
    assert supported == {
        "metadata.version": (7, 29),
        "group.version": (0, 1),
        "transaction.version": (0, 2),
        "share.version": (0, 1),
    }
    assert finalized(wire) == {
        "metadata.version": 29,
        "group.version": 1,
        "share.version": 1,
        "transaction.version": 2,
    }  # level 0 is not listed
    assert av.finalized_features_epoch >= 0  # type: ignore[attr-defined]
    keys = {k.api_key: (k.min_version, k.max_version) for k in av.api_keys}  # type: ignore[attr-defined]
    assert keys[UpdateFeaturesRequest.API_KEY] == (0, 1)
    assert api_versions(wire, 2).supported_features == []  # type: ignore[attr-defined]  # no features before v3


def test_group_version_turns_the_consumer_group_protocol_off_and_on(wire: Wire) -> None:
    assert heartbeat(wire).error_code == 0  # type: ignore[attr-defined]
    before = api_versions(wire).finalized_features_epoch  # type: ignore[attr-defined]
    # Lowering a level needs a downgrade type.
    assert errors(update(wire, ("group.version", 0, UPGRADE))) == (
        ErrorCode.INVALID_UPDATE_VERSION,
        {"group.version": ErrorCode.INVALID_UPDATE_VERSION},
    )
    assert errors(update(wire, ("group.version", 0, SAFE))) == (0, {"group.version": 0})
    assert finalized(wire) == {"metadata.version": 29, "share.version": 1, "transaction.version": 2}
    assert api_versions(wire).finalized_features_epoch > before  # type: ignore[attr-defined]
    off = heartbeat(wire)
    assert (off.error_code, off.member_epoch) == (ErrorCode.UNSUPPORTED_VERSION, -1)  # type: ignore[attr-defined]
    described = wire.request(
        ConsumerGroupDescribeRequest(group_ids=["g", "h"], include_authorized_operations=False), 0
    )
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("g", ErrorCode.UNSUPPORTED_VERSION),
        ("h", ErrorCode.UNSUPPORTED_VERSION),
    ]
    # A downgrade type cannot raise a level; an upgrade can.
    assert errors(update(wire, ("group.version", 1, SAFE)))[0] == ErrorCode.INVALID_UPDATE_VERSION
    assert errors(update(wire, ("group.version", 1, UPGRADE))) == (0, {"group.version": 0})
    assert finalized(wire) == {
        "metadata.version": 29,
        "group.version": 1,
        "share.version": 1,
        "transaction.version": 2,
    }
    assert heartbeat(wire).error_code == 0  # type: ignore[attr-defined]


def test_v0_allow_downgrade_is_a_safe_downgrade(wire: Wire) -> None:
    assert (
        errors(update(wire, ("group.version", 0, UPGRADE), version=0))[0]
        == ErrorCode.INVALID_UPDATE_VERSION
    )
    assert errors(update(wire, ("group.version", 0, SAFE), version=0)) == (0, {"group.version": 0})
    assert finalized(wire) == {"metadata.version": 29, "share.version": 1, "transaction.version": 2}


@pytest.mark.parametrize(
    ("updates", "why"),
    [
        ([("no.such.feature", 1, UPGRADE)], "unknown feature"),
        ([("share.version", 2, UPGRADE)], "above share.version's range"),
        ([("transaction.version", 3, UPGRADE)], "above transaction.version's range"),
        (
            [("transaction.version", 1, UPGRADE)],
            "lowering transaction.version needs a downgrade type",
        ),
        ([("group.version", 2, UPGRADE)], "above the supported range"),
        ([("group.version", -1, SAFE)], "below 0"),
        ([("metadata.version", 6, SAFE)], "below metadata.version's minimum"),
        ([("metadata.version", 0, SAFE)], "metadata.version cannot be turned off"),
        ([("metadata.version", 30, UPGRADE)], "above the supported range"),
        (
            [("metadata.version", 22, SAFE)],
            "a safe downgrade may not cross 4.0-IV1 (23), which changed the metadata",
        ),
        (
            [("metadata.version", 28, UNSAFE)],
            "unsafe metadata.version downgrades are not supported",
        ),
        ([("group.version", 0, 7)], "unknown upgrade type"),
        ([("group.version", 0, SAFE), ("group.version", 1, UPGRADE)], "a feature named twice"),
        (
            [("group.version", 0, SAFE), ("share.version", 2, UPGRADE)],
            "all or nothing: one refusal refuses both",
        ),
    ],
)
def test_refused_updates_change_nothing(
    wire: Wire, updates: list[tuple[str, int, int]], why: str
) -> None:
    before = api_versions(wire).finalized_features_epoch  # type: ignore[attr-defined]
    top, per_feature = errors(update(wire, *updates))
    assert top == ErrorCode.INVALID_UPDATE_VERSION, why
    assert per_feature == {name: ErrorCode.INVALID_UPDATE_VERSION for name, _, _ in updates}, why
    assert finalized(wire) == {
        "metadata.version": 29,
        "group.version": 1,
        "share.version": 1,
        "transaction.version": 2,
    }
    assert api_versions(wire).finalized_features_epoch == before  # type: ignore[attr-defined]


def test_metadata_version_safe_downgrade_within_steps_without_metadata_changes(wire: Wire) -> None:
    # 29 down to 23: the steps 24..29 changed no metadata records, so the downgrade is safe.
    assert errors(update(wire, ("metadata.version", 23, SAFE), validate_only=True)) == (
        0,
        {"metadata.version": 0},
    )
    assert finalized(wire)["metadata.version"] == 29  # validate_only wrote nothing
    assert errors(update(wire, ("metadata.version", 25, SAFE))) == (0, {"metadata.version": 0})
    assert finalized(wire)["metadata.version"] == 25
    assert errors(update(wire, ("metadata.version", 29, UPGRADE))) == (0, {"metadata.version": 0})
    assert finalized(wire)["metadata.version"] == 29


def test_validate_only_checks_without_writing(wire: Wire) -> None:
    assert errors(update(wire, ("group.version", 0, SAFE), validate_only=True)) == (
        0,
        {"group.version": 0},
    )
    assert (
        errors(update(wire, ("share.version", 2, UPGRADE), validate_only=True))[0]
        == ErrorCode.INVALID_UPDATE_VERSION
    )
    assert finalized(wire) == {
        "metadata.version": 29,
        "group.version": 1,
        "share.version": 1,
        "transaction.version": 2,
    }
