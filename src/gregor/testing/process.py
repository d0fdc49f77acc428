"""The test harness's name for :mod:`gregor.launch.process` (``BrokerProcess``), which
applications use too."""

from __future__ import annotations

from gregor.launch.process import BrokerProcess, BrokerStartError, level_number

__all__ = ["BrokerProcess", "BrokerStartError", "level_number"]
