"""Emit ``gregor/protocol/errors.py``: the guide's error table as an enum and exception classes."""

from __future__ import annotations

from typing import Any

from codegen.emit_fields import HEADER
from codegen.model import camel


def error_class_name(name: str) -> str:
    c = camel(name.lower())
    if c.endswith("Exception"):
        c = c[: -len("Exception")]
    if not c.endswith("Error"):
        c += "Error"
    return c


ERRORS_PRELUDE = '''"""Kafka error codes: the guide's error table as an enum and one exception class per code.

``ErrorCode.UNKNOWN_TOPIC_OR_PARTITION == 3``; ``error_for_code(3)`` is
:class:`UnknownTopicOrPartitionError`, a :class:`KafkaError` carrying ``code``, ``name``,
``retriable`` and ``description``. Code 0 (NONE) is not an error and has no class;
``error_for_code`` returns a made-up subclass for codes the table does not know.

:class:`ProtocolError` (malformed input) is re-exported from ``gregor.protocol.exceptions``.
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar

from gregor.protocol.exceptions import ProtocolError


class KafkaError(Exception):
    """An error code returned by (or to be returned to) a Kafka peer."""

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    retriable: ClassVar[bool] = False
    description: ClassVar[str] = ""

    def __init__(self, message: str | None = None) -> None:
        self.message = message
        super().__init__(message or self.description or self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class RetriableError(KafkaError):
    """Base of the errors the guide marks retriable."""

    retriable: ClassVar[bool] = True
'''

ERRORS_POST = '''

_UNKNOWN: dict[int, type[KafkaError]] = {}


def error_for_code(code: int) -> type[KafkaError]:
    """The exception class for an error code (a synthesized one for unknown codes).

    Raises ValueError for 0, which means "no error".
    """
    try:
        return ERRORS_BY_CODE[code]
    except KeyError:
        pass
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    cls = _UNKNOWN.get(code)
    if cls is None:
        cls = type(
            f"UnknownError{code}",
            (KafkaError,),
            {"code": code, "name": f"UNKNOWN_{code}", "retriable": False, "description": ""},
        )
        _UNKNOWN[code] = cls
    return cls


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for ``code``, or return if it is 0."""
    if code:
        raise error_for_code(code)(message)
'''


#: pyproject.toml's [tool.ruff] line-length: the generated module is in ruff's format.
LINE_LENGTH = 100


def _str(s: str) -> str:
    """A string literal as ruff's formatter writes it: double quotes, unless the text holds a
    double quote and no single one (then single quotes spare the escapes)."""
    r = repr(s)
    if r.startswith("'") and '"' not in s:
        r = '"' + r[1:-1].replace("\\'", "'") + '"'
    return r


def emit_errors(errors: list[dict[str, Any]]) -> str:
    out = [HEADER.rstrip("\n"), ERRORS_PRELUDE]
    out.append("")
    out.append("class ErrorCode(IntEnum):")
    for e in errors:
        out.append(f"    {e['name']} = {e['code']}")
    names = []
    for e in errors:
        if e["code"] == 0:
            continue
        cname = error_class_name(e["name"])
        names.append((e["code"], cname))
        base = "RetriableError" if e["retriable"] else "KafkaError"
        out.append("")
        out.append("")
        out.append(f"class {cname}({base}):")
        desc = e["description"].replace("\\", "\\\\").replace('"""', "'''")
        if desc:
            out.append(f'    """{desc}"""')
            out.append("")
        out.append(f"    code = {e['code']}")
        out.append(f"    name = {_str(e['name'])}")
        out.append(f"    retriable = {e['retriable']!r}")
        description = f"    description = {_str(e['description'])}"
        if (
            len(description) > LINE_LENGTH
            and len(f"        {_str(e['description'])}") <= LINE_LENGTH
        ):
            # as ruff's formatter wraps a long value that fits a line of its own
            description = f"    description = (\n        {_str(e['description'])}\n    )"
        out.append(description)
    out.append("")
    out.append("")
    out.append("ERRORS_BY_CODE: dict[int, type[KafkaError]] = {")
    for code, cname in names:
        out.append(f"    {code}: {cname},")
    out.append("}")
    out.append(ERRORS_POST.rstrip("\n"))
    out.append("")
    out.append("")
    out.append("__all__ = [")
    for n in ["ErrorCode", "KafkaError", "RetriableError", "ProtocolError", "ERRORS_BY_CODE"]:
        out.append(f"    {_str(n)},")
    out.append('    "error_for_code",')
    out.append('    "raise_for_code",')
    for _, cname in names:
        out.append(f"    {_str(cname)},")
    out.append("]")
    return "\n".join(out) + "\n"
