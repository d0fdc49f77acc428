"""Which produce fast path the log uses: the compiled one (``_append``) or the pure-Python
reference (``_append_py``).

``LogCore`` and ``SegmentCore`` are the bases of ``Log`` and ``LogSegment``, so the choice is
made once, at import: the compiled module when it was built and ``GREGOR_NO_EXTENSIONS`` is not
set in the environment (as for the record walk, ``gregor.protocol.records.walk``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gregor.protocol.extensions import load
from gregor.storage import _append_py

_impl = load("gregor.storage._append", _append_py)

if TYPE_CHECKING:
    from gregor.storage._append_py import LogCore, SegmentCore
else:
    LogCore = _impl.LogCore
    SegmentCore = _impl.SegmentCore


def implementation() -> str:
    """``"cython"`` or ``"python"``: which fast path the log uses."""
    name: str = _impl.IMPLEMENTATION
    return name


__all__ = ["LogCore", "SegmentCore", "implementation"]
