"""The old path of :mod:`gregor.client.core.security`, kept for importers outside the client
(tests); new code imports the core module."""

from gregor.client.core.security import (
    PROTOCOLS,
    SECURITY_SETTINGS,
    connection_security,
    tls_context,
)

__all__ = [
    "PROTOCOLS",
    "SECURITY_SETTINGS",
    "connection_security",
    "tls_context",
]
