"""The one exception for malformed input.

Every decoder in ``gregor.protocol`` raises :class:`ProtocolError` for bytes it cannot make sense
of (truncated, oversize, bad lengths, bad CRC, bad varints, bad UTF-8); nothing else escapes.
"""


class ProtocolError(ValueError):
    """Malformed or truncated protocol data."""
