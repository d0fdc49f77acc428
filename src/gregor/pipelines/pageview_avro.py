"""The page view as Avro through a schema registry: the reference pipeline's default format.

:data:`SCHEMA` (record ``PageView`` of the namespace ``gregor.pipelines``) is registered under
the input topic's value subject (``<topic>-value``, Confluent's TopicNameStrategy) by
:func:`register`; the generator frames each value as confluent-kafka's ``AvroSerializer`` does:
the magic byte 0, the schema id (4 bytes, big-endian), then the Avro binary datum, here the
record's fields in order (longs and ints as zigzag varints, strings as a varint length and the
UTF-8 bytes). Any Confluent deserializer reads the records; the Spark job reads them as typed
columns (``valueFormat avro``).

:func:`avro_values` encodes a whole generated chunk at once with numpy and Arrow (each varint
column as a byte matrix, the pieces joined row-wise by Arrow), instead of fastavro one record at
a time: the same bytes (``tests/pipelines/test_pageview_avro.py`` compares them with fastavro's
and decodes them with confluent-kafka's deserializer), at the speed of the JSON path the
generator had, so the job's producer is not what Avro slows. No state.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "PageView",
    "namespace": "gregor.pipelines",
    "fields": [
        {"name": "event_id", "type": "long"},
        {"name": "user_id", "type": "string"},
        {"name": "page", "type": "string"},
        {"name": "ts", "type": "long", "doc": "event time, milliseconds since the epoch"},
        {"name": "referrer", "type": "string"},
        {"name": "duration_ms", "type": "int"},
    ],
}
#: The fields in the order of the datum, and whether each is a string (else a zigzag varint).
_FIELDS = tuple((f["name"], f["type"] == "string") for f in SCHEMA["fields"])
_MAX_VARINT = 10  # bytes of a zigzag varint of an int64


def subject(topic: str) -> str:
    """The value subject of ``topic`` (TopicNameStrategy)."""
    return f"{topic}-value"


def register(registry_url: str, topic: str) -> int:
    """Register :data:`SCHEMA` under ``topic``'s value subject (the id of an identical schema
    already there is answered again); the schema id."""
    from gregor.client.schema_registry import RegistryClient

    return RegistryClient(registry_url).register(subject(topic), json.dumps(SCHEMA), "AVRO")


def _varints(values: np.ndarray) -> pa.Array:
    """Each int64 of ``values`` as its Avro zigzag varint (a binary array)."""
    v = values.astype(np.int64, copy=False)
    rest = ((v << 1) ^ (v >> 63)).view(np.uint64)
    n = len(rest)
    groups = np.zeros((n, _MAX_VARINT), np.uint8)
    lengths = np.ones(n, np.int64)
    for i in range(_MAX_VARINT):
        low = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest = rest >> np.uint64(7)
        more = rest != 0
        groups[:, i] = low | (more.astype(np.uint8) << 7)
        if not more.any():
            break
        lengths += more
    keep = np.arange(_MAX_VARINT) < lengths[:, None]
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(groups[keep].tobytes())]
    )


def _ints(column: Any) -> np.ndarray:
    return np.asarray(column.combine_chunks() if hasattr(column, "combine_chunks") else column)


def avro_values(table: pa.Table, schema_id: int) -> pa.Array:
    """Each row of a generated chunk (``clickstream.generate_columns``) as a Confluent-framed
    Avro ``PageView`` with schema id ``schema_id`` (a binary array)."""
    n = table.num_rows
    header = struct.pack(">bI", 0, schema_id)
    pieces: list[Any] = [pa.array([header] * n, pa.binary()) if n else pa.array([], pa.binary())]
    for name, is_string in _FIELDS:
        column = table.column(name)
        if is_string:
            text = pc.cast(column, pa.binary())
            pieces.append(_varints(_ints(pc.binary_length(text)).astype(np.int64)))
            pieces.append(text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text)
        else:
            pieces.append(_varints(_ints(column)))
    return pc.binary_join_element_wise(*pieces, b"")


def avro_record(event: dict[str, Any], schema_id: int) -> bytes:
    """One page view (a dict, as ``clickstream.end_marker`` gives it) framed as
    :func:`avro_values` frames a generated row."""
    table = pa.table(
        {
            name: pa.array([event[name]], pa.string() if is_string else pa.int64())
            for name, is_string in _FIELDS
        }
    )
    value = avro_values(table, schema_id)[0].as_py()
    assert isinstance(value, bytes)
    return value


__all__ = ["SCHEMA", "avro_record", "avro_values", "register", "subject"]
