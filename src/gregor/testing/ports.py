"""The test harness's name for :mod:`gregor.launch.ports` (free ports below the ephemeral
range)."""

from __future__ import annotations

from gregor.launch.ports import ephemeral_low, free_port

__all__ = ["ephemeral_low", "free_port"]
