"""The typed modes: a partition's ``key_value`` rows split into typed rows and dead letters.

``iceberg.mode=value_schema_id_prefix``: each value is a Confluent frame (magic byte 0, the
writer's schema id, the payload) and is decoded with its id's schema from the schema
registry. ``value_schema_latest``: each value is the bare payload (no frame, as Redpanda's
mode of that name expects) of the latest schema of the subject ``<topic>-value`` (Confluent's
TopicNameStrategy), asked again every :data:`LATEST_TTL_S`. Avro, JSON Schema and Protobuf
(the subject's first message) are decoded by ``gregor.columns`` into one Arrow struct, the
table's ``value`` column; the other columns are those of ``key_value`` (key, headers,
timestamp, partition, offset). A null value (a tombstone) is a row whose ``value`` is null.

The ``value`` column's type is the union of the writers' types (:func:`merge_types`): a field
a writer adds is added (null in older rows), a field it lacks is null in its rows, ``int``
widens to ``long``, ``float`` to ``double``, a decimal's precision grows; any other change of
a field's type is a clash Iceberg cannot evolve. A record goes to the dead-letter table (its
``key_value`` row and an ``error`` saying why) when its value is not a frame (id prefix
mode), names an id the registry does not have, has a schema the columns cannot type, does not
decode, or decodes to a type that clashes with the table's. The registry unreachable or
answering an error other than "not found" raises: the translator retries and dead-letters
nothing meanwhile.

All of this runs in a worker thread (it blocks on the registry).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gregor.client.schema_registry import RegistryClient, RegistryHTTPError
from gregor.columns.framing import PERMISSIVE, GroupDecoder, TypedColumn, binary, frames
from gregor.tables.schema import DEAD_LETTER_ARROW_SCHEMA
from gregor.tables.settings import VALUE_SCHEMA_LATEST

#: How long the latest schema of a ``value_schema_latest`` topic's subject is believed.
LATEST_TTL_S = 60.0
#: How long an id the registry did not have is believed unknown.
UNKNOWN_TTL_S = 5.0
FORMATS = {"AVRO": "avro", "JSON": "json", "PROTOBUF": "protobuf"}


class TypeClash(ValueError):
    """Two writers' types of one field that Iceberg cannot make one."""


