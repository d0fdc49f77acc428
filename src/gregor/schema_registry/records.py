"""The ``_schemas`` topic's records, in Confluent's layout, so that a registry's topic can be
exported to or imported from Confluent Schema Registry (or Karapace) unchanged.

Every record's key and value are JSON. The key names what the record is about:

- ``{"keytype":"SCHEMA","subject":S,"version":V,"magic":1}``: one version of a subject. The value
  is ``{"subject":S,"version":V,"id":ID,"schemaType":T,"references":[...],"schema":TEXT,
  "deleted":B}`` (``schemaType`` left out for Avro, ``references`` when empty); a soft delete
  rewrites it with ``"deleted":true``, a permanent delete is a tombstone (null value).
- ``{"keytype":"CONFIG","subject":S|null,"magic":0}``: a compatibility level, per subject or
  global (null), value ``{"compatibilityLevel":LEVEL}``; a tombstone removes it.
- ``{"keytype":"MODE","subject":S|null,"magic":0}``: a mode, value ``{"mode":MODE}``.
- ``{"keytype":"DELETE_SUBJECT","subject":S,"magic":0}``: value ``{"subject":S,"version":V}``,
  every version up to V soft deleted.
- ``{"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}``: a key type of Confluent's layout that
  this registry neither writes nor needs (the SCHEMA tombstones carry a permanent deletion); read
  and ignored.
- ``{"keytype":"NOOP","magic":0}``: no content; a writer appends one and waits to read it back
  to know it has read everything before it.

Records this module cannot read (not JSON, an unknown keytype, a value with the wrong shape)
decode to None and are skipped by the reader, as Confluent's and Karapace's readers do, so a
hostile or newer record never stops the registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_SUBJECT_LENGTH = 8192
KEY_TYPES = ("SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")


@dataclass(frozen=True)
class Key:
    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        if self.keytype == "SCHEMA":
            obj: dict[str, Any] = {
                "keytype": "SCHEMA",
                "subject": self.subject,
                "version": self.version,
                "magic": 1,
            }
        elif self.keytype == "NOOP":
            obj = {"keytype": "NOOP", "magic": 0}
        else:
            obj = {"keytype": self.keytype, "subject": self.subject, "magic": 0}
        return _dumps(obj)


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = field(default_factory=tuple)
    deleted: bool = False

    def encode(self) -> bytes:
        obj: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            obj["schemaType"] = self.schema_type
        if self.references:
            obj["references"] = [r.to_json() for r in self.references]
        obj["schema"] = self.schema
        obj["deleted"] = self.deleted
        return _dumps(obj)


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _loads(raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def decode_key(raw: bytes | None) -> Key | None:
    obj = _loads(raw)
    if not isinstance(obj, dict):
        return None
    keytype = obj.get("keytype")
    if keytype not in KEY_TYPES:
        return None
    subject = obj.get("subject")
    if subject is not None and not isinstance(subject, str):
        return None
    if keytype == "SCHEMA":
        version = obj.get("version")
        if not isinstance(subject, str) or not _is_int(version):
            return None
        return Key("SCHEMA", subject, version)
    if keytype in ("DELETE_SUBJECT", "CLEAR_SUBJECT") and subject is None:
        return None
    return Key(keytype, subject)


def parse_references(raw: Any) -> tuple[Reference, ...] | None:
    """A ``references`` list, or None when it is not one."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        return None
    out = []
    for r in raw:
        if not isinstance(r, dict):
            return None
        name, subject, version = r.get("name"), r.get("subject"), r.get("version")
        if not isinstance(name, str) or not isinstance(subject, str) or not _is_int(version):
            return None
        assert isinstance(version, int)
        out.append(Reference(name, subject, version))
    return tuple(out)


def decode_schema_value(raw: bytes) -> SchemaValue | None:
    obj = _loads(raw)
    if not isinstance(obj, dict):
        return None
    subject, version, sid, schema = (
        obj.get("subject"),
        obj.get("version"),
        obj.get("id"),
        obj.get("schema"),
    )
    schema_type = obj.get("schemaType", "AVRO")
    if (
        not isinstance(subject, str)
        or not _is_int(version)
        or not _is_int(sid)
        or not isinstance(schema, str)
    ):
        return None
    if not isinstance(schema_type, str):
        return None
    assert isinstance(version, int) and isinstance(sid, int)
    refs = parse_references(obj.get("references"))
    if refs is None:
        return None
    return SchemaValue(
        subject, version, sid, schema, schema_type, refs, bool(obj.get("deleted", False))
    )


def decode_value(raw: bytes | None) -> dict[str, Any] | None:
    """A CONFIG, MODE or DELETE_SUBJECT value as a dict (None: tombstone or unreadable)."""
    obj = _loads(raw)
    return obj if isinstance(obj, dict) else None


def config_value(level: str) -> bytes:
    return _dumps({"compatibilityLevel": level})


def mode_value(mode: str) -> bytes:
    return _dumps({"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dumps({"subject": subject, "version": version})
