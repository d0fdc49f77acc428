"""Every API of the protocol guide is served at every version the guide lists, or is one of the
KRaft-only APIs that Gregor's cluster design replaces (the README's "APIs not served" says why):
DescribeQuorum (55), Envelope (58), AddRaftVoter (80) and RemoveRaftVoter (81). Client APIs are
read from ApiVersions on a client listener; the broker-to-broker APIs (advertised only on a
cluster's inter-broker listener, tests/cluster/test_controller_apis.py) from the handler table.
The share groups' offset APIs (90-92), which Kafka 4.1 added after the guide, are served too."""

from __future__ import annotations

from handler_wire import Wire

from gregor.broker.handlers.registry import HANDLERS
from gregor.protocol.messages import API_KEYS, SUPPLEMENT_VERSIONS
from gregor.protocol.messages.api_versions import ApiVersionsRequest

REPLACED_BY_THE_CLUSTER_DESIGN = {
    55: "DescribeQuorum",
    58: "Envelope",
    80: "AddRaftVoter",
    81: "RemoveRaftVoter",
}


def guide_versions(key: int) -> set[int]:
    info = API_KEYS[key]
    return set(range(info.min_version, info.max_version + 1)) - set(
        SUPPLEMENT_VERSIONS.get(key, ())
    )


def test_every_api_of_the_guide_is_served_at_every_listed_version(wire: Wire) -> None:
    av = wire.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    advertised = {k.api_key: set(range(k.min_version, k.max_version + 1)) for k in av.api_keys}
    inter_broker = {
        k: set(range(e.min_version, e.max_version + 1))
        for k, e in HANDLERS.items()
        if e.inter_broker_only
    }
    guide = {k for k in API_KEYS if guide_versions(k)}
    assert len(guide) == 79
    missing = {}
    for key, info in sorted(API_KEYS.items()):
        served = advertised.get(key) or inter_broker.get(key) or set()
        if key in REPLACED_BY_THE_CLUSTER_DESIGN:
            assert REPLACED_BY_THE_CLUSTER_DESIGN[key] == info.name and not served
            continue
        if not guide_versions(key) <= served:
            missing[info.name] = sorted(guide_versions(key) - served)
    assert missing == {}
    assert len(guide & (set(advertised) | set(inter_broker))) == 79 - len(
        REPLACED_BY_THE_CLUSTER_DESIGN
    )
    beyond = {API_KEYS[k].name: sorted(v) for k, v in advertised.items() if k not in guide}
    assert beyond == {
        "DescribeShareGroupOffsets": [0, 1],
        "AlterShareGroupOffsets": [0],
        "DeleteShareGroupOffsets": [0],
    }
