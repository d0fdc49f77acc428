# Types of the compiled record walk (_scan.pyx); the same functions as _scan_py.
from array import array
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gregor.protocol.records.columns import ArrowColumns

Buffer = bytes | bytearray | memoryview
T = TypeVar("T", bound=tuple[Any, ...])

IMPLEMENTATION: str

def decode_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    record_type: type[T],
) -> list[T]: ...
def consumer_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    start: int,
    topic: str,
    partition: int,
    leader_epoch: int,
    record_type: type[T],
    out: list[T],
) -> None: ...
def arrow_records(
    data: Buffer,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    columns: ArrowColumns,
    include_headers: bool,
) -> None: ...
def clear_array(arr: array[int]) -> None: ...
def reserve_columns(columns: ArrowColumns, records: int, value_bytes: int) -> None: ...
def validate_records(data: Buffer, count: int) -> None: ...
def schema_ids(data: Buffer, count: int, value: bool) -> list[int]: ...
def check_records(data: Buffer, count: int, base_timestamp: int) -> tuple[int, int, int, int]: ...
def encode_record(
    buf: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: Buffer | None,
    value: Buffer | None,
    headers: Sequence[tuple[str | bytes, Buffer | None]],
) -> None: ...

class RecordAppender:
    buf: bytearray
    count: int
    base_timestamp: int | None
    max_timestamp: int
    next_delta: int
    def __init__(self) -> None: ...
    def append(
        self,
        timestamp: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[tuple[str | bytes, Buffer | None]] = (),
        offset_delta: int | None = None,
    ) -> int: ...

AVRO_MAX_DEPTH: int

class AvroValidator:
    def __init__(
        self, kinds: list[int], a: list[int], b: list[int], children: list[int]
    ) -> None: ...
    def check(self, payload: bytes) -> str | None: ...
    def __call__(self, payload: bytes) -> str | None: ...

def check_payloads(
    data: Buffer,
    count: int,
    value: bool,
    ids: list[int],
    checks: dict[int, Callable[[bytes], str | None]],
) -> list[tuple[int, int, str]]: ...
