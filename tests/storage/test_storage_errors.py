"""Storage errors are KafkaErrors: one code per class, the protocol's error table's."""

from __future__ import annotations

import inspect

import pytest

from gregor.protocol import errors as kafka
from gregor.protocol.errors import ErrorCode
from gregor.storage import errors as storage_errors
from gregor.storage.errors import (
    InvalidConfigError,
    KafkaStorageError,
    LogClosedError,
    OffsetOutOfRangeError,
    StorageError,
    UnexpectedAppendOffsetError,
)

CLASSES = [
    c for _, c in inspect.getmembers(storage_errors, inspect.isclass) if issubclass(c, StorageError)
]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_each_storage_error_is_the_kafka_error_of_its_code(cls: type[StorageError]) -> None:
    assert issubclass(cls, kafka.KafkaError)
    assert isinstance(cls.code, ErrorCode) and cls.code is not ErrorCode.NONE
    if cls is not StorageError:  # the base is every code's: UNKNOWN_SERVER_ERROR by default
        assert issubclass(cls, kafka.error_for_code(cls.code))  # also the protocol's class
    e = cls.__new__(cls)
    assert e.error_code is cls.code  # the old name, kept as an alias
    assert cls.name == cls.code.name


def test_codes_messages_and_the_families_they_are_caught_by() -> None:
    e = OffsetOutOfRangeError(7, 2, 5, "t-0")
    assert (e.code, e.error_code) == (ErrorCode.OFFSET_OUT_OF_RANGE, 1)
    assert str(e) == "offset 7 is out of range of t-0: the log holds [2, 5)"
    assert (e.offset, e.log_start_offset, e.log_end_offset) == (7, 2, 5)
    with pytest.raises(kafka.OffsetOutOfRangeError):
        raise e
    closed = LogClosedError("log t-0 is closed")
    assert isinstance(closed, KafkaStorageError) and closed.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert closed.retriable  # as the protocol's KAFKA_STORAGE_ERROR
    with pytest.raises(ValueError):  # config errors stay ValueErrors too
        raise InvalidConfigError("segment.bytes must be at least 14")
    assert StorageError("?").code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert UnexpectedAppendOffsetError("below").code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_a_code_outside_the_table_becomes_unknown_server_error() -> None:
    class Odd(StorageError):
        code = 9999  # type: ignore[assignment]

    class Fine(StorageError):
        code = ErrorCode.NONE

    assert Odd.code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert Fine.code is ErrorCode.UNKNOWN_SERVER_ERROR
