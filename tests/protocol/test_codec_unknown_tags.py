"""Unknown tagged fields are kept on decode and written back (sorted among known tags)."""

from __future__ import annotations

from gregor.protocol.messages import ApiVersionsResponse, FetchResponse, MetadataRequest
from gregor.protocol.primitives import uvarint_bytes


def test_unknown_top_level_tag_survives() -> None:
    base = MetadataRequest(topics=None).encode(12)
    assert base.hex() == "00010000"  # null topics, two booleans, empty tag buffer
    # Replace the empty tag buffer with one holding tag 7 = b"hi" and tag 300 = b"".
    data = base[:-1] + b"\x02" + b"\x07\x02hi" + uvarint_bytes(300) + b"\x00"
    got = MetadataRequest.decode(data, 12)
    assert got.unknown_tags == {7: b"hi", 300: b""}
    assert got.encode(12) == data


def test_unknown_nested_tag_between_known_tags() -> None:
    P = FetchResponse.Responses.Partitions
    part = P(partition_index=1, records=b"")
    part.current_leader.leader_id = 4
    part.snapshot_id.epoch = 2
    part.unknown_tags = {7: b"\x01\x02", 1000: b"z"}
    resp = FetchResponse(responses=[FetchResponse.Responses(topic="t", partitions=[part])])
    data = resp.encode(12)
    got = FetchResponse.decode(data, 12)
    gp = got.responses[0].partitions[0]
    assert gp.unknown_tags == {7: b"\x01\x02", 1000: b"z"}
    assert gp.current_leader.leader_id == 4 and gp.snapshot_id.epoch == 2
    assert got.encode(12) == data
    # Known tags 1 and 2, then unknown 7 and 1000: written in tag order.
    tail = "04010900000004ffffffff00020dffffffffffffffff000000020007020102e807017a"
    assert bytes.fromhex(tail) in data


def test_known_tag_in_a_version_that_lacks_it_is_unknown() -> None:
    # ApiVersions response tag 3 (zk_migration_ready) exists from v3; read a v3 buffer that
    # also carries tag 9, which no version defines.
    resp = ApiVersionsResponse(zk_migration_ready=True, unknown_tags={9: b"\xaa"})
    data = resp.encode(3)
    got = ApiVersionsResponse.decode(data, 3)
    assert got.zk_migration_ready is True and got.unknown_tags == {9: b"\xaa"}
    assert got.encode(3) == data


def test_unknown_tags_are_not_written_in_non_flexible_versions() -> None:
    resp = ApiVersionsResponse(unknown_tags={9: b"\xaa"})
    assert ApiVersionsResponse.decode(resp.encode(2), 2).unknown_tags == {}
