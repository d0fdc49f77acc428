"""Structured log lines: ``ts=... level=INFO event=topic.created topic=orders partitions=6``.

One line per event, logfmt style, so a person can read it and a machine can grep or parse it.
Callers pass the event name and fields: ``log_event(logger, "broker.started", node_id=1)``.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any


def _fmt_value(v: Any) -> str:
    s = str(v)
    if s == "" or any(c in s for c in ' "=\n'):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
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


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    if logger.isEnabledFor(level):
        logger.log(level, event, extra={"fields": fields})


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
