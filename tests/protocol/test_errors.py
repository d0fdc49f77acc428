"""Error codes: one class per code of the guide's table (and the supplement's rows), lookup,
retriable flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gregor.protocol import errors, exceptions
from gregor.protocol.errors import (
    ERRORS_BY_CODE,
    ErrorCode,
    KafkaError,
    RetriableError,
    UnknownTopicOrPartitionError,
    error_for_code,
    raise_for_code,
)

SPEC = Path(errors.__file__).parent / "spec" / "errors.json"


def test_every_code_of_the_table_has_a_class() -> None:
    table = json.loads(SPEC.read_text())["errors"]
    assert len(table) == 130  # -1, 0 .. 127 from the guide, 128 from the supplement
    assert {e["code"] for e in table} == set(range(-1, 129))
    for e in table:
        assert ErrorCode[e["name"]] == e["code"]
        if e["code"] == 0:
            continue
        cls = error_for_code(e["code"])
        assert issubclass(cls, KafkaError)
        assert (cls.code, cls.name, cls.retriable, cls.description) == (
            e["code"],
            e["name"],
            e["retriable"],
            e["description"],
        )
        assert issubclass(cls, RetriableError) == e["retriable"]
        assert getattr(errors, cls.__name__) is cls
    assert len(ERRORS_BY_CODE) == 129


def test_known_facts_from_the_guide() -> None:
    assert error_for_code(3) is UnknownTopicOrPartitionError
    assert UnknownTopicOrPartitionError.retriable is True
    assert errors.UnsupportedVersionError.code == ErrorCode.UNSUPPORTED_VERSION == 35
    assert errors.UnsupportedVersionError.retriable is False
    assert errors.NotLeaderOrFollowerError.code == 6
    assert errors.InvalidTopicError.name == "INVALID_TOPIC_EXCEPTION"
    assert errors.UnknownServerError.code == -1
    assert errors.VoterNotFoundError.code == 127
    assert errors.InvalidRegularExpressionError.code == ErrorCode.INVALID_REGULAR_EXPRESSION == 128
    assert errors.InvalidRegularExpressionError.retriable is False


def test_instances_carry_the_code_and_message() -> None:
    e = UnknownTopicOrPartitionError("no such topic: t")
    assert (e.code, e.name, e.retriable, str(e)) == (
        3,
        "UNKNOWN_TOPIC_OR_PARTITION",
        True,
        "no such topic: t",
    )
    assert str(errors.RequestTimedOutError()) == "The request timed out."


def test_unknown_and_zero_codes() -> None:
    cls = error_for_code(999)
    assert issubclass(cls, KafkaError) and cls.code == 999 and cls.name == "UNKNOWN_999"
    assert error_for_code(999) is cls
    with pytest.raises(ValueError):
        error_for_code(0)


def test_raise_for_code() -> None:
    raise_for_code(0)
    with pytest.raises(errors.NotCoordinatorError, match="moved"):
        raise_for_code(16, "moved")


def test_protocol_error_is_reexported_not_duplicated() -> None:
    assert errors.ProtocolError is exceptions.ProtocolError
