"""The settings of topics as tables: per-topic modes and the broker's catalog.

Per topic (Kafka-style topic configs, validated by ``gregor.broker.config.topic_configs``):

* ``iceberg.mode``: ``disabled`` (the default), ``key_value`` (key, value, headers, timestamp,
  partition and offset columns), ``value_schema_id_prefix`` and ``value_schema_latest`` (the
  value decoded into a typed ``value`` struct with the schema registry's schemas, records that
  do not convert in the dead-letter table ``<topic>~dlq``: ``gregor.tables.typed``). The typed
  modes need the broker's schema registry (``confluent.schema.registry.url``, or the one it
  serves at ``schema.registry.listener``): without one they answer INVALID_CONFIG
  (:func:`registry_error`), and a broker that finds such a topic at start stops.
* ``iceberg.target.lag.ms``: how long a record may wait in the translator's buffer before a
  commit makes it visible in the table (default 60,000);
* ``iceberg.retention.ms``: rows whose record timestamp is older than this are deleted from the
  table (default -1: the table keeps everything, whatever the topic's own ``retention.ms``);
* ``iceberg.compaction.min.input.files``: an hour partition of the table with at least this many
  small data files is rewritten into one (default 5, as Iceberg's ``rewrite_data_files``
  ``min-input-files``; 0: never on its own, ``gregor tables compact`` still can);
* ``iceberg.maintenance.interval.ms``: how often the table's maintenance runs (retention,
  snapshot expiry, compaction; default 300,000, as Kafka's ``log.retention.check.interval.ms``);
* ``iceberg.upsert``: a compacted topic's table as an upsert table (default false): one row per
  (partition, key), the key's record with the highest offset, a tombstone deleting the row
  (``gregor.tables.upsert``). Only with ``iceberg.mode=key_value`` on a topic whose
  ``cleanup.policy`` has ``compact`` (:func:`upsert_error`); it cannot change while the table is
  on (turning the table off deletes it with ``iceberg.mode=disabled``). The table records its
  kind when it is made, and a topic whose setting disagrees with its (older) table's kind is
  not translated: the translator says why until the table is dropped or the setting put back
  (``gregor.tables.catalog``).

Snapshot expiry follows the table's own Iceberg properties, ``history.expire.max-snapshot-age-ms``
(default 5 days) and ``history.expire.min-snapshots-to-keep`` (default 1), which any Iceberg
tool can set (``gregor.tables.maintenance``).

Per broker (``server.properties``): ``iceberg.catalog.type`` (``sql``: pyiceberg's SQL catalog
on SQLite in the broker's first data directory; ``rest`` with ``iceberg.catalog.uri``),
``iceberg.warehouse`` (where data files go; by default a directory beside that catalog, or an
object store: ``s3://bucket/prefix``) and ``iceberg.namespace`` (the tables' namespace,
``gregor``).

A REST catalog (``iceberg.catalog.type=rest``) is pyiceberg's ``RestCatalog`` at
``iceberg.catalog.uri`` (an http:// or https:// URL, :func:`rest_uri`). The server makes each
table's location; ``iceberg.warehouse``, when set, is given to it as its ``warehouse``
property verbatim (a location or a warehouse name, as the server defines it) and nothing is
assumed when it is not (:func:`rest_warehouse`). In a cluster it must still be an object store
(:func:`shared_catalog_error`): where an unset one would put the tables is the server's to
say, and a server answering file:// locations would have each leader write its own disk.

An S3 warehouse (``s3://``, ``s3a://``, ``s3n://``) is reached with pyiceberg's FileIO
properties, given as broker configs under the prefix ``iceberg.s3.`` (:func:`file_io_properties`:
``iceberg.s3.X`` is pyiceberg's ``s3.X``): ``iceberg.s3.endpoint`` (an S3-compatible store's
URL), ``iceberg.s3.region`` (by default ``us-east-1`` when an endpoint is set: pyiceberg would
otherwise ask AWS where the bucket is), ``iceberg.s3.path-style-access`` (``true``, the default
with an endpoint: ``http://host/bucket/key``; ``false``: ``http://bucket.host/key``),
``iceberg.s3.access-key-id`` with the password ``iceberg.s3.secret-access-key`` (and
``iceberg.s3.session-token``). Without them the AWS SDK's own chain gives the credentials (the
``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` environment variables, ``~/.aws``). The
secrets are broker configs of type password: DescribeConfigs describes them as sensitive,
without their value, and nothing here logs them.

A mode other than ``disabled`` needs pyiceberg (the ``tables`` extra): without it the topic
config is refused (:func:`mode_error`) and a broker that finds such a topic at start stops
(:func:`require_pyiceberg`), so a topic never silently goes without its table.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

MODE = "iceberg.mode"
TARGET_LAG_MS = "iceberg.target.lag.ms"
RETENTION_MS = "iceberg.retention.ms"
COMPACTION_MIN_INPUT_FILES = "iceberg.compaction.min.input.files"
MAINTENANCE_INTERVAL_MS = "iceberg.maintenance.interval.ms"
UPSERT = "iceberg.upsert"
CATALOG_TYPE = "iceberg.catalog.type"
CATALOG_URI = "iceberg.catalog.uri"
WAREHOUSE = "iceberg.warehouse"
NAMESPACE = "iceberg.namespace"
#: Broker configs under this prefix are pyiceberg's FileIO ``s3.*`` properties.
S3_PREFIX = "iceberg.s3."
S3_ENDPOINT = "iceberg.s3.endpoint"
S3_REGION = "iceberg.s3.region"
S3_PATH_STYLE_ACCESS = "iceberg.s3.path-style-access"
S3_ACCESS_KEY_ID = "iceberg.s3.access-key-id"
S3_SECRET_ACCESS_KEY = "iceberg.s3.secret-access-key"
S3_SESSION_TOKEN = "iceberg.s3.session-token"
#: The object-store schemes of a warehouse pyiceberg's S3 FileIO writes.
S3_SCHEMES = ("s3://", "s3a://", "s3n://")
#: The region an S3-compatible store (an endpoint set) is addressed in when none is given.
DEFAULT_S3_REGION = "us-east-1"

DISABLED = "disabled"
KEY_VALUE = "key_value"
VALUE_SCHEMA_ID_PREFIX = "value_schema_id_prefix"
VALUE_SCHEMA_LATEST = "value_schema_latest"
#: The modes whose value columns are typed from the schema registry.
TYPED_MODES = (VALUE_SCHEMA_ID_PREFIX, VALUE_SCHEMA_LATEST)
#: Every mode name the topic config accepts as a name.
MODES = (DISABLED, KEY_VALUE, *TYPED_MODES)
#: The modes this broker translates.
IMPLEMENTED_MODES = MODES
#: The dead-letter table of a topic in a typed mode is the topic's name and this.
DEAD_LETTER_SUFFIX = "~dlq"
DEFAULT_TARGET_LAG_MS = 60_000
DEFAULT_RETENTION_MS = -1
DEFAULT_COMPACTION_MIN_INPUT_FILES = 5
DEFAULT_MAINTENANCE_INTERVAL_MS = 300_000
CATALOG_TYPES = ("sql", "rest")
DEFAULT_NAMESPACE = "gregor"


class TablesUnavailableError(RuntimeError):
    """A topic asks for a table and this installation cannot write one."""


def pyiceberg_available() -> bool:
    try:
        import pyiceberg  # noqa: F401
    except ImportError:
        return False
    return True


def mode_error(value: str) -> str | None:
    """Why ``iceberg.mode=value`` cannot be honoured here, or None."""
    mode = value.strip()
    if mode not in IMPLEMENTED_MODES:
        return f"mode {mode} is not implemented yet (implemented: {', '.join(IMPLEMENTED_MODES)})"
    if mode != DISABLED and not pyiceberg_available():
        return (
            "this broker cannot write Iceberg tables: pyiceberg is not installed "
            "(install gregor's 'tables' extra)"
        )
    return None


def upsert_error(
    configs: Mapping[str, str], compacted: bool, previous: Mapping[str, str] | None = None
) -> str | None:
    """Why a topic with the overrides ``configs`` cannot have ``iceberg.upsert`` as they say, or
    None. ``compacted``: the topic's effective ``cleanup.policy`` has ``compact``; ``previous``:
    the topic's overrides before this change (None: a new topic)."""
    new = TopicTableConfig.of(configs)
    if new.upsert and new.mode != KEY_VALUE:
        return (
            f"an upsert table needs {MODE}={KEY_VALUE} (the topic's is {new.mode}; to turn "
            f"the table off, delete {UPSERT} with it)"
        )
    if new.upsert and not compacted:
        return (
            "only a compacted topic's table can be an upsert table "
            "(the topic's cleanup.policy has no compact)"
        )
    old = None if previous is None else TopicTableConfig.of(previous)
    if old is not None and old.enabled and new.enabled and old.upsert != new.upsert:
        kind = "an upsert table" if old.upsert else "an append table"
        return (
            f"it cannot change while the topic has a table ({MODE}={old.mode}): the table is "
            f"{kind}, fixed when it was made"
        )
    return None


