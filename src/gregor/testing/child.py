"""The test harness's name for :mod:`gregor.launch.child` (``ChildProcess``)."""

from __future__ import annotations

from gregor.launch.child import ChildProcess

__all__ = ["ChildProcess"]
