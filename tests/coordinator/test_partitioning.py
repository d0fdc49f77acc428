"""Group -> __consumer_offsets partition, as Kafka computes it."""

from __future__ import annotations

import pytest

from gregor.coordinator.common.partitioning import java_string_hashcode, kafka_abs, partition_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Hello World", -862545276),
        # Java's famous string whose hashCode is Integer.MIN_VALUE.
        ("polygenelubricants", -(1 << 31)),
        # A character outside the BMP counts as two UTF-16 code units (0xD83D, 0xDE00).
        ("\U0001f600", 31 * 0xD83D + 0xDE00),
        ("é", 0xE9),
    ],
)
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_kafka_abs_maps_int_min_to_zero() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5
    assert kafka_abs(7) == 7


def test_partition_for() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50 == 22
    assert partition_for("Hello World", 50) == 862545276 % 50 == 26
    assert partition_for("", 50) == 0
