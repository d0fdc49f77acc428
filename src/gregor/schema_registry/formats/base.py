"""What every schema format provides to the registry (``ParsedSchema``), and how a schema's
references reach its parser (``Dependency``: the reference's name, and the referenced schema's
type, text and own dependencies, resolved by the registry from the subjects they name)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


class SchemaParseError(ValueError):
    """The text is not a valid schema of its type; the message says why."""


@dataclass(frozen=True)
class Dependency:
    name: str
    schema_type: str
    schema: str
    dependencies: tuple[Dependency, ...] = ()


def flatten(deps: tuple[Dependency, ...]) -> list[Dependency]:
    """Dependencies depth first, each before what depends on it, each name once."""
    out: list[Dependency] = []
    seen: set[str] = set()

    walked: set[int] = set()

    def walk(ds: tuple[Dependency, ...]) -> None:
        for d in ds:
            if d.name in seen:
                continue
            if id(d.dependencies) not in walked:  # shared dependency tuples are walked once
                walked.add(id(d.dependencies))
                walk(d.dependencies)
            seen.add(d.name)
            out.append(d)

    walk(deps)
    return out


@dataclass(frozen=True)
class Incompatibility:
    """One reason a reader cannot read what a writer wrote: Confluent's error type names
    (``READER_FIELD_MISSING_DEFAULT_VALUE``, ``TYPE_MISMATCH``, ...), the path in the schema
    and a sentence."""

    error_type: str
    path: str
    description: str

    def message(self) -> str:
        return f"{{errorType:'{self.error_type}', description:'{self.description}', additionalInfo:'{self.path}'}}"


class ParsedSchema(ABC):
    schema_type: str = ""

    @abstractmethod
    def canonical(self) -> str:
        """The text the registry stores and compares."""

    @abstractmethod
    def normalized(self) -> ParsedSchema:
        """The same schema in normalized form (``normalize=true``)."""

    @abstractmethod
    def incompatibilities(self, writer: ParsedSchema) -> list[Incompatibility]:
        """Why this schema, as the reader, cannot read data written with ``writer``; [] when it can."""

    def formatted(self, fmt: str | None) -> str:
        """The text for ``?format=``; the canonical text unless a format says otherwise."""
        return self.canonical()
