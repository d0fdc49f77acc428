"""Confluent's wire framing of typed key and value columns, shared by the Avro, JSON Schema and
Protobuf decoders: which column is decoded how (:class:`TypedColumn`), the frames checked with
numpy over a batch's Arrow buffers, the rows grouped by writer schema id, and Spark's
``from_avro`` modes applied to what does not decode.

A framed value is a magic byte 0 and the writer's schema id (4 bytes, big-endian), then the
format's payload. A value that is not a frame, names an id the registry does not have (or not
of the column's format), or does not decode is a *malformed record*: with ``mode`` FAILFAST
(the default, as Spark's ``from_avro``) the task fails naming its topic, partition and offset;
with PERMISSIVE it reads as null. A null value stays null. Decoders find the malformed rows of
a group by halving it (:func:`halve`: one bad payload costs log2(n) decodes, not n).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa

from gregor.client.schema_registry import RegistryClient, RegistryHTTPError

FAILFAST = "FAILFAST"
PERMISSIVE = "PERMISSIVE"


class MalformedRecord(ValueError):
    """FAILFAST met a record it cannot decode."""


class Undecodable(Exception):
    """A decoder could not decode a group of payloads (one of them, at least, is bad)."""


@dataclass(frozen=True)
class TypedColumn:
    """How one column (``key`` or ``value``) is decoded: its ``format`` (``avro``, ``json``,
    ``protobuf``), the reader's schema (the subject's version resolved when the query was
    planned) and where the writers' schemas are."""

    column: str
    registry_url: str
    subject: str
    version: int
    schema_id: int
    schema: str
    mode: str = FAILFAST
    format: str = "avro"


_CLIENTS: dict[str, RegistryClient] = {}
_CLIENTS_LOCK = threading.Lock()


def registry_client(url: str) -> RegistryClient:
    """One client (and its id cache) per registry per process: a Spark worker reuses it."""
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(url)
        if client is None:
            client = _CLIENTS[url] = RegistryClient(url)
        return client


def use_client(client: RegistryClient) -> None:
    """Make ``client`` (its login and TLS) the one the decoders ask ``client.url`` with: a
    broker's typed tables ask its registry as the broker's settings say."""
    with _CLIENTS_LOCK:
        _CLIENTS[client.url] = client


D = TypeVar("D")


class ColumnDecoders(Generic[D]):
    """One decoder per column (its :class:`TypedColumn`) per process, made on first use: a
    Spark worker or a broker's translators reuse its schemas and caches batch after batch."""

    def __init__(self, make: Callable[[TypedColumn], D]) -> None:
        self._make = make
        self._made: dict[TypedColumn, D] = {}
        self._lock = threading.Lock()

    def get(self, spec: TypedColumn) -> D:
        with self._lock:
            got = self._made.get(spec)
            if got is None:
                got = self._made[spec] = self._make(spec)
            return got


class WriterFormats:
    """Which writer schema ids are schemas of ``schema_type`` (``JSON``, ``PROTOBUF``): asked
    of the column's registry once per id; an id the registry does not have is of none."""

    def __init__(self, spec: TypedColumn, schema_type: str) -> None:
        self.spec = spec
        self.schema_type = schema_type
        self.known: dict[int, bool] = {}  # schema id -> of this format

    def __call__(self, schema_id: int) -> bool:
        if schema_id not in self.known:
            try:
                got = registry_client(self.spec.registry_url).schema_by_id(schema_id)
            except RegistryHTTPError as e:
                if e.status != 404:
                    raise
                got = {}
            self.known[schema_id] = got.get("schemaType") == self.schema_type
        return self.known[schema_id]


def binary(values: pa.Array) -> pa.BinaryArray:
    """``values`` as a binary array at offset 0 (its buffers then read as they lie)."""
    if values.offset != 0 or not isinstance(values, pa.BinaryArray):
        values = pa.concat_arrays([values.cast(pa.binary())])
    assert isinstance(values, pa.BinaryArray)
    return values


def buffers(values: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray]:
    """The value offsets (int64, ``len + 1``) and the data bytes of ``values`` (offset 0)."""
    n = len(values)
    offs = np.frombuffer(values.buffers()[1], dtype=np.int32, count=n + 1).astype(np.int64)
    buf = values.buffers()[2]
    data = np.frombuffer(buf, dtype=np.uint8) if buf is not None else np.zeros(0, np.uint8)
    return offs, data


