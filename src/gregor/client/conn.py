"""The old path of :mod:`gregor.client.core.conn`, kept for importers outside the client (the
broker's inter-broker links, tests); new code imports the core module."""

from gregor.client.core.conn import (
    CLIENT_SOFTWARE_NAME,
    CLIENT_SOFTWARE_VERSION,
    BrokerConnection,
    ConnectionBase,
    ConnectionOptions,
    Exchange,
)

__all__ = [
    "BrokerConnection",
    "CLIENT_SOFTWARE_NAME",
    "CLIENT_SOFTWARE_VERSION",
    "ConnectionBase",
    "ConnectionOptions",
    "Exchange",
]
