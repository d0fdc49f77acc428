"""Text a stranger chose (a user name at a login, a header), made safe for one log line."""

from __future__ import annotations

import unicodedata

_UNSAFE = ("Cc", "Cf", "Zl", "Zp")  # controls, format characters, line and paragraph separators


def printable(text: str) -> str:
    """``text`` with every control or format character escaped (CR, ESC, U+2028, ...), so it
    cannot forge or break a log line."""
    return "".join(
        c
        if c.isprintable() and unicodedata.category(c) not in _UNSAFE
        else c.encode("unicode_escape").decode()
        for c in text
    )
