"""Which per-record producer path is in use: the compiled one (``_send``) or the pure-Python
reference (``_send_py``).

``ProducerCore`` and ``AccumulatorCore`` are the bases of ``AIOProducer`` and
``RecordAccumulator``, so the choice is made once, at import: the compiled module when it was
built and ``GREGOR_NO_EXTENSIONS`` is not set (as for the record walk and the log's append).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING

from gregor.client import _send_py


def _load() -> ModuleType:
    if os.environ.get("GREGOR_NO_EXTENSIONS"):
        return _send_py
    try:
        return importlib.import_module("gregor.client._send")
    except ImportError:  # not built (no compiler at install time): the reference serves
        return _send_py


_impl = _load()

if TYPE_CHECKING:
    from gregor.client._send_py import AccumulatorCore, ProducerCore
else:
    AccumulatorCore = _impl.AccumulatorCore
    ProducerCore = _impl.ProducerCore


def implementation() -> str:
    """``"cython"`` or ``"python"``: which per-record producer path is in use."""
    name: str = _impl.IMPLEMENTATION
    return name


__all__ = ["AccumulatorCore", "ProducerCore", "implementation"]
