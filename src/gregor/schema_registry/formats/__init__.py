"""Schema formats: parsing, canonical and normalized text, and compatibility rules, one module
per format (``avro``, ``json_schema``, ``protobuf``); ``parse`` picks the module by the
registry's ``schemaType`` name."""

from __future__ import annotations

from gregor.schema_registry.formats.base import Dependency, ParsedSchema

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")


def parse(schema_type: str, text: str, dependencies: tuple[Dependency, ...] = ()) -> ParsedSchema:
    """Parse ``text`` as ``schema_type`` with its resolved references; raises
    ``base.SchemaParseError`` with the reason when it is not a valid schema."""
    if schema_type == "AVRO":
        from gregor.schema_registry.formats.avro import AvroSchema

        return AvroSchema.parse(text, dependencies)
    if schema_type == "JSON":
        from gregor.schema_registry.formats.json_schema import JsonSchema

        return JsonSchema.parse(text, dependencies)
    if schema_type == "PROTOBUF":
        from gregor.schema_registry.formats.protobuf import ProtobufSchema

        return ProtobufSchema.parse(text, dependencies)
    raise ValueError(f"unknown schema type {schema_type!r}")


__all__ = ["SCHEMA_TYPES", "Dependency", "ParsedSchema", "parse"]
