"""Which per-record producer path is in use: the compiled one (``_send``) or the pure-Python
reference (``_send_py``).

``ProducerCore`` and ``AccumulatorCore`` are the bases of ``AIOProducer`` and
``RecordAccumulator``, so the choice is made once, at import: the compiled module when it was
built and ``GREGOR_NO_EXTENSIONS`` is not set (as for the record walk and the log's append).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gregor.client.producer import _send_py
from gregor.protocol.extensions import load

_impl = load("gregor.client.producer._send", _send_py)

if TYPE_CHECKING:
    from gregor.client.producer._send_py import AccumulatorCore, ProducerCore
else:
    AccumulatorCore = _impl.AccumulatorCore
    ProducerCore = _impl.ProducerCore


def implementation() -> str:
    """``"cython"`` or ``"python"``: which per-record producer path is in use."""
    name: str = _impl.IMPLEMENTATION
    return name


__all__ = ["AccumulatorCore", "ProducerCore", "implementation"]
