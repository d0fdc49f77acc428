"""Coordinator tests: the state machine driven directly (no sockets, no sleeps)."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
