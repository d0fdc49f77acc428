"""The source's options for typed key and value columns, resolved once when a query is planned.

``valueFormat`` / ``keyFormat``: ``binary`` (Spark's Kafka schema, the default), ``avro``,
``json`` or ``protobuf`` (Confluent-framed Avro, JSON Schema or Protobuf through a schema
registry, decoded into a struct column; the subject's schema must be of that type). With a
format: ``schemaRegistry`` (the registry's URL), ``valueSubject`` / ``keySubject`` (default
``<topic>-value`` / ``<topic>-key``, Confluent's TopicNameStrategy, for a query of one topic),
``valueSchemaVersion`` / ``keySchemaVersion`` (``latest``, the default, or a version number:
looked up once, so every task of the query reads with the same schema), and ``mode``
(``FAILFAST``, the default, or ``PERMISSIVE``: a record that does not decode reads as null),
as Spark's ``from_avro`` takes it. A Protobuf column keeps the subject version's compiled
descriptor (``format=serialized``, base64) as its schema, so workers need no protoc.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql.types import DataType, StructField, StructType

from gregor.client.schema_registry import RegistryHTTPError, RegistryUnreachable
from gregor.columns.avro_columns import FAILFAST, PERMISSIVE, AvroColumn, registry_client
from gregor.columns.avro_references import whole
from gregor.columns.avro_schema import AvroUnsupported, parse
from gregor.spark.avro_schema import spark_type
from gregor.spark.options import OptionError, lower_keys

#: The formats of typed columns, as ``valueFormat`` names them, and the registry's schema type.
FORMATS = {"avro": "AVRO", "json": "JSON", "protobuf": "PROTOBUF"}


def column_type(column: AvroColumn) -> DataType:
    """The Spark type a typed column decodes into (raises the format's Unsupported error)."""
    if column.format == "json":
        from gregor.columns import json_schema
        from gregor.spark.json_schema import spark_type as json_spark_type

        return json_spark_type(json_schema.parse(column.schema))
    if column.format == "protobuf":
        from gregor.columns.protobuf_schema import reader_message
        from gregor.spark.protobuf_schema import spark_type as protobuf_spark_type

        return protobuf_spark_type(reader_message(column.schema))
    return spark_type(parse(column.schema))


COLUMN_KEYS = frozenset(
    {
        "valueformat",
        "keyformat",
        "schemaregistry",
        "valuesubject",
        "keysubject",
        "valueschemaversion",
        "keyschemaversion",
        "mode",
    }
)


def _one_topic(opts: dict[str, str]) -> str | None:
    if "subscribe" in opts:
        topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        return topics[0] if len(topics) == 1 else None
    if "assign" in opts:
        import json

        try:
            assigned = json.loads(opts["assign"])
        except ValueError:
            return None
        return next(iter(assigned)) if isinstance(assigned, dict) and len(assigned) == 1 else None
    return None


def parse_columns(
    options: Mapping[str, str], *, sink_topic: str | None = None, sink: bool = False
) -> tuple[AvroColumn, ...]:
    """The columns to decode (or, for a sink, encode), each with its schema looked up in the
    registry now. A sink's default subject comes from its ``topic`` option."""
    opts = lower_keys(options)
    mode = opts.get("mode", FAILFAST).strip().upper()
    if mode not in (FAILFAST, PERMISSIVE):
        raise OptionError(
            f"mode must be FAILFAST or PERMISSIVE (as from_avro takes it), got {opts['mode']!r}"
        )
    out = []
    for column in ("key", "value"):
        fmt = opts.get(f"{column}format", "binary").strip().lower()
        if fmt == "binary":
            for k in (f"{column}subject", f"{column}schemaversion"):
                if k in opts:
                    raise OptionError(
                        f"option {k!r} needs {column}Format 'avro', 'json' or 'protobuf'"
                    )
            continue
        if fmt not in FORMATS:
            raise OptionError(f"{column}Format must be binary, avro, json or protobuf, got {fmt!r}")
        url = opts.get("schemaregistry", "").strip()
        if not url.startswith(("http://", "https://")):
            raise OptionError(
                f"{column}Format {fmt!r} needs the option schemaRegistry: the registry's http:// "
                "or https:// URL"
            )
        subject = opts.get(f"{column}subject", "").strip()
        if not subject:
            topic = sink_topic if sink else _one_topic(opts)
            if topic is None:
                raise OptionError(
                    f"{column}Format {fmt!r} "
                    + ("without a topic option" if sink else "of several topics (or a pattern)")
                    + f" needs the option {column}Subject"
                )
            subject = f"{topic}-{column}"
        version = opts.get(f"{column}schemaversion", "latest").strip().lower()
        if version != "latest" and not version.isdigit():
            raise OptionError(
                f"{column}SchemaVersion must be latest or a version number, got {version!r}"
            )
        try:
            got = registry_client(url).subject_version(subject, version)
        except RegistryHTTPError as e:
            raise OptionError(f"{column}Format {fmt!r}: subject {subject!r}: {e}") from None
        except RegistryUnreachable as e:
            raise OptionError(f"{column}Format {fmt!r}: {e}") from None
        kind = got.get("schemaType", "AVRO")
        if kind != FORMATS[fmt]:
            raise OptionError(
                f"{column}Format {fmt!r}: subject {subject!r} version {got.get('version')} is "
                f"a {kind} schema"
            )
        if got.get("references") and fmt != "avro":
            raise OptionError(
                f"{column}Format {fmt!r}: subject {subject!r} has schema references, which the "
                f"{fmt} typed columns do not support yet (Avro's do)"
            )
        schema = str(got["schema"])
        if fmt == "avro" and got.get("references"):  # the referenced types inlined
            try:
                schema = whole(registry_client(url), schema, got["references"])
            except (RegistryHTTPError, RegistryUnreachable, AvroUnsupported) as e:
                raise OptionError(
                    f"{column}Format 'avro': subject {subject!r}: its references: {e}"
                ) from None
        if fmt == "protobuf":  # the compiled descriptor (base64), which needs no protoc to read
            try:
                served = registry_client(url).call(
                    "GET", f"/schemas/ids/{int(got['id'])}", format="serialized"
                )
            except (RegistryHTTPError, RegistryUnreachable) as e:
                raise OptionError(f"{column}Format 'protobuf': subject {subject!r}: {e}") from None
            schema = str(served.get("schema", "")) if isinstance(served, dict) else ""
        typed = AvroColumn(
            column, url, subject, int(got.get("version", 0)), int(got["id"]), schema, mode, fmt
        )
        try:
            column_type(typed)
        except ValueError as e:  # each format's Unsupported error
            raise OptionError(
                f"{column}Format {fmt!r}: subject {subject!r}: {e} is not supported"
            ) from None
        out.append(typed)
    return tuple(out)


def check_sink_columns(schema: StructType, columns: tuple[AvroColumn, ...]) -> StructType:
    """The sink's input ``schema`` with the encoded columns' struct types checked against their
    schemas (Avro: every field the schema has without a default is there; JSON and Protobuf:
    :func:`gregor.spark.sink_encode.check_column`) and shown as binary, for Spark's Kafka sink
    rules that follow."""
    from pyspark.sql.types import BinaryType

    types = {f.name: f.dataType for f in schema.fields}
    for c in columns:
        t = types.get(c.column)
        if t is None:
            continue  # check_sink_schema says what is missing
        if c.format != "avro":
            from gregor.spark.sink_encode import check_column

            check_column(t, c)
            continue
        node = parse(c.schema)
        if not isinstance(t, StructType) or node.kind != "record":
            raise OptionError(
                f"{c.column}Format 'avro' writes a struct column as the record of subject "
                f"{c.subject}; the {c.column} column is {t.simpleString()}"
            )
        have = set(t.fieldNames())
        missing = [f.name for f in node.fields if f.name not in have and not f.has_default]
        if missing:
            raise OptionError(
                f"the {c.column} column lacks {missing} of subject {c.subject} version {c.version}"
            )
    return StructType(
        [
            StructField(f.name, BinaryType(), f.nullable)
            if f.name in {c.column for c in columns}
            else f
            for f in schema.fields
        ]
    )


def typed_schema(schema: StructType, columns: tuple[AvroColumn, ...]) -> StructType:
    """Spark's Kafka schema with the decoded columns' struct types."""
    types = {c.column: column_type(c) for c in columns}
    return StructType(
        [StructField(f.name, types[f.name], True) if f.name in types else f for f in schema.fields]
    )


__all__ = [
    "COLUMN_KEYS",
    "FORMATS",
    "check_sink_columns",
    "column_type",
    "parse_columns",
    "typed_schema",
]
