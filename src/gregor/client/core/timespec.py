"""Times and durations as Kafka's tools take them, for offset look-ups by time.

``parse_datetime`` reads ``YYYY-MM-DDTHH:mm:SS.sss`` (seconds and millis optional; a ``Z`` or
``+hh:mm`` suffix, UTC without one) or a whole number of ms since the epoch;
``parse_duration_ms`` reads an ISO-8601 duration of days, hours, minutes and seconds
(``P1DT2H30M``). Both raise ``ValueError`` with a message for the user.
"""

from __future__ import annotations

import datetime
import re

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def parse_datetime(text: str) -> int:
    """ms since the epoch."""
    t = text.strip()
    if t.isdigit():
        return int(t)
    iso = t[:-1] + "+00:00" if t.endswith("Z") else t
    try:
        moment = datetime.datetime.fromisoformat(iso)
    except ValueError:
        raise ValueError(
            f"{text!r} is not YYYY-MM-DDTHH:mm:SS.sss (e.g. 2026-11-26T08:30:00.000)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return int(moment.timestamp() * 1000)


def parse_duration_ms(text: str) -> int:
    """The duration in ms."""
    m = _DURATION.match(text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT"):
        raise ValueError(f"{text!r} is not a duration like PT1H30M or P2D")
    days, hours, minutes, seconds = (float(x) if x else 0.0 for x in m.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
