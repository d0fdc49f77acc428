"""Unit tests that need no broker: partitioner, config, group protocol encoding, assignors."""

from __future__ import annotations

import struct
from typing import get_args

import pytest

from gregor.client.consumer.assignors import (
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RoundRobinAssignor,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    make_assignors,
)
from gregor.client.core import config as config_module
from gregor.client.core.config import Config, parse_servers
from gregor.client.core.errors import ConfigError
from gregor.client.producer.partitioner import StickyPartitioner, murmur2, partition_for_key
from gregor.protocol.exceptions import ProtocolError

# Test vectors published with the Java client's murmur2 (facts, not code).
MURMUR2_VECTORS = [
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
]


@pytest.mark.parametrize(("text", "expected"), MURMUR2_VECTORS)
def test_murmur2_matches_java(text: str, expected: int) -> None:
    assert murmur2(text.encode()) == expected


def test_partition_for_key_is_positive_modulo() -> None:
    # -973932308 & 0x7fffffff = 1173551340; % 7 = 3
    assert partition_for_key(b"21", 7) == 1173551340 % 7 == 3
    assert all(0 <= partition_for_key(bytes([i]), 5) < 5 for i in range(256))


def test_sticky_partitioner_sticks_then_moves() -> None:
    sp = StickyPartitioner(batch_size=1000)
    first = sp.partition("t", [0, 1, 2, 3], 4, 400)
    assert sp.partition("t", [0, 1, 2, 3], 4, 400) == first
    assert sp.partition("t", [0, 1, 2, 3], 4, 400) == first  # 1200 bytes now: next call moves
    nxt = sp.partition("t", [0, 1, 2, 3], 4, 10)
    assert nxt != first
    # only one partition available: stays there
    sp2 = StickyPartitioner(batch_size=1)
    assert {sp2.partition("u", [2], 4, 10) for _ in range(5)} == {2}


def test_config_kafka_names_and_conversion() -> None:
    c = Config(
        "producer",
        {"bootstrap.servers": "a:1,b", "linger.ms": "7", "enable.idempotence": "false"},
        batch_size=100,
    )
    assert c["linger.ms"] == 7
    assert c["batch.size"] == 100
    assert c["enable.idempotence"] is False
    assert c.bootstrap_servers == [("a", 1), ("b", 9092)]
    assert c.explicit == {"bootstrap.servers", "linger.ms", "enable.idempotence", "batch.size"}
    with pytest.raises(ConfigError, match="unknown producer configuration 'linger.msec'"):
        Config("producer", {"linger.msec": 5})
    with pytest.raises(ConfigError):
        Config("consumer", {"linger.ms": 5})  # a producer key
    with pytest.raises(ConfigError):
        Config("producer", {"linger.ms": "soon"})
    assert parse_servers("PLAINTEXT://[::1]:9093, h") == [("::1", 9093), ("h", 9092)]


def test_config_key_types_match_the_defaults() -> None:
    # Config.__getitem__ is typed by key (IntKey, BoolKey, StrKey, OptionalStrKey): every
    # setting of every role is in exactly the group its default's type says, and no group names
    # a setting that does not exist.
    groups = {
        "int": set(get_args(config_module.IntKey)),
        "bool": set(get_args(config_module.BoolKey)),
        "str": set(get_args(config_module.StrKey)),
        "optional str": set(get_args(config_module.OptionalStrKey)),
    }
    defaults = {**config_module.COMMON}
    for role in config_module.ROLES.values():
        defaults.update(role)

    def kind(value: object) -> str:
        if value is None:
            return "optional str"
        if isinstance(value, bool):
            return "bool"
        return "int" if isinstance(value, int) else "str"

    assert {name: kind(value) for name, value in defaults.items()} == {
        name: group for group, names in groups.items() for name in names
    }


def test_config_refuses_none_for_a_setting_with_a_default() -> None:
    # None stands for "unset" only where the default is None; elsewhere it is refused when the
    # client is made, not found later as a TypeError (or, for a flag, silently taken as false).
    for key in ("linger.ms", "enable.idempotence", "acks"):
        with pytest.raises(ConfigError, match=f"{key} cannot be None"):
            Config("producer", {key: None})
    assert Config("producer", {"transactional.id": None})["transactional.id"] is None
    assert Config("consumer", {"bootstrap.servers": ["a:1", "b:2"]}).bootstrap_servers == [
        ("a", 1),
        ("b", 2),
    ]
    with pytest.raises(
        ConfigError, match="bootstrap.servers must be a string or a list of strings"
    ):
        Config("consumer", {"bootstrap.servers": ["a:1", 2]})


def test_subscription_bytes_v3() -> None:
    sub = Subscription(["a", "bc"], b"u", {"a": [2, 0]}, 7, "r1")
    raw = encode_subscription(sub)
    expected = (
        struct.pack(">hi", 3, 2)
        + b"\x00\x01a"
        + b"\x00\x02bc"
        + struct.pack(">i", 1)
        + b"u"
        + struct.pack(">i", 1)
        + b"\x00\x01a"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">i", 7)
        + b"\x00\x02r1"
    )
    assert raw == expected
    back = decode_subscription(raw)
    assert back.topics == ["a", "bc"] and back.owned_partitions == {"a": [0, 2]}
    assert back.generation_id == 7 and back.rack_id == "r1" and back.user_data == b"u"


