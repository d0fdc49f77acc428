"""The broker's one error convention.

Domain operations (topic admin, the replica manager, the metadata store, storage, whose
``StorageError`` is a ``KafkaError``) raise the generated Kafka exceptions
(``gregor.protocol.errors``: ``InvalidPartitionsError("...")``), each of which carries its
wire ``code``. Handlers catch at the per-topic or per-partition
boundary and turn the exception into a response field with :func:`code_of`, the only place
that maps an exception to an error code. Anything that is not a Kafka error is a bug: it is
logged with its traceback and answered UNKNOWN_SERVER_ERROR. ``ProtocolError`` (malformed
input from the peer) inside a record set is CORRUPT_MESSAGE, or UNSUPPORTED_COMPRESSION_TYPE
for a codec we do not have.
"""

from __future__ import annotations

import logging

from gregor.protocol.errors import ErrorCode, KafkaError, error_for_code
from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records.compression import UnsupportedCompressionError

log = logging.getLogger("gregor.broker")


def code_of(exc: BaseException) -> ErrorCode:
    """The Kafka error code to answer for ``exc``."""
    if isinstance(exc, KafkaError):
        return _known(exc.code)
    if isinstance(exc, UnsupportedCompressionError):
        return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    if isinstance(exc, ProtocolError):
        return ErrorCode.CORRUPT_MESSAGE
    log.error("unexpected error answered as UNKNOWN_SERVER_ERROR", exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def kafka_error(code: int, message: str) -> KafkaError:
    """The generated Kafka exception for ``code``, carrying ``message`` (to raise)."""
    return error_for_code(code)(message)


def message_of(exc: BaseException) -> str:
    """The error message to put beside the code (never empty)."""
    if isinstance(exc, KafkaError) and exc.message:
        return exc.message
    text = str(exc)
    return text or type(exc).__name__


def _known(code: int) -> ErrorCode:
    try:
        out = ErrorCode(code)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return ErrorCode.UNKNOWN_SERVER_ERROR if out is ErrorCode.NONE else out
