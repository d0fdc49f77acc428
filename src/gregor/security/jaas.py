"""Kafka's ``sasl.jaas.config`` values: ``<LoginModule class> <flag> key="value" ...;``.

Only the parts a broker needs are understood: one or more entries, each a login module class,
a control flag (``required``, ``requisite``, ``sufficient``, ``optional``) and options whose
values are double-quoted (with ``\\`` escapes) or bare words, ending with ``;``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(
    r'\s*(?:(?P<semi>;)|(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<eq>=)|(?P<word>[^\s=;"]+))', re.S
)


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value that cannot be parsed (its text is never repeated: it may
    hold passwords)."""


@dataclass
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasConfigError(f"unexpected character at position {pos}")
        pos = m.end()
        kind = m.lastgroup or ""
        value = m.group(kind)
        if kind == "quoted":
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        out.append((kind, value))
    return out


def parse_jaas_config(text: str) -> list[JaasEntry]:
    toks = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(toks):
        if toks[i][0] != "word" or i + 1 >= len(toks) or toks[i + 1][0] != "word":
            raise JaasConfigError("expected '<LoginModule> <flag>'")
        module, flag = toks[i][1], toks[i + 1][1].lower()
        if flag not in _FLAGS:
            raise JaasConfigError(f"login module control flag must be one of {', '.join(_FLAGS)}")
        entry = JaasEntry(module, flag)
        i += 2
        while i < len(toks) and toks[i][0] != "semi":
            if (
                i + 2 >= len(toks)
                or toks[i][0] != "word"
                or toks[i + 1][0] != "eq"
                or toks[i + 2][0] not in ("word", "quoted")
            ):
                raise JaasConfigError(
                    f"option {len(entry.options) + 1} of {module} is not key=value"
                )
            entry.options[toks[i][1]] = toks[i + 2][1]
            i += 3
        if i >= len(toks):
            raise JaasConfigError("the JAAS entry does not end with ';'")
        i += 1
        entries.append(entry)
    if not entries:
        raise JaasConfigError("no login module")
    return entries
