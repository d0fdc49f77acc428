"""The registry's state, rebuilt from the ``_schemas`` topic record by record.

Theory of operation. ``RegistryState.apply(key, value)`` is the only way the state changes: the
reader applies every record of the topic in offset order, from the start at boot and then as
records arrive, the writer's own included (a write is answered only once the reader has
applied it). So every registry reading the same topic ends up with the same state, and a
restarted registry rebuilds exactly the state it had: the same subjects, versions and ids.

What is kept: per subject, its versions (``SchemaVersion``: id, type, text, references,
soft-deleted flag); per id, the schema (type, text, references) and which subject versions use
it; the compatibility levels and modes (global under None); and the highest id ever read,
from which the writer allocates the next one. Records that do not decode are skipped
(``records`` explains why that is safe).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gregor.schema_registry.records import (
    Key,
    Reference,
    SchemaValue,
    decode_schema_value,
    decode_value,
)

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]
    deleted: bool = False


@dataclass(frozen=True)
class StoredSchema:
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        self.schemas: dict[int, StoredSchema] = {}
        self.id_users: dict[int, set[tuple[str, int]]] = {}
        self.config: dict[str | None, str] = {}
        self.mode: dict[str | None, str] = {}
        self.max_id = 0
        self.skipped = 0

    # --- applying records ---

    def apply(self, key: Key | None, raw_value: bytes | None) -> None:
        if key is None:
            self.skipped += 1
            return
        if key.keytype == "SCHEMA":
            assert key.subject is not None and key.version is not None
            if raw_value is None:
                self._drop_version(key.subject, key.version)
                return
            value = decode_schema_value(raw_value)
            if value is None or value.subject != key.subject or value.version != key.version:
                self.skipped += 1
                return
            self._put_version(value)
        elif key.keytype in ("CONFIG", "MODE"):
            table = self.config if key.keytype == "CONFIG" else self.mode
            field_name = "compatibilityLevel" if key.keytype == "CONFIG" else "mode"
            obj = decode_value(raw_value)
            if obj is None:
                table.pop(key.subject, None)
                return
            level = obj.get(field_name)
            if isinstance(level, str):
                table[key.subject] = level
            else:
                self.skipped += 1
        elif key.keytype == "DELETE_SUBJECT":
            obj = decode_value(raw_value)
            upto = obj.get("version") if obj else None
            if not isinstance(upto, int) or key.subject is None:
                self.skipped += 1
                return
            versions = self.subjects.get(key.subject, {})
            for v, sv in list(versions.items()):
                if v <= upto and not sv.deleted:
                    versions[v] = replace(sv, deleted=True)
        # CLEAR_SUBJECT and NOOP change nothing here.

    def _put_version(self, value: SchemaValue) -> None:
        versions = self.subjects.setdefault(value.subject, {})
        old = versions.get(value.version)
        if old is not None:
            self._release_id(old.id, old.subject, old.version)
        versions[value.version] = SchemaVersion(
            value.subject,
            value.version,
            value.id,
            value.schema_type,
            value.schema,
            value.references,
            value.deleted,
        )
        if value.id not in self.schemas:
            self.schemas[value.id] = StoredSchema(
                value.id, value.schema_type, value.schema, value.references
            )
        self.id_users.setdefault(value.id, set()).add((value.subject, value.version))
        self.max_id = max(self.max_id, value.id)

    def _drop_version(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        if not versions or version not in versions:
            return
        sv = versions.pop(version)
        if not versions:
            del self.subjects[subject]
        self._release_id(sv.id, subject, version)

    def _release_id(self, sid: int, subject: str, version: int) -> None:
        users = self.id_users.get(sid)
        if users is None:
            return
        users.discard((subject, version))
        if not users:
            del self.id_users[sid]
            self.schemas.pop(sid, None)

    # --- reading ---

    def versions(self, subject: str, *, deleted: bool = False) -> list[SchemaVersion]:
        return [
            sv
            for _, sv in sorted(self.subjects.get(subject, {}).items())
            if deleted or not sv.deleted
        ]

    def live_subjects(self) -> list[str]:
        return sorted(
            s for s, vs in self.subjects.items() if any(not v.deleted for v in vs.values())
        )

    def all_subjects(self) -> list[str]:
        return sorted(self.subjects)

    def compatibility(self, subject: str | None) -> str:
        if subject is not None and subject in self.config:
            return self.config[subject]
        return self.config.get(None, DEFAULT_COMPATIBILITY)

    def mode_of(self, subject: str | None) -> str:
        if subject is not None and subject in self.mode:
            return self.mode[subject]
        return self.mode.get(None, DEFAULT_MODE)

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of the live schema versions whose references name ``subject`` ``version``."""
        out = set()
        for versions in self.subjects.values():
            for sv in versions.values():
                if sv.deleted:
                    continue
                if any(r.subject == subject and r.version == version for r in sv.references):
                    out.add(sv.id)
        return sorted(out)
