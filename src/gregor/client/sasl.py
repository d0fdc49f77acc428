"""The old path of :mod:`gregor.client.core.sasl`, kept for importers outside the client (the
broker's listener security, tests); new code imports the core module."""

from gregor.client.core.sasl import (
    CLIENT_MECHANISMS,
    PLAIN,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    PlainClient,
    SaslClient,
    ScramClient,
    sasl_client,
)

__all__ = [
    "CLIENT_MECHANISMS",
    "PLAIN",
    "PlainClient",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "SaslClient",
    "ScramClient",
    "sasl_client",
]
