"""The compiled accelerators and their pure-Python references: which one serves.

Each accelerator (``protocol.records._scan``, ``storage._append`` with ``storage._index``,
``client.producer._send``) is an optional extension module built at install, beside a reference module
with the same names (``_scan_py``, ``_append_py``, ``_index_py``, ``_send_py``). :func:`load` gives the compiled module when it
was built and ``GREGOR_NO_EXTENSIONS`` is not set in the environment, else the reference.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

DISABLE_ENV = "GREGOR_NO_EXTENSIONS"


def disabled() -> bool:
    """True when the environment asks for the pure-Python references."""
    return bool(os.environ.get(DISABLE_ENV))


def compiled(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None when it was not built."""
    try:
        return importlib.import_module(name)
    except ImportError:  # not built (no compiler at install time)
        return None


def load(name: str, reference: ModuleType) -> ModuleType:
    """The compiled module ``name`` unless disabled or not built; else ``reference``."""
    if disabled():
        return reference
    return compiled(name) or reference
