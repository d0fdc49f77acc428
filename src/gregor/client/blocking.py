"""The old path of :mod:`gregor.client.core.blocking`, kept for importers outside the client
(tests); new code imports the core module."""

from gregor.client.core.blocking import (
    BlockingConnection,
)

__all__ = [
    "BlockingConnection",
]
