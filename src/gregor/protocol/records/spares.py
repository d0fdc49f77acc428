"""Column arrays for the bulk reader, reused once the Arrow batch that held them is gone.

Theory of operation. A reader makes a new :class:`ArrowColumns` for every Arrow batch it hands
out, and the arrays go with the batch: Arrow wraps them without a copy. Fresh memory for every
batch costs the reader a page fault per 4 KiB it writes (the allocator gives large blocks back
to the system as they are freed and maps them again for the next): about a tenth of a bulk
read's CPU, measured on 5 M records of 100 B. So each thread keeps the last ``SPARE_ARRAYS``
arrays it made for each column, and :func:`new_arrow_columns` takes a kept one that nothing
else refers to any more: its batch is gone, since an Arrow buffer, a view or a slice of the
array holds a reference to it. The array is emptied with its room kept (``walk.clear_array``;
the pure-Python walk cannot keep it). One larger than ``SPARE_LIMIT`` bytes is let go instead
of kept. The spares are per thread, so taking one needs no lock; a batch may still be dropped
by another thread, which only makes its arrays free.
"""

from __future__ import annotations

import sys
import threading
from array import array

from gregor.protocol.records.columns import ArrowColumns, new_array
from gregor.protocol.records.walk import clear_array

SPARE_ARRAYS = 4  # kept per column and thread
SPARE_LIMIT = 64 * 1024 * 1024  # bytes; a larger array is not kept
_spares = threading.local()


def spare_array(column: str, typecode: str, first_zero: bool) -> array[int]:
    """An empty array for ``column`` (``[0]`` when ``first_zero``): a kept one of this thread
    that nothing refers to any more, or a new one, kept from now on."""
    kept: dict[str, list[array[int]]] | None = getattr(_spares, "arrays", None)
    if kept is None:
        kept = _spares.arrays = {}
    spare = kept.setdefault(column, [])
    for i in range(len(spare)):
        # 2: the list's reference and getrefcount's argument (as the frame buffers' spares in
        # ``framing``); anything else that refers to the array holds one more.
        if sys.getrefcount(spare[i]) == 2:
            if sys.getsizeof(spare[i]) > SPARE_LIMIT:
                del spare[i]
                break
            arr = spare[i]
            clear_array(arr)
            if first_zero:
                arr.append(0)
            return arr
    arr = new_array(column, typecode, first_zero)
    if len(spare) >= SPARE_ARRAYS:
        spare.pop(0)
    spare.append(arr)
    return arr


def new_arrow_columns(timestamp_scale: int = 1) -> ArrowColumns:
    """``ArrowColumns`` on this thread's free spare arrays where there are any."""
    return ArrowColumns(timestamp_scale, spare_array)
