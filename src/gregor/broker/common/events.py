"""Structured log lines: ``ts=... level=INFO event=topic.created topic=orders partitions=6``.

One line per event, logfmt style, so a person can read it and a machine can grep or parse it
(or one JSON object per line with ``setup_logging(fmt="json")``).
Callers pass the event name and fields: ``log_event(logger, "broker.started", node_id=1)``.

Many values come from clients (client ids, topic and group names, principals, peer-supplied
error text). Both formatters pass every value, the message and an exception's text through
``escape_log_text``, which writes every character that is not printable (C0 and C1 controls
such as CR and ESC, DEL, the line and paragraph separators U+2028/U+2029, bidirectional and
other format characters, unassigned code points) as a backslash escape, so no client can
forge a log line, hide one, or drive the terminal that shows it.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape_char(c: str) -> str:
    named = _NAMED_ESCAPES.get(c)
    if named is not None:
        return named
    if c == " " or c.isprintable():
        return c
    n = ord(c)
    if n < 0x100:
        return f"\\x{n:02x}"
    if n < 0x10000:
        return f"\\u{n:04x}"
    return f"\\U{n:08x}"


def escape_log_text(text: str) -> str:
    """``text`` with every non-printable character (``str.isprintable``: controls, format
    characters, line and paragraph separators, ...) and the backslash written as an escape
    (``\\n``, ``\\r``, ``\\t``, ``\\\\``, ``\\x1b``, ``\\u2028``), so it stays on one line
    and carries no terminal control. The one escaping function of every log line."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(map(_escape_char, text))


def _fmt_value(v: object) -> str:
    s = escape_log_text(str(v))
    if s == "" or any(c in s for c in ' "=\\'):
        return '"' + s.replace('"', '\\"') + '"'
    return s


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        ts += f".{int(record.msecs):03d}Z"
        fields = getattr(record, "fields", None)
        parts = [f"ts={ts}", f"level={record.levelname}", f"logger={record.name}"]
        if fields is not None:
            parts.append(f"event={_fmt_value(record.getMessage())}")
            parts.extend(f"{k}={_fmt_value(v)}" for k, v in fields.items())
        else:
            parts.append(f"msg={_fmt_value(record.getMessage())}")
        if record.exc_info:
            parts.append(f"exc={_fmt_value(self.formatException(record.exc_info))}")
        return " ".join(parts)


def log_event(
    logger: logging.Logger, event: str, level: int = logging.INFO, **fields: object
) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields})


class JsonFormatter(logging.Formatter):
    """The same lines as one JSON object each (``gregor serve --output json``)."""

    def format(self, record: logging.LogRecord) -> str:
        ts = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z"
        )
        doc: dict[str, object] = {"ts": ts, "level": record.levelname, "logger": record.name}
        fields = getattr(record, "fields", None)
        if fields is not None:
            doc["event"] = escape_log_text(record.getMessage())
            doc.update(
                {
                    k: v
                    if isinstance(v, (int, float, bool)) or v is None
                    else escape_log_text(str(v))
                    for k, v in fields.items()
                }
            )
        else:
            doc["msg"] = escape_log_text(record.getMessage())
        if record.exc_info:
            doc["exc"] = escape_log_text(self.formatException(record.exc_info))
        return json.dumps(doc)


def setup_logging(level: str = "INFO", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class LogRateLimit:
    """At most ``limit`` lines per ``window_s`` seconds for one kind of event that a peer can
    cause at will (refused TLS handshakes, refused connections): ``allow()`` says whether to
    log this one, and ``suppressed`` how many were left out since the last line logged (put
    it in that line)."""

    def __init__(
        self, limit: int = 10, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window_s = window_s
        self._clock = clock
        self._window_start = -float("inf")
        self._in_window = 0
        self.suppressed = 0

    def allow(self) -> bool:
        now = self._clock()
        if now - self._window_start >= self.window_s:
            self._window_start = now
            self._in_window = 0
        if self._in_window >= self.limit:
            self.suppressed += 1
            return False
        self._in_window += 1
        return True

    def take_suppressed(self) -> int:
        """How many lines were left out since the last call (and start counting again)."""
        n, self.suppressed = self.suppressed, 0
        return n
