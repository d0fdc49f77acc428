"""Principals of TLS clients: the certificate's subject as an RFC 2253 distinguished name,
mapped with Kafka's ``ssl.principal.mapping.rules``.

Rules are a comma-separated list of ``DEFAULT`` and ``RULE:pattern/replacement/[LU]``; the first
rule whose pattern matches the whole DN gives the name (``$1``-style group references in the
replacement, then lower- or upper-cased with ``L``/``U``); ``DEFAULT`` gives the DN itself. When
no rule applies the client is refused, as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

# Kafka's rule syntax (SslPrincipalMapper), one rule per match.
_RULE = re.compile(r"((DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?).*?)(,\s*|$)")
# The attribute keywords RFC 2253 (and Java's X500Principal) write by name.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


class PrincipalMappingError(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a client's DN."""


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def dn_from_peercert(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """RFC 2253 DN (most specific first, as Java prints it) of ``ssl.getpeercert()['subject']``."""
    rdns = []
    for rdn in reversed(list(subject)):
        rdns.append("+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


@dataclass(frozen=True)
class _Rule:
    default: bool
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.default:
            return dn
        assert self.pattern is not None
        if not self.pattern.fullmatch(dn):
            return None
        out = self.pattern.sub(self.replacement, dn)
        if self.case == "L":
            return out.lower()
        if self.case == "U":
            return out.upper()
        return out


class SslPrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        text = rules.strip() or "DEFAULT"
        pos = 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"ssl.principal.mapping.rules: invalid rule at {text[pos:]!r}")
            pos = m.end()
            if m.group(2):
                self.rules.append(_Rule(True))
                continue
            pattern = m.group(3).replace("\\/", "/")
            # Java's $1 group references become Python's \g<1>.
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(4).replace("\\/", "/"))
            try:
                compiled = re.compile(pattern)
            except re.error as e:
                raise ValueError(
                    f"ssl.principal.mapping.rules: bad pattern {pattern!r}: {e}"
                ) from None
            self.rules.append(_Rule(False, compiled, replacement, m.group(5)))

    def principal_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise PrincipalMappingError(f"No rules apply to {dn}")
