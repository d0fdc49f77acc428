"""Which produce fast path the log uses: the compiled one (``_append``) or the pure-Python
reference (``_append_py``).

``LogCore`` and ``SegmentCore`` are the bases of ``Log`` and ``LogSegment``, and the other
cores those of the segment list, the leader epoch cache and the producer state whose fields the
fast path reads or writes, so the choice is made once, at import: the compiled module when it
was built and ``GREGOR_NO_EXTENSIONS`` is not set in the environment (as for the record walk,
``gregor.protocol.records.walk``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gregor.protocol.extensions import load
from gregor.storage import _append_py

_impl = load("gregor.storage._append", _append_py)

if TYPE_CHECKING:
    from gregor.storage._append_py import (
        LeaderEpochCacheCore,
        LogCore,
        ProducerStateCore,
        SegmentCore,
        SegmentsCore,
    )
else:
    LogCore = _impl.LogCore
    SegmentCore = _impl.SegmentCore
    SegmentsCore = _impl.SegmentsCore
    LeaderEpochCacheCore = _impl.LeaderEpochCacheCore
    ProducerStateCore = _impl.ProducerStateCore


def implementation() -> str:
    """``"cython"`` or ``"python"``: which fast path the log uses."""
    name: str = _impl.IMPLEMENTATION
    return name


__all__ = [
    "LeaderEpochCacheCore",
    "LogCore",
    "ProducerStateCore",
    "SegmentCore",
    "SegmentsCore",
    "implementation",
]
