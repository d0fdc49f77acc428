"""The old path of :mod:`gregor.client.core.config`, kept for importers outside the client (the
Spark data source); new code imports the core module."""

from gregor.client.core.config import (
    ADMIN,
    COMMON,
    CONSUMER,
    PRODUCER,
    ROLES,
    SHARE_CONSUMER,
    Config,
    default_client_host,
    parse_servers,
)

__all__ = [
    "ADMIN",
    "COMMON",
    "CONSUMER",
    "Config",
    "PRODUCER",
    "ROLES",
    "SHARE_CONSUMER",
    "default_client_host",
    "parse_servers",
]