def registry_error(mode: str, has_registry: bool) -> str | None:
    """Why ``iceberg.mode=mode`` cannot be honoured by a broker with (or without) a registry."""
    if mode.strip() not in TYPED_MODES or has_registry:
        return None
    return (
        f"Invalid value {mode.strip()} for configuration {MODE}: this broker has no schema "
        "registry to read the value's schemas from (set confluent.schema.registry.url, or "
        "schema.registry.listener to serve one)"
    )


def compaction_min_input_files_error(value: str) -> str | None:
    """Why ``iceberg.compaction.min.input.files=value`` is not a number of files to rewrite
    (one file rewritten into one is no compaction)."""
    n = int(value)
    return None if n == 0 or n >= 2 else "must be 0 (no automatic compaction) or at least 2"


def require_pyiceberg(topic: str) -> None:
    """Fail closed: a topic that asks for a table on a broker without pyiceberg."""
    if not pyiceberg_available():
        raise TablesUnavailableError(
            f"topic {topic} has {MODE} set, but pyiceberg is not installed "
            "(install gregor's 'tables' extra, or set the topic's iceberg.mode=disabled)"
        )


def shared_catalog_error(broker_props: Mapping[str, str]) -> str | None:
    """Why this broker's catalog and warehouse cannot serve a cluster, or None. In a cluster
    each partition's leader writes its table, and leaders move: every broker must reach the
    same catalog and the same data files, or each would keep a table of its own."""
    kind = broker_props.get(CATALOG_TYPE, "sql").strip().lower()
    uri = broker_props.get(CATALOG_URI, "").strip()
    warehouse = broker_props.get(WAREHOUSE, "").strip()
    if kind == "sql" and (not uri or uri.startswith("sqlite:")):
        return (
            f"in a cluster, {CATALOG_TYPE}=sql on SQLite (the default: a file in this broker's "
            "log directory) would give every partition leader a table of its own; set "
            f"{CATALOG_TYPE}=rest with {CATALOG_URI}, or a SQL catalog every broker reaches"
        )
    if not is_object_store(warehouse):
        return (
            f"in a cluster, {WAREHOUSE} must be storage every broker reaches (an object store "
            f"such as s3://bucket/path), not this broker's disk"
        )
    return None


