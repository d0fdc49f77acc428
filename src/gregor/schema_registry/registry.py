"""The registry's operations, on the state and the store: what each endpoint of the REST API
does, without HTTP.

Theory of operation. Reads answer from ``RegistryState`` as the reader last left it. Every
change (register, delete, config, mode) runs under one lock: it checks the state, appends its
records through ``KafkaStore.write`` (which returns once the record has been read back and
applied) and answers from the state. Only the elected writer of the topic gets here
(``election``; the others forward the request), so the lock makes check-then-write atomic and
ids are allocated as the highest id read plus one; ``may_write`` refuses a write whose
writer lost its election meanwhile (50004), before anything is appended.

Registering follows Confluent's rules: a schema identical to a live version of the subject
returns that version's id; otherwise it is checked against the subject's live versions at the
subject's compatibility level, reuses the id of an identical schema under any other subject
(ids are per schema, not per subject), and becomes the subject's next version (one past the
highest version ever written, soft-deleted ones included). ``IMPORT`` mode takes the id and
version from the request and skips the compatibility check; ``READONLY`` modes refuse changes.

Parsing (``formats``) runs in a thread pool, protoc in a child process: a large or hostile
schema does not stall the event loop. Parsed schemas are cached by their text and references.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gregor.schema_registry import errors
from gregor.schema_registry.formats import SCHEMA_TYPES, parse
from gregor.schema_registry.formats.base import (
    Dependency,
    Incompatibility,
    ParsedSchema,
    SchemaParseError,
)
from gregor.schema_registry.records import (
    Key,
    Reference,
    SchemaValue,
    config_value,
    delete_subject_value,
    mode_value,
)
from gregor.schema_registry.state import RegistryState, SchemaVersion
from gregor.schema_registry.store import KafkaStore

COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1
MAX_REFERENCE_DEPTH = 32
MAX_REFERENCES = 1000
PARSE_CACHE_SIZE = 512
PARSE_CACHE_BYTES = 64 * 1024 * 1024  # of schema text: a few huge schemas cannot fill memory


@dataclass(frozen=True)
class Candidate:
    """A schema as a request gives it."""

    schema_type: str
    schema: str
    references: tuple[Reference, ...]


def parse_version(text: str) -> int | None:
    """A version from a path: an int in [1, 2^31-1], or None for ``latest`` / ``-1``."""
    if text in ("latest", "-1"):
        return None
    if not text.isdigit() or len(text) > 10 or not 1 <= int(text) <= MAX_VERSION:
        raise errors.invalid_version(text)
    return int(text)


def context_of(subject: str) -> str:
    """The context a subject belongs to: ``:.ctx:name`` is in ``.ctx``, anything else in ``.``."""
    if subject.startswith(":.") and subject.count(":") >= 2:
        return subject[1 : subject.index(":", 1)]
    return "."


class SchemaRegistry:
    def __init__(self, state: RegistryState, store: KafkaStore | None) -> None:
        self.state = state
        self.store = store
        #: The writer election's check (``WriterElection.may_write``); None: always the writer.
        self.may_write: Callable[[], bool] | None = None
        self._lock = asyncio.Lock()
        self._parsed_bytes = 0
        self._parsed: OrderedDict[tuple[str, str, tuple[Reference, ...]], ParsedSchema] = (
            OrderedDict()
        )

    # --- parsing ---

    def _dependencies(
        self,
        refs: tuple[Reference, ...],
        depth: int = 0,
        memo: dict[tuple[str, int], tuple[Dependency, ...]] | None = None,
    ) -> tuple[Dependency, ...]:
        """The references resolved, recursively. Each subject version is resolved once per call
        (``memo``): references that share dependencies (a diamond, repeated at every level)
        cost their number of distinct versions, not 2^depth."""
        memo = {} if memo is None else memo
        if depth > MAX_REFERENCE_DEPTH:
            raise errors.invalid_schema("references nest too deeply (or form a cycle)")
        out = []
        for ref in refs:
            sv = self.state.subjects.get(ref.subject, {}).get(ref.version)
            if ref.version == -1:
                live = self.state.versions(ref.subject)
                sv = live[-1] if live else None
            if sv is None:
                raise errors.invalid_schema(
                    f"the reference {ref.name!r} names subject '{ref.subject}' version {ref.version}, which does "
                    "not exist"
                )
            key = (sv.subject, sv.version)
            if key not in memo:
                if len(memo) >= MAX_REFERENCES:
                    raise errors.invalid_schema(f"more than {MAX_REFERENCES} schemas referenced")
                memo[key] = self._dependencies(sv.references, depth + 1, memo)
            out.append(Dependency(ref.name, sv.schema_type, sv.schema, memo[key]))
        return tuple(out)

    async def parsed(self, c: Candidate) -> ParsedSchema:
        key = (c.schema_type, c.schema, c.references)
        hit = self._parsed.get(key)
        if hit is not None:
            self._parsed.move_to_end(key)
            return hit
        deps = self._dependencies(c.references)
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(None, parse, c.schema_type, c.schema, deps)
        except SchemaParseError as e:
            raise errors.invalid_schema(str(e)) from None
        self._parsed[key] = result
        self._parsed_bytes += len(c.schema)
        while len(self._parsed) > PARSE_CACHE_SIZE or (
            self._parsed_bytes > PARSE_CACHE_BYTES and len(self._parsed) > 1
        ):
            (_, old_text, _), _ = self._parsed.popitem(last=False)
            self._parsed_bytes -= len(old_text)
        return result

    async def _parsed_version(self, sv: SchemaVersion) -> ParsedSchema:
        try:
            return await self.parsed(Candidate(sv.schema_type, sv.schema, sv.references))
        except errors.RegistryError as e:
            raise errors.store_error(
                f"the stored schema {sv.subject} version {sv.version} does not parse: {e.message}"
            ) from None

    # --- reads ---

    def subjects(self, prefix: str | None, deleted: bool, deleted_only: bool) -> list[str]:
        out = []
        for subject in self.state.all_subjects():
            if prefix and not subject.startswith(prefix):
                continue
            versions = self.state.subjects[subject].values()
            live = any(not v.deleted for v in versions)
            dead = any(v.deleted for v in versions)
            if (deleted_only and dead) or (not deleted_only and (live or (deleted and dead))):
                out.append(subject)
        return out

    def _subject_versions(self, subject: str, deleted: bool) -> list[SchemaVersion]:
        versions = self.state.versions(subject, deleted=deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return versions

    def versions(self, subject: str, deleted: bool, deleted_only: bool) -> list[int]:
        versions = self._subject_versions(subject, deleted or deleted_only)
        return [v.version for v in versions if not deleted_only or v.deleted]

    def get_version(self, subject: str, version: str, deleted: bool = False) -> SchemaVersion:
        number = parse_version(version)
        all_versions = self.state.subjects.get(subject)
        if not all_versions:
            raise errors.subject_not_found(subject)
        if number is None:
            live = self.state.versions(subject, deleted=deleted)
            if not live:
                raise errors.version_not_found(subject, version)
            return live[-1]
        sv = all_versions.get(number)
        if sv is None or (sv.deleted and not deleted):
            raise errors.version_not_found(subject, number)
        return sv

    def schema_by_id(self, schema_id: int) -> SchemaVersion:
        stored = self.state.schemas.get(schema_id)
        users = self.state.id_users.get(schema_id)
        if stored is None or not users:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        subject, version = min(users)
        return self.state.subjects[subject][version]

    def id_users(self, schema_id: int, subject: str | None, deleted: bool) -> list[SchemaVersion]:
        self.schema_by_id(schema_id)
        out = []
        for s, v in sorted(self.state.id_users.get(schema_id, ())):
            sv = self.state.subjects[s][v]
            if (deleted or not sv.deleted) and (subject is None or s == subject):
                out.append(sv)
        return out

    async def formatted(self, sv: SchemaVersion, fmt: str | None) -> str:
        if not fmt or sv.schema_type == "AVRO" or sv.schema_type == "JSON":
            return sv.schema
        if fmt not in ("serialized", "default"):
            raise errors.unprocessable(f"unknown format {fmt!r} for a {sv.schema_type} schema")
        return (await self._parsed_version(sv)).formatted(fmt)

    def referenced_by(self, subject: str, version: str) -> list[int]:
        sv = self.get_version(subject, version, deleted=True)
        return self.state.referenced_by(sv.subject, sv.version)

    def contexts(self) -> list[str]:
        return sorted({"."} | {context_of(s) for s in self.state.subjects})

    # --- matching and compatibility ---

    async def _matching(
        self, subject: str, c: Candidate, normalize: bool, deleted: bool
    ) -> SchemaVersion | None:
        versions = self.state.versions(subject, deleted=deleted)
        for sv in reversed(versions):
            if (
                sv.schema_type == c.schema_type
                and sv.schema == c.schema
                and sv.references == c.references
            ):
                return sv
        parsed = await self.parsed(c)
        text = (parsed.normalized() if normalize else parsed).canonical()
        for sv in reversed(versions):
            if sv.schema_type != c.schema_type or sv.references != c.references:
                continue
            if sv.schema == text:
                return sv
            if normalize:
                old = await self._parsed_version(sv)
                if old.normalized().canonical() == text:
                    return sv
        return None

    async def _incompatibilities(
        self, level: str, new: ParsedSchema, olds: list[SchemaVersion]
    ) -> list[str]:
        if level == "NONE" or not olds:
            return []
        if not level.endswith("_TRANSITIVE"):
            olds = olds[-1:]
        messages: list[str] = []
        for sv in reversed(olds):
            old = await self._parsed_version(sv)
            found: list[Incompatibility] = []
            try:
                if level.startswith(("BACKWARD", "FULL")):
                    found += new.incompatibilities(old)
                if level.startswith(("FORWARD", "FULL")):
                    found += old.incompatibilities(new)
            except RecursionError:  # fail closed
                found.append(
                    Incompatibility(
                        "SCHEMA_TOO_DEEP", "/", "the schemas nest too deeply to be compared"
                    )
                )
            if found:
                messages += [f.message() for f in found]
                messages += [
                    f"{{oldSchemaVersion: {sv.version}}}",
                    f"{{oldSchema: '{sv.schema}'}}",
                    f"{{compatibility: '{level}'}}",
                ]
        return messages

    async def check_compatibility(
        self, subject: str, version: str | None, c: Candidate, normalize: bool
    ) -> list[str]:
        """The reasons ``c`` is incompatible ([] when compatible): against one version (at the
        subject's level, not transitively), or against the subject's versions as its level says."""
        new = await self.parsed(c)
        if normalize:
            new = new.normalized()
        level = self.state.compatibility(subject)
        if version is None:
            return await self._incompatibilities(level, new, self.state.versions(subject))
        sv = self.get_version(subject, version)
        return await self._incompatibilities(level.replace("_TRANSITIVE", ""), new, [sv])

    # --- writes ---

    def _check_writable(self, subject: str | None) -> None:
        mode = self.state.mode_of(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            where = f"Subject {subject}" if subject else "The registry"
            raise errors.operation_not_permitted(f"{where} is in read-only mode")

    async def _write(self, key: Key, value: bytes | None) -> None:
        if self.store is None or (self.may_write is not None and not self.may_write()):
            raise errors.unknown_leader("this registry is not the writer (any more)")
        await self.store.write(key, value)

    async def register(
        self,
        subject: str,
        c: Candidate,
        normalize: bool,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> SchemaVersion:
        if c.schema_type not in SCHEMA_TYPES:
            raise errors.invalid_schema(f"unknown schema type {c.schema_type!r}")
        async with self._lock:
            self._check_writable(subject)
            mode = self.state.mode_of(subject)
            importing = mode == "IMPORT"
            if (schema_id is not None or version is not None) and not importing:
                raise errors.operation_not_permitted(
                    f"Subject {subject} is not in import mode: a schema id or version cannot be given"
                )
            parsed = await self.parsed(c)
            if normalize:
                parsed = parsed.normalized()
            text = parsed.canonical()
            same = await self._matching(subject, c, normalize, deleted=False)
            if same is not None and schema_id is None:
                return same
            live = self.state.versions(subject)
            if not importing:
                messages = await self._incompatibilities(
                    self.state.compatibility(subject), parsed, live
                )
                if messages:
                    raise errors.incompatible(messages)
            existing_id = self._id_of(c.schema_type, text, c.references)
            if schema_id is not None:
                stored = self.state.schemas.get(schema_id)
                if stored is not None and (
                    stored.schema_type,
                    stored.schema,
                    stored.references,
                ) != (c.schema_type, text, c.references):
                    raise errors.operation_not_permitted(
                        f"Overwrite new schema with id {schema_id} is not permitted: the id is another schema's"
                    )
                new_id = schema_id
            else:
                new_id = existing_id if existing_id is not None else self.state.max_id + 1
            all_versions = self.state.subjects.get(subject, {})
            if version is not None:
                if version in all_versions:
                    raise errors.operation_not_permitted(
                        f"Subject {subject} already has a version {version}"
                    )
                new_version = version
            else:
                new_version = max(all_versions, default=0) + 1
            value = SchemaValue(subject, new_version, new_id, text, c.schema_type, c.references)
            await self._write(Key("SCHEMA", subject, new_version), value.encode())
            return self.state.subjects[subject][new_version]

    def _id_of(self, schema_type: str, text: str, refs: tuple[Reference, ...]) -> int | None:
        for sid, stored in self.state.schemas.items():
            if (
                stored.schema_type == schema_type
                and stored.schema == text
                and stored.references == refs
            ):
                return sid
        return None

    async def lookup(
        self, subject: str, c: Candidate, normalize: bool, deleted: bool
    ) -> SchemaVersion:
        if not self.state.versions(subject, deleted=deleted):
            raise errors.subject_not_found(subject)
        found = await self._matching(subject, c, normalize, deleted)
        if found is None:
            raise errors.schema_not_found("Schema not found")
        return found

    def _referenced(self, subject: str, versions: list[SchemaVersion]) -> None:
        for sv in versions:
            if self.state.referenced_by(subject, sv.version):
                raise errors.reference_exists(
                    f"One or more references exist to the schema {{subject={subject}, version={sv.version}}}"
                )

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self._lock:
            self._check_writable(subject)
            all_versions = self.state.versions(subject, deleted=True)
            if not all_versions:
                raise errors.subject_not_found(subject)
            live = [v for v in all_versions if not v.deleted]
            if permanent:
                if live:
                    raise errors.subject_not_soft_deleted(subject)
                self._referenced(subject, all_versions)
                for sv in all_versions:
                    await self._write(Key("SCHEMA", subject, sv.version), None)
                if subject in self.state.config:
                    await self._write(Key("CONFIG", subject), None)
                if subject in self.state.mode:
                    await self._write(Key("MODE", subject), None)
                return [sv.version for sv in all_versions]
            if not live:
                raise errors.subject_soft_deleted(subject)
            self._referenced(subject, live)
            await self._write(
                Key("DELETE_SUBJECT", subject), delete_subject_value(subject, live[-1].version)
            )
            return [sv.version for sv in live]

    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        async with self._lock:
            self._check_writable(subject)
            number = parse_version(version)
            if not self.state.subjects.get(subject):
                raise errors.subject_not_found(subject)
            if number is None:
                live = self.state.versions(subject)
                if not live:
                    raise errors.version_not_found(subject, version)
                sv = live[-1]
            else:
                found = self.state.subjects[subject].get(number)
                if found is None:
                    raise errors.version_not_found(subject, number)
                sv = found
            if permanent:
                if not sv.deleted:
                    raise errors.version_not_soft_deleted(subject, sv.version)
                self._referenced(subject, [sv])
                await self._write(Key("SCHEMA", subject, sv.version), None)
                return sv.version
            if sv.deleted:
                raise errors.version_soft_deleted(subject, sv.version)
            self._referenced(subject, [sv])
            value = SchemaValue(
                subject, sv.version, sv.id, sv.schema, sv.schema_type, sv.references, deleted=True
            )
            await self._write(Key("SCHEMA", subject, sv.version), value.encode())
            return sv.version

    # --- config and mode ---

    def get_config(self, subject: str | None, default_to_global: bool) -> str:
        if subject is None:
            return self.state.compatibility(None)
        if subject in self.state.config:
            return self.state.config[subject]
        if default_to_global:
            return self.state.compatibility(None)
        raise errors.subject_compatibility_not_configured(subject)

    async def set_config(self, subject: str | None, level: Any) -> str:
        if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
            raise errors.invalid_compatibility_level(level)
        chosen = str(level).upper()
        async with self._lock:
            await self._write(Key("CONFIG", subject), config_value(chosen))
        return chosen

    async def delete_config(self, subject: str | None) -> str:
        async with self._lock:
            if subject is not None and subject not in self.state.config:
                if subject not in self.state.subjects:
                    raise errors.subject_not_found(subject)
                raise errors.subject_compatibility_not_configured(subject)
            old = self.state.compatibility(subject)
            await self._write(Key("CONFIG", subject), None)
            return old

    def get_mode(self, subject: str | None, default_to_global: bool) -> str:
        if subject is None:
            return self.state.mode_of(None)
        if subject in self.state.mode:
            return self.state.mode[subject]
        if default_to_global:
            return self.state.mode_of(None)
        raise errors.subject_mode_not_configured(subject)

    async def set_mode(self, subject: str | None, mode: Any, force: bool) -> str:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        chosen = str(mode).upper()
        async with self._lock:
            if chosen == "IMPORT" and not force:
                has = (
                    self.state.versions(subject, deleted=True)
                    if subject
                    else self.state.all_subjects()
                )
                if has:
                    raise errors.operation_not_permitted(
                        "Cannot import since found existing subjects (use force=true to override)"
                    )
            await self._write(Key("MODE", subject), mode_value(chosen))
        return chosen

    async def delete_mode(self, subject: str | None) -> str:
        async with self._lock:
            if subject is not None and subject not in self.state.mode:
                if subject not in self.state.subjects:
                    raise errors.subject_not_found(subject)
                raise errors.subject_mode_not_configured(subject)
            old = self.state.mode_of(subject)
            await self._write(Key("MODE", subject), None)
            return old
