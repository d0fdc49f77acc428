"""Client quota rules: entities, keys and values as Kafka validates them, KIP-55's resolution
order, DescribeClientQuotas' filter, and the rate/throttle arithmetic (clock given, no sleeps)."""

from __future__ import annotations

import pytest

from gregor.security.quotas import (
    CLIENT_KEYS,
    IP_KEYS,
    QuotaError,
    Rate,
    TokenBucket,
    entity_of,
    matches,
    resolve,
    validate_entity,
    validate_value,
)


def test_entities_are_canonical_and_validated_with_kafkas_messages() -> None:
    assert entity_of([("user", "alice"), ("client-id", None)]) == (
        ("client-id", None),
        ("user", "alice"),
    )
    assert validate_entity(entity_of([("client-id", "app")])) is CLIENT_KEYS
    assert validate_entity(entity_of([("ip", "10.0.0.1")])) is IP_KEYS
    assert validate_entity(entity_of([("ip", None)])) is IP_KEYS
    cases = [
        ([], "Invalid empty client quota entity"),
        ([("user", "a"), ("user", "b")], "Duplicate user entity type"),
    ]
    for pairs, message in cases:
        with pytest.raises(QuotaError, match=message):
            entity_of(pairs)
    for pairs, message in [
        ([("group", "g")], "Unhandled client quota entity type: group"),
        (
            [("ip", "10.0.0.1"), ("user", "a")],
            "IP entity should not be combined with User or ClientId",
        ),
        ([("ip", "not-an-ip")], "not-an-ip is not a valid IP or resolvable host."),
    ]:
        with pytest.raises(QuotaError, match=message):
            validate_entity(entity_of(pairs))


def test_values_must_be_known_positive_and_fit_their_type() -> None:
    validate_value(CLIENT_KEYS, "producer_byte_rate", 1024.0)
    validate_value(CLIENT_KEYS, "consumer_byte_rate", 1.0)
    validate_value(CLIENT_KEYS, "request_percentage", 50.5)  # a double
    validate_value(CLIENT_KEYS, "controller_mutation_rate", 0.5)
    validate_value(IP_KEYS, "connection_creation_rate", 5.0)
    for keys, key, value, message in [
        (CLIENT_KEYS, "foobar", 1.0, "Invalid configuration key foobar"),
        (IP_KEYS, "producer_byte_rate", 1.0, "Invalid configuration key producer_byte_rate"),
        (CLIENT_KEYS, "producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
        (
            CLIENT_KEYS,
            "consumer_byte_rate",
            -2.0,
            "Quota consumer_byte_rate must be greater than 0",
        ),
        (CLIENT_KEYS, "producer_byte_rate", 10.5, "must be a whole number"),
        (CLIENT_KEYS, "producer_byte_rate", 2.0**64, "too large for a LONG"),
        (IP_KEYS, "connection_creation_rate", 5.5, "must be a whole number"),
        (IP_KEYS, "connection_creation_rate", 2.0**40, "too large for an INT"),
        (CLIENT_KEYS, "controller_mutation_rate", 0.0, "must be greater than 0"),
    ]:
        with pytest.raises(QuotaError, match=message):
            validate_value(keys, key, value)


def test_resolution_follows_kip_55_and_names_the_shared_metric() -> None:
    q = {
        (("client-id", None),): {"producer_byte_rate": 1.0},
        (("client-id", "app"),): {"producer_byte_rate": 2.0},
        (("user", None),): {"producer_byte_rate": 3.0},
        (("client-id", None), ("user", None)): {"producer_byte_rate": 4.0},
        (("client-id", "app"), ("user", None)): {"producer_byte_rate": 5.0},
        (("user", "alice"),): {"producer_byte_rate": 6.0},
        (("client-id", None), ("user", "alice")): {"producer_byte_rate": 7.0},
        (("client-id", "app"), ("user", "alice")): {"producer_byte_rate": 8.0},
    }
    order = list(q)[::-1]  # most specific first
    expected = [8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    for entity, limit in zip(order, expected, strict=True):
        found = resolve(q, "alice", "app", "producer_byte_rate")
        assert found is not None and found.limit == limit
        del q[entity]
    assert resolve(q, "alice", "app", "producer_byte_rate") is None
    shared = resolve(
        {(("user", "bob"),): {"consumer_byte_rate": 9.0}}, "bob", "any-client", "consumer_byte_rate"
    )
    assert shared is not None and shared.metric_key == (
        ("user", "bob"),
    )  # every client of bob shares it
    default = resolve(
        {(("client-id", None),): {"consumer_byte_rate": 9.0}}, "bob", "c1", "consumer_byte_rate"
    )
    assert default is not None and default.metric_key == (
        ("client-id", "c1"),
    )  # each client its own
    assert (
        resolve({(("user", "bob"),): {"consumer_byte_rate": 9.0}}, "bob", "c", "producer_byte_rate")
        is None
    )


def test_describe_filter_components() -> None:
    e = (("client-id", "app"), ("user", "alice"))
    assert matches(e, [("user", 0, "alice")], strict=False)
    assert not matches(e, [("user", 0, "alice")], strict=True)
    assert matches(e, [("user", 0, "alice"), ("client-id", 2, None)], strict=True)
    assert not matches(e, [("user", 1, None)], strict=False)
    assert matches((("user", None),), [("user", 1, None)], strict=True)
    assert not matches((("user", None),), [("user", 2, None)], strict=False)
    assert not matches(e, [("ip", 2, None)], strict=False)
    assert matches(e, [], strict=False) and not matches(e, [], strict=True)


def test_rate_and_throttle() -> None:
    r = Rate(samples=11, window_s=1.0)
    r.record(5000, now=100.0)
    # 5,000 bytes at once are measured over ten windows: 500 B/s
    assert r.rate(now=100.0) == 500.0
    assert r.throttle_ms(1000, now=100.0) == 0
    r.record(15000, now=100.5)
    # 20,000 B over 10 s = 2,000 B/s against 1,000: wait (2000-1000)/1000 x 10 s
    assert r.rate(now=100.5) == 2000.0
    assert r.throttle_ms(1000, now=100.5) == 10000
    # windows older than samples x window no longer count
    assert r.rate(now=112.0) == 0.0
    # a very large excess is capped at the whole window span
    r.record(10**9, now=200.0)
    assert r.throttle_ms(1, now=200.0) == 11000


def test_the_controller_mutation_bucket() -> None:
    bucket = TokenBucket(samples=11, window_s=1.0)  # 2 partitions/s: 22 tokens when full
    assert bucket.throttle_ms(2.0, now=0.0) == 0
    bucket.record(20, 2.0, now=0.0)  # 22 -> 2
    assert not bucket.exceeded(2.0, now=0.0) and bucket.throttle_ms(2.0, now=0.0) == 0
    bucket.record(5, 2.0, now=0.0)  # allowed while not negative: 2 -> -3
    assert bucket.exceeded(2.0, now=0.0)
    assert bucket.throttle_ms(2.0, now=0.0) == 1500  # 3 tokens at 2 a second
    assert bucket.throttle_ms(2.0, now=1.0) == 500
    assert not bucket.exceeded(2.0, now=1.5)
    bucket.record(30, 2.0, now=100.0)  # refilled only to the 22 it holds: -> -8
    assert bucket.throttle_ms(2.0, now=100.0) == 4000
    assert bucket.throttle_ms(4.0, now=100.0) == 2000  # a new quota applies at once