def require_shared_catalog(topic: str, broker_props: Mapping[str, str]) -> None:
    """Fail closed: a topic that asks for a table in a cluster whose catalog is local."""
    why = shared_catalog_error(broker_props)
    if why is not None:
        raise TablesUnavailableError(f"topic {topic} has {MODE} set, but {why}")


@dataclass(frozen=True)
class TopicTableConfig:
    """One topic's table settings, from its effective topic configs."""

    mode: str = DISABLED
    target_lag_ms: int = DEFAULT_TARGET_LAG_MS
    retention_ms: int = DEFAULT_RETENTION_MS
    compaction_min_input_files: int = DEFAULT_COMPACTION_MIN_INPUT_FILES
    maintenance_interval_ms: int = DEFAULT_MAINTENANCE_INTERVAL_MS
    upsert: bool = False

    @property
    def enabled(self) -> bool:
        return self.mode != DISABLED

    @classmethod
    def of(cls, configs: Mapping[str, str]) -> TopicTableConfig:
        return cls(
            configs.get(MODE, DISABLED).strip(),
            int(configs.get(TARGET_LAG_MS, DEFAULT_TARGET_LAG_MS)),
            int(configs.get(RETENTION_MS, DEFAULT_RETENTION_MS)),
            int(configs.get(COMPACTION_MIN_INPUT_FILES, DEFAULT_COMPACTION_MIN_INPUT_FILES)),
            int(configs.get(MAINTENANCE_INTERVAL_MS, DEFAULT_MAINTENANCE_INTERVAL_MS)),
            configs.get(UPSERT, "false").strip().lower() == "true",
        )


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "1", "yes", "false", "0", "no"):
        raise ValueError(f"{name}={value!r} is not true or false")
    return v in ("true", "1", "yes")


