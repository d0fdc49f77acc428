"""Structured log lines of the coordinators: an event name and fields (the broker renders the
fields as logfmt). Each module logs through its own logger, so a line says which coordinator
wrote it (``gregor.coordinator`` for groups, ``gregor.coordinator.transactions``)."""

from __future__ import annotations

import logging


def log_event(logger: logging.Logger, event: str, **fields: object) -> None:
    """One structured INFO line, built only when INFO is enabled for ``logger``."""
    if logger.isEnabledFor(logging.INFO):
        logger.info(event, extra={"fields": fields})