def frames(values: pa.BinaryArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of ``values`` (offset 0): which are not null, which are frames (not null, at least 5
    bytes, magic byte 0), and each frame's schema id (0 for the others)."""
    offs, data = buffers(values)
    lengths = np.diff(offs)
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    framed = valid & (lengths >= 5)
    starts = np.where(framed, offs[:-1], 0)
    if len(data):
        framed &= data[np.minimum(starts, len(data) - 1)] == 0
    ids = np.zeros(len(values), dtype=np.int64)
    for j in range(1, 5):
        ids = (ids << 8) | np.where(framed, data[np.minimum(starts + j, max(len(data) - 1, 0))], 0)
    return valid, framed, ids


#: Decodes the rows ``group`` (positions in the batch) of one writer id, given as ``taken``:
#: None when the id is unusable (every row malformed), else the decoded rows (None when none
#: decoded) and the positions in ``group`` of the rows that did not.
GroupDecoder = Callable[
    [int, np.ndarray, pa.BinaryArray], "tuple[pa.Array | None, np.ndarray] | None"
]


def decode_framed(
    values: pa.Array,
    spec: TypedColumn,
    target: pa.DataType,
    decode_group: GroupDecoder,
    topic: str,
    partition: int,
    offsets: pa.Array,
) -> pa.Array:
    """``values`` (binary, framed) as ``target``: the frames checked, the rows decoded a writer
    id at a time by ``decode_group``, malformed rows failed or made null as ``spec.mode`` says,
    and the rows put back in order."""
    n = len(values)
    if n == 0:
        return pa.array([], type=target)
    values = binary(values)
    valid, framed, ids = frames(values)
    bad: list[np.ndarray] = [np.nonzero(valid & ~framed)[0]]
    pieces: list[pa.Array] = []
    order: list[np.ndarray] = []
    rows = np.nonzero(framed)[0]
    framed_ids = ids[rows]
    if len(rows) and framed_ids.min() == framed_ids.max():  # the common case: one writer
        by_id: list[tuple[int, np.ndarray]] = [(int(framed_ids[0]), rows)]
    else:
        by_id = [(int(i), rows[framed_ids == i]) for i in np.unique(framed_ids)]
    for schema_id, group in by_id:
        taken = values.take(pa.array(group)) if len(group) != n else values
        got = decode_group(schema_id, group, binary(taken))
        if got is None:
            bad.append(group)
            continue
        decoded, failed = got
        if len(failed):
            bad.append(group[failed])
            group = np.delete(group, failed)
        if decoded is not None and len(group):
            pieces.append(decoded)
            order.append(group)
    wrong = np.sort(np.concatenate(bad))
    if len(wrong) and spec.mode == FAILFAST:
        first = int(wrong[0])
        raise MalformedRecord(
            f"Malformed records are detected in record parsing of {spec.column} at "
            f"{topic}-{partition} offset {offsets[first].as_py()} (the subject {spec.subject}, "
            f"version {spec.version}). Current parse Mode: FAILFAST. To process malformed "
            "records as null result, try setting the option 'mode' as 'PERMISSIVE'."
        )
    covered = np.zeros(n, dtype=bool)
    for group in order:
        covered[group] = True
    nulls = np.nonzero(~covered)[0]
    if len(nulls):
        pieces.append(pa.nulls(len(nulls), target))
        order.append(nulls)
    combined = pa.concat_arrays(pieces) if len(pieces) != 1 else pieces[0]
    position = np.concatenate(order)
    if len(order) == 1 and np.array_equal(position, np.arange(n)):
        return combined
    inverse = np.empty(n, dtype=np.int64)
    inverse[position] = np.arange(n)
    return combined.take(pa.array(inverse))


def halve(
    values: pa.BinaryArray, decode: Callable[[pa.BinaryArray], pa.Array]
) -> tuple[pa.Array | None, np.ndarray]:
    """``values`` decoded by ``decode`` (which raises :class:`Undecodable`, ValueError or an
    Arrow error for a group with a bad payload), halving the group to find the bad ones: the
    decoded rows (None when none decoded) and the positions of those that did not."""
    try:
        out = decode(values)
        if len(out) != len(values):
            raise Undecodable("row count")
        return out, np.array([], dtype=np.int64)
    except (Undecodable, ValueError, IndexError, pa.ArrowException):
        if len(values) == 1:
            return None, np.array([0], dtype=np.int64)
    half = len(values) // 2
    a, bad_a = halve(binary(values.slice(0, half)), decode)
    b, bad_b = halve(binary(values.slice(half)), decode)
    parts = [x for x in (a, b) if x is not None]
    return (pa.concat_arrays(parts) if parts else None), np.concatenate((bad_a, bad_b + half))


__all__ = [
    "FAILFAST",
    "PERMISSIVE",
    "GroupDecoder",
    "MalformedRecord",
    "TypedColumn",
    "Undecodable",
    "binary",
    "buffers",
    "decode_framed",
    "frames",
    "halve",
    "registry_client",
    "use_client",
]