def file_io_properties(broker_props: Mapping[str, str], warehouse: str) -> dict[str, str]:
    """pyiceberg's FileIO properties of the broker's ``iceberg.s3.*`` configs (see the module's
    docstring); raises ValueError for settings that cannot reach a store."""
    given = {k: v.strip() for k, v in broker_props.items() if k.startswith(S3_PREFIX) and v.strip()}
    if given and not warehouse.startswith(S3_SCHEMES):
        raise ValueError(
            f"{', '.join(sorted(given))} set, but {WAREHOUSE}={warehouse} is not on S3 "
            f"({' or '.join(S3_SCHEMES)})"
        )
    if (S3_ACCESS_KEY_ID in given) != (S3_SECRET_ACCESS_KEY in given):
        raise ValueError(
            f"{S3_ACCESS_KEY_ID} and {S3_SECRET_ACCESS_KEY} go together (or neither: the AWS "
            "SDK's credential chain, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
        )
    endpoint = given.get(S3_ENDPOINT)
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise ValueError(f"{S3_ENDPOINT}={endpoint!r} is not an http:// or https:// URL")
    props: dict[str, str] = {}
    for key, value in given.items():
        if key == S3_PATH_STYLE_ACCESS:
            path_style = _bool(key, value)
            props["s3.force-virtual-addressing"] = "false" if path_style else "true"
        else:
            props["s3." + key.removeprefix(S3_PREFIX)] = value
    if endpoint is not None:
        props.setdefault("s3.region", DEFAULT_S3_REGION)
    return props


def is_object_store(warehouse: str) -> bool:
    """The warehouse is reached over the network (not this broker's disk)."""
    return "://" in warehouse and not warehouse.startswith("file:")


@dataclass(frozen=True)
class CatalogSettings:
    """Where the tables live: what ``pyiceberg.catalog.load_catalog`` is given."""

    name: str
    type: str
    properties: Mapping[str, str]
    namespace: str = DEFAULT_NAMESPACE

    @property
    def uri(self) -> str:
        return self.properties.get("uri", "")

    def load_properties(self) -> dict[str, str]:
        """``load_catalog(name, **this)`` opens the catalog."""
        return {"type": self.type, **self.properties}


def catalog_settings(
    broker_props: Mapping[str, str], data_dir: str, name: str = "gregor"
) -> CatalogSettings:
    """The catalog a broker's settings name; raises ValueError for one it cannot open."""
    kind = broker_props.get(CATALOG_TYPE, "sql").strip().lower()
    if kind not in CATALOG_TYPES:
        raise ValueError(f"{CATALOG_TYPE}={kind} is not one of {', '.join(CATALOG_TYPES)}")
    namespace = broker_props.get(NAMESPACE, DEFAULT_NAMESPACE).strip()
    if not namespace or "." in namespace:
        raise ValueError(f"{NAMESPACE}={namespace!r} must be one non-empty name without dots")
    if kind == "rest":
        props = {"uri": rest_uri(broker_props), **rest_warehouse(broker_props)}
        return CatalogSettings(name, kind, props, namespace)
    home = os.path.abspath(os.path.join(data_dir, "iceberg"))
    warehouse = broker_props.get(WAREHOUSE, "").strip() or os.path.join(home, "warehouse")
    if "://" not in warehouse:
        warehouse = "file://" + os.path.abspath(warehouse)
    props = {"warehouse": warehouse, **file_io_properties(broker_props, warehouse)}
    uri = broker_props.get(CATALOG_URI, "").strip() or "sqlite:///" + os.path.join(
        home, "catalog.db"
    )
    props["uri"] = uri
    return CatalogSettings(name, kind, props, namespace)


def rest_uri(broker_props: Mapping[str, str]) -> str:
    """A REST catalog's ``iceberg.catalog.uri``: an http:// or https:// URL, or ValueError."""
    uri = broker_props.get(CATALOG_URI, "").strip()
    if not uri:
        raise ValueError(f"{CATALOG_TYPE}=rest needs {CATALOG_URI} (the REST catalog's URL)")
    if not uri.startswith(("http://", "https://")) or uri.find("://") + 3 == len(uri):
        raise ValueError(
            f"{CATALOG_URI}={uri!r} is not the http:// or https:// URL of a REST catalog"
        )
    return uri


def rest_warehouse(broker_props: Mapping[str, str]) -> dict[str, str]:
    """A REST catalog's ``warehouse`` property: ``iceberg.warehouse`` as given, which the
    server reads (a location or a name, as it defines; the server makes the tables' locations);
    unset, none: never a default directory of this broker. pyiceberg's FileIO writes the data
    files into the table's location that the server answers, with the ``iceberg.s3.*``
    properties on S3, which need an s3:// warehouse here as with the SQL catalog."""
    warehouse = broker_props.get(WAREHOUSE, "").strip()
    props = file_io_properties(broker_props, warehouse)
    return {"warehouse": warehouse, **props} if warehouse else props
