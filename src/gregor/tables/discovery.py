"""Where a cluster keeps its topics' tables, asked of the cluster itself: the catalog a
broker's ``iceberg.*`` settings name, read with DescribeConfigs (what ``gregor tables`` and the
Spark table reader use, so a reader needs only the bootstrap servers)."""

from __future__ import annotations

import os
from typing import Any

from gregor.tables import settings as ts


class CatalogDiscoveryError(ValueError):
    """The broker's settings do not let a client open its catalog."""


def cluster_catalog(admin: Any) -> ts.CatalogSettings:
    """The catalog of the cluster behind ``admin`` (a ``gregor.client.AdminClient``): the first
    broker's ``iceberg.*`` configs and log directory. A SQL catalog in a data directory given
    relative to where the broker runs cannot be found from elsewhere: refused, naming the
    settings that fix it."""
    cluster = admin.describe_cluster()
    broker_id = str(cluster.brokers[0][0] if cluster.brokers else cluster.controller_id)
    found = admin.describe_configs([("broker", broker_id)])
    return broker_catalog(next(iter(found.values())))


def broker_catalog(entries: Any) -> ts.CatalogSettings:
    """The catalog a broker's described configs (DescribeConfigs' entries of the broker, or the
    error it answered) name; see :func:`cluster_catalog`."""
    if isinstance(entries, Exception):
        raise CatalogDiscoveryError(f"cannot read the broker's configs: {entries}")
    values = {name: e.value for name, e in entries.items() if e.value is not None}
    props = {k: v for k, v in values.items() if k.startswith("iceberg.")}
    # The secret key is a password config, described without its value: the reader brings its
    # own credentials (the AWS environment variables), so the key id goes too.
    props.pop(ts.S3_ACCESS_KEY_ID, None)
    data_dir = (values.get("log.dirs") or values.get("log.dir") or "").split(",")[0].strip()
    if not os.path.isabs(data_dir) and props.get(ts.CATALOG_TYPE, "sql") == "sql":
        if not props.get(ts.CATALOG_URI) or not props.get(ts.WAREHOUSE):
            raise CatalogDiscoveryError(
                f"the broker's data directory {data_dir!r} is relative to where it runs: set "
                "iceberg.catalog.uri and iceberg.warehouse (or an absolute log.dirs) on the broker"
            )
    return ts.catalog_settings(props, data_dir)