def test_subscription_v0_and_newer_versions_with_trailing_fields() -> None:
    v0 = struct.pack(">hi", 0, 1) + b"\x00\x01t" + struct.pack(">i", -1)
    assert decode_subscription(v0) == Subscription(["t"], None, {}, -1, None, 0)
    # a v9 subscription from some future client: known fields read, the rest ignored
    future = encode_subscription(Subscription(["t"], None, {}, 3, None, 3))[2:]
    future = struct.pack(">h", 9) + future + b"\x00\x00extra"
    assert decode_subscription(future).topics == ["t"]
    with pytest.raises(ProtocolError):
        decode_subscription(b"\x00\x00\x00\x00\x00\x05\x00")


def test_assignment_roundtrip_and_empty() -> None:
    a = Assignment({"t": [1, 0], "u": [3]}, None)
    raw = encode_assignment(a)
    assert raw == (
        struct.pack(">hi", 1, 2)
        + b"\x00\x01t"
        + struct.pack(">iii", 2, 0, 1)
        + b"\x00\x01u"
        + struct.pack(">ii", 1, 3)
        + struct.pack(">i", -1)
    )
    assert decode_assignment(raw).partitions == {"t": [0, 1], "u": [3]}
    assert decode_assignment(b"").partitions == {}


def _members(*specs: tuple[str, list[str]]) -> dict[str, Subscription]:
    return {m: Subscription(t) for m, t in specs}


def test_range_assignor() -> None:
    m = _members(("c1", ["t", "u"]), ("c2", ["t", "u"]), ("c3", ["t"]))
    out = RangeAssignor().assign(m, {"t": 7, "u": 3})
    assert out == {
        "c1": {"t": [0, 1, 2], "u": [0, 1]},
        "c2": {"t": [3, 4], "u": [2]},
        "c3": {"t": [5, 6]},
    }


def test_roundrobin_assignor_skips_non_subscribers() -> None:
    m = _members(("a", ["t", "u"]), ("b", ["t"]))
    out = RoundRobinAssignor().assign(m, {"t": 3, "u": 2})
    assert out == {"a": {"t": [0, 2], "u": [0, 1]}, "b": {"t": [1]}}


def test_cooperative_sticky_keeps_owned_and_defers_moves() -> None:
    a = CooperativeStickyAssignor()
    # a owns everything; b joins: a keeps 3 (balanced 3/3), the 3 that must move are held back
    m = {
        "a": Subscription(["t"], owned_partitions={"t": [0, 1, 2, 3, 4, 5]}, generation_id=4),
        "b": Subscription(["t"]),
    }
    first = a.assign(m, {"t": 6})
    assert first == {"a": {"t": [0, 1, 2]}, "b": {}}
    # next round: a now owns 0-2; b gets the rest
    m["a"] = Subscription(["t"], owned_partitions={"t": [0, 1, 2]}, generation_id=5)
    second = a.assign(m, {"t": 6})
    assert second == {"a": {"t": [0, 1, 2]}, "b": {"t": [3, 4, 5]}}
    # stable: nothing moves when nothing changed
    m["b"] = Subscription(["t"], owned_partitions={"t": [3, 4, 5]}, generation_id=5)
    assert a.assign(m, {"t": 6}) == second


def test_cooperative_sticky_conflicting_claims_go_to_newest_generation() -> None:
    m = {
        "a": Subscription(["t"], owned_partitions={"t": [0]}, generation_id=1),
        "b": Subscription(["t"], owned_partitions={"t": [0]}, generation_id=2),
    }
    out = CooperativeStickyAssignor().assign(m, {"t": 2})
    assert out == {"a": {"t": [1]}, "b": {"t": [0]}}


def test_make_assignors_accepts_java_class_names() -> None:
    names = [
        a.name
        for a in make_assignors(
            "org.apache.kafka.clients.consumer.RangeAssignor,cooperative-sticky"
        )
    ]
    assert names == ["range", "cooperative-sticky"]
    with pytest.raises(ValueError):
        make_assignors("sticky-ish")


def test_transaction_manager_states() -> None:
    from gregor.client.core.errors import IllegalStateError
    from gregor.client.core.metadata import TopicPartition
    from gregor.client.producer.transaction_manager import TransactionManager, TxnState

    txn = TransactionManager("tx", None, lambda: (7, 0), 1.0)  # type: ignore[arg-type]
    assert txn.state is TxnState.UNINITIALIZED
    with pytest.raises(IllegalStateError, match="state uninitialized"):
        txn.begin()
    txn.ready()
    with pytest.raises(IllegalStateError, match="outside a transaction"):
        txn.check_can_send()
    with pytest.raises(IllegalStateError, match="no transaction in progress"):
        txn.check_abort()
    txn.begin()
    assert txn.state is TxnState.IN_TRANSACTION
    txn.check_can_send()
    txn.check_commit()
    tp = TopicPartition("t", 0)
    txn.touch(tp)
    assert txn.new == {tp}
    txn.partitions.add(tp)
    txn.touch(TopicPartition("t", 0))  # already registered: nothing new to add
    txn.fail()
    assert txn.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(IllegalStateError, match="abort it"):
        txn.check_commit()
    txn.check_abort()
