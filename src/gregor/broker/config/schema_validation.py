"""Confluent Server's schema ID validation settings: the topic configs that turn it on
(``confluent.key.schema.validation`` / ``confluent.value.schema.validation``), the subject name
strategies (``confluent.key.subject.name.strategy`` / ``confluent.value.subject.name.strategy``),
the broker's registry (``confluent.schema.registry.url``, else the registry this broker
serves itself at ``schema.registry.listener``), and Gregor's own deeper level
(``gregor.key.schema.validation.level`` / ``gregor.value.schema.validation.level``): ``id``,
Confluent Server's check of the schema id only (the default), or ``decode``, which also decodes
each payload against the id's schema (``replication.schema_decoder``).

A strategy is given by its short name or by Confluent's fully qualified class name
(``io.confluent.kafka.serializers.subject.TopicNameStrategy``); both mean the same.
``SchemaPolicy.of`` reads a topic's overrides into what the leader checks
(``replication.schema_id_validator``). No state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

KEY_VALIDATION = "confluent.key.schema.validation"
VALUE_VALIDATION = "confluent.value.schema.validation"
KEY_STRATEGY = "confluent.key.subject.name.strategy"
VALUE_STRATEGY = "confluent.value.subject.name.strategy"
REGISTRY_URL = "confluent.schema.registry.url"
KEY_LEVEL = "gregor.key.schema.validation.level"
VALUE_LEVEL = "gregor.value.schema.validation.level"
ID_LEVEL = "id"
DECODE_LEVEL = "decode"
LEVELS = (ID_LEVEL, DECODE_LEVEL)

TOPIC_NAME = "TopicNameStrategy"
RECORD_NAME = "RecordNameStrategy"
TOPIC_RECORD_NAME = "TopicRecordNameStrategy"
STRATEGIES = (TOPIC_NAME, RECORD_NAME, TOPIC_RECORD_NAME)
_CLASS_PREFIX = "io.confluent.kafka.serializers.subject."


def strategy_of(text: str) -> str | None:
    """The strategy's short name for a short or fully qualified name; None if unknown."""
    name = text.strip()
    if name.startswith(_CLASS_PREFIX):
        name = name[len(_CLASS_PREFIX) :]
    return name if name in STRATEGIES else None


def strategy_error(text: str) -> str | None:
    """Why ``text`` is not a subject name strategy (a topic config's extra check)."""
    if strategy_of(text) is None:
        return f"must be one of {', '.join(STRATEGIES)} (or {_CLASS_PREFIX}<name>)"
    return None


def _on(configs: Mapping[str, str], name: str) -> bool:
    return configs.get(name, "false").strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class SchemaPolicy:
    """What the leader checks of a topic's records: each side's strategy, None when off, and
    whether each side's payloads are decoded against their schema (level ``decode``)."""

    key: str | None
    value: str | None
    decode_key: bool = False
    decode_value: bool = False

    @property
    def decodes(self) -> bool:
        return self.decode_key or self.decode_value

    @classmethod
    def of(cls, configs: Mapping[str, str]) -> SchemaPolicy | None:
        """The topic's policy, or None when neither side is validated (the common case)."""
        key = _on(configs, KEY_VALIDATION)
        value = _on(configs, VALUE_VALIDATION)
        if not key and not value:
            return None
        return cls(
            strategy_of(configs.get(KEY_STRATEGY, TOPIC_NAME)) or TOPIC_NAME if key else None,
            strategy_of(configs.get(VALUE_STRATEGY, TOPIC_NAME)) or TOPIC_NAME if value else None,
            key and _decode(configs, KEY_LEVEL),
            value and _decode(configs, VALUE_LEVEL),
        )


def _decode(configs: Mapping[str, str], name: str) -> bool:
    return configs.get(name, ID_LEVEL).strip().lower() == DECODE_LEVEL


def registry_urls(
    configured: object, served: tuple[str, int] | None, https: bool = False
) -> tuple[str, ...]:
    """The registry URLs the broker asks: ``confluent.schema.registry.url`` (a comma-separated
    list, tried in order), else the registry served beside the broker (``https`` when it
    serves https), else none."""
    text = str(configured or "").strip()
    if text:
        return tuple(u.strip().rstrip("/") for u in text.split(",") if u.strip())
    if served is not None:
        host, port = served
        return (f"http{'s' if https else ''}://{f'[{host}]' if ':' in host else host}:{port}",)
    return ()


def registry_url_error(configured: object) -> str | None:
    """Why ``confluent.schema.registry.url`` is not a list of http(s)://host[:port] URLs."""
    text = str(configured or "").strip()
    if not text:
        return None
    for url in (u.strip() for u in text.split(",")):
        try:
            split = urlsplit(url)
            split.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            split = None
        if (
            split is None
            or split.scheme not in ("http", "https")
            or not split.hostname
            or split.username is not None
            or split.query
            or split.fragment
        ):
            return (
                f"{REGISTRY_URL}={configured}: use http(s)://host:port[/path], comma-separated "
                "(no credentials in the URL)"
            )
    return None
