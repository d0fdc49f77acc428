"""Structured log lines: ``ts=... level=INFO event=topic.created topic=orders partitions=6``.

One line per event, logfmt style, so a person can read it and a machine can grep or parse it
(or one JSON object per line with ``setup_logging(fmt="json")``).
Callers pass the event name and fields: ``log_event(logger, "broker.started", node_id=1)``.
"""

from __future__ import annotations

import json
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


class JsonFormatter(logging.Formatter):
    """The same lines as one JSON object each (``gregor serve --output json``)."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        doc: dict[str, Any] = {"ts": ts, "level": record.levelname, "logger": record.name}
        fields = getattr(record, "fields", None)
        if fields is not None:
            doc["event"] = record.getMessage()
            doc.update({k: v if isinstance(v, (int, float, bool)) or v is None else str(v) for k, v in fields.items()})
        else:
            doc["msg"] = record.getMessage()
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc)


def setup_logging(level: str = "INFO", fmt: str = "logfmt") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