def _widened(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    kinds = {a, b}
    if kinds == {pa.int32(), pa.int64()}:
        return pa.int64()
    if kinds == {pa.float32(), pa.float64()}:
        return pa.float64()
    if pa.types.is_decimal(a) and pa.types.is_decimal(b) and a.scale == b.scale:
        return pa.decimal128(max(a.precision, b.precision), a.scale)
    return None


def merge_types(table: pa.DataType, new: pa.DataType, where: str = "value") -> pa.DataType:
    """The type that holds both ``table``'s and ``new``'s values (fields by name, the table's
    first), without field metadata; raises :class:`TypeClash`."""
    if pa.types.is_struct(table) and pa.types.is_struct(new):
        table, new = _plain(table), _plain(new)
        theirs = {f.name: f.type for f in new}
        fields = []
        for f in table:
            t = f.type if f.name not in theirs else merge_types(f.type, theirs[f.name], where)
            fields.append(pa.field(f.name, _plain(t) if f.name not in theirs else t))
        names = {f.name for f in table}
        fields += [pa.field(f.name, _plain(f.type)) for f in new if f.name not in names]
        return pa.struct(fields)
    if pa.types.is_map(table) and pa.types.is_map(new):
        return pa.map_(
            merge_types(table.key_type, new.key_type, f"{where} (map key)"),
            merge_types(table.item_type, new.item_type, f"{where} (map value)"),
        )
    if pa.types.is_list(table) and pa.types.is_list(new):
        item = merge_types(table.value_type, new.value_type, f"{where} (element)")
        return pa.list_(pa.field("element", item))
    if table.equals(new):
        return table
    widened = _widened(table, new)
    if widened is None:
        raise TypeClash(f"{where}: the table's type {table} cannot take {new}")
    return widened


def _plain(t: pa.DataType) -> pa.DataType:
    """``t`` without field metadata, non-null flags and large types (the table's type, as
    pyiceberg gives it, in the decoders' terms)."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(_plain(t.key_type), _plain(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(pa.field("element", _plain(t.value_type)))
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    return t


def evolved(tx: Any, rows: pa.Table) -> pa.Table:
    """``rows`` made to fit the table of the pyiceberg transaction ``tx``: when their struct
    ``value`` has fields or wider types the table's lacks, the table's schema is evolved in
    ``tx`` first (``union_by_name``, new field ids from the table's). Raises
    :class:`TypeClash` for a type the table cannot take."""
    if "value" not in rows.column_names:
        return rows
    new = rows.schema.field("value").type
    if not pa.types.is_struct(new):
        return rows
    schema = tx.table_metadata.schema()
    merged = new
    have: pa.DataType | None = None
    if "value" in schema.column_names:
        have = _plain(schema.as_arrow().field("value").type)
        merged = merge_types(have, new)
    if have is None or not merged.equals(have):
        with tx.update_schema() as update:
            update.union_by_name(pa.schema([pa.field("value", merged)]))
    i = rows.schema.get_field_index("value")
    value = conform(rows.column(i).combine_chunks(), merged)
    return rows.set_column(i, pa.field("value", merged), value)


def conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target`` (a :func:`merge_types` result of its type): missing fields
    null, widened numbers cast."""
    if array.type.equals(target):
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        have = dict(zip([f.name for f in array.type], array.flatten(), strict=True))
        children = [
            conform(have[f.name], f.type) if f.name in have else pa.nulls(len(array), f.type)
            for f in target
        ]
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=pc.invert(array.is_valid())
        )
    if pa.types.is_list(target) and pa.types.is_list(array.type):
        array = pa.concat_arrays([array])  # offset 0
        values = conform(array.flatten(), target.value_type)
        offsets = pc.subtract(array.offsets, array.offsets[0])
        return pa.ListArray.from_arrays(
            offsets, values, type=target, mask=pc.invert(array.is_valid())
        )
    return array.cast(target)


@dataclass(frozen=True)
class _Writer:
    """One schema id: how its values decode (None: the error every one of them gets)."""

    spec: TypedColumn | None
    error: str | None = None
    at: float = 0.0


def _column_decoder(spec: TypedColumn) -> tuple[pa.DataType, GroupDecoder]:
    if spec.format == "json":
        from gregor.columns.json_columns import column_decoder as json_decoder

        return json_decoder(spec)
    if spec.format == "protobuf":
        from gregor.columns.protobuf_columns import column_decoder as protobuf_decoder

        return protobuf_decoder(spec)
    from gregor.columns.avro_columns import column_decoder as avro_decoder

    return avro_decoder(spec)


class TypedConverter:
    """The typed mode ``mode`` of ``topic``, asking the registry at ``client``."""

    def __init__(self, topic: str, mode: str, client: RegistryClient) -> None:
        self.topic = topic
        self.mode = mode
        self.client = client
        self.subject = f"{topic}-value"
        self._writers: dict[int, _Writer] = {}
        self._latest: tuple[int, str, float] | None = None

    def _writer(self, schema_id: int) -> _Writer:
        now = time.monotonic()
        got = self._writers.get(schema_id)
        if got is not None and (got.spec is not None or now - got.at < UNKNOWN_TTL_S):
            return got
        try:
            entry = self.client.schema_by_id(schema_id)
        except RegistryHTTPError as e:
            if e.status != 404:
                raise
            got = _Writer(None, f"schema id {schema_id} is not in the schema registry", now)
            self._writers[schema_id] = got
            return got
        got = self._typed(schema_id, entry, now)
        self._writers[schema_id] = got
        return got

    def _typed(self, schema_id: int, entry: dict[str, object], now: float) -> _Writer:
        kind = str(entry.get("schemaType", "AVRO"))
        fmt = FORMATS.get(kind)
        if fmt is None:
            return _Writer(None, f"schema id {schema_id}: the schema type {kind}", now)
        if entry.get("references"):
            return _Writer(None, f"schema id {schema_id} has references (not supported)", now)
        schema = str(entry["schema"])
        if fmt == "protobuf":  # the compiled descriptor, as the Protobuf columns read it
            served = self.client.call("GET", f"/schemas/ids/{schema_id}", format="serialized")
            schema = str(served.get("schema", "")) if isinstance(served, dict) else ""
        spec = TypedColumn(
            "value", self.client.url, self.subject, 0, schema_id, schema, PERMISSIVE, fmt
        )
        try:
            target, _ = _column_decoder(spec)
        except ValueError as e:  # each format's Unsupported error
            return _Writer(None, f"schema id {schema_id}: {e}", now)
        if not pa.types.is_struct(target):
            return _Writer(None, f"schema id {schema_id}: the value is not a record", now)
        return _Writer(spec, None, now)

    def _framed_latest(self, values: pa.Array) -> pa.Array:
        """The bare payloads framed with the subject's latest id (and, for Protobuf, the
        message index ``[0]``), so they decode as framed ones."""
        now = time.monotonic()
        if self._latest is None or now - self._latest[2] >= LATEST_TTL_S:
            got = self.client.subject_version(self.subject, "latest")
            self._latest = (int(got["id"]), str(got.get("schemaType", "AVRO")), now)
        schema_id, kind, _ = self._latest
        frame = b"\0" + schema_id.to_bytes(4, "big") + (b"\0" if kind == "PROTOBUF" else b"")
        return pc.binary_join_element_wise(
            pa.scalar(frame, pa.binary()), values.cast(pa.binary()), pa.scalar(b"", pa.binary())
        )

    def split(
        self, rows: pa.Table, table_type: pa.DataType | None
    ) -> tuple[pa.Table, pa.Table, pa.DataType | None]:
        """``rows`` (``key_value``) as the typed rows, the dead letters (``key_value`` and
        ``error``) and the ``value`` type the typed rows have (None: no value decoded and the
        table has no ``value`` column yet: the typed rows have none)."""
        n = rows.num_rows
        if n == 0:
            return rows.drop_columns(["value"]), DEAD_LETTER_ARROW_SCHEMA.empty_table(), table_type
        values = rows.column("value").combine_chunks()
        if self.mode == VALUE_SCHEMA_LATEST:
            values = self._framed_latest(values)
        values = binary(values)
        valid, framed, ids = frames(values)
        errors: list[str | None] = [None] * n
        for i in np.nonzero(valid & ~framed)[0]:
            errors[i] = "the value is not framed with a schema id (magic byte 0, 4-byte id)"
        current = table_type
        pieces: list[tuple[np.ndarray, pa.Array]] = []
        rows_framed = np.nonzero(framed)[0]
        for schema_id in np.unique(ids[rows_framed]) if len(rows_framed) else ():
            group = rows_framed[ids[rows_framed] == schema_id]
            writer = self._writer(int(schema_id))
            if writer.spec is None:
                for i in group:
                    errors[i] = writer.error
                continue
            _, decode = _column_decoder(writer.spec)
            got = decode(int(schema_id), group, binary(values.take(pa.array(group))))
            if got is None:
                for i in group:
                    errors[i] = f"schema id {schema_id} cannot be read as its own format"
                continue
            decoded, failed = got
            for i in group[failed]:
                errors[i] = f"the value does not decode with schema id {schema_id}"
            group = np.delete(group, failed)
            if decoded is None or not len(group):
                continue
            try:
                merged = decoded.type if current is None else merge_types(current, decoded.type)
            except TypeClash as e:
                for i in group:
                    errors[i] = f"schema id {schema_id}: {e}"
                continue
            current = merged
            pieces.append((group, decoded))
        bad = np.array([e is not None for e in errors], dtype=bool)
        dead = rows.filter(pa.array(bad)) if bad.any() else rows.schema.empty_table()
        dead = dead.append_column(
            pa.field("error", pa.string()),
            pa.array([e for e in errors if e is not None], pa.string()),
        )
        kept = rows.filter(pa.array(~bad)).drop_columns(["value"])
        if current is None:
            return kept, dead, None
        target = _plain(current)
        if pieces:  # the decoded rows and the null values (which stay null), in row order
            order = np.concatenate([g for g, _ in pieces] + [np.nonzero(~framed & ~bad)[0]])
            parts = [conform(d, target) for _, d in pieces]
            nulls = len(order) - sum(len(p) for p in parts)
            joined = pa.concat_arrays(parts + [pa.nulls(nulls, target)])
            inverse = np.full(n, -1, dtype=np.int64)
            inverse[order] = np.arange(len(order))
            column = joined.take(pa.array(inverse[~bad]))
        else:
            column = pa.nulls(int((~bad).sum()), target)
        return kept.append_column(pa.field("value", target), column), dead, target
