"""A segment's transaction index (``.txnindex``): the aborted transactions whose abort marker
is in the segment, in marker order.

Entries are 34 bytes, big-endian: version int16 = 0, producer_id int64, first_offset int64,
last_offset int64, last_stable_offset int64. The file is plain (not memory-mapped): it is
appended to, and only created when the first entry arrives, as Kafka does; its entries are
read once, on first use, and kept. A fetch at read_committed collects the transactions that
overlap what it returns (:meth:`TransactionIndex.collect`), segment by segment, until an
entry's last stable offset shows later segments cannot add any.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from gregor.storage.index import CorruptIndexError

TXN_ENTRY_SIZE = 34
TXN_INDEX_VERSION = 0

_TXN_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _TXN_ENTRY.pack(TXN_INDEX_VERSION, *self)


class TransactionIndex:
    """Aborted transactions whose markers are in one segment, in marker order."""

    __slots__ = ("path", "base_offset", "_entries")

    def __init__(self, path: str, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # loaded on first use

    def _load(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                with open(self.path, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                data = b""
            n = len(data) // TXN_ENTRY_SIZE
            self._entries = [
                AbortedTxn(*_TXN_ENTRY.unpack_from(data, i * TXN_ENTRY_SIZE)[1:]) for i in range(n)
            ]
        return self._entries

    @property
    def entries(self) -> list[AbortedTxn]:
        return list(self._load())

    def append(self, txn: AbortedTxn) -> None:
        entries = self._load()
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted transaction last offset {txn.last_offset} does not increase")
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, txn.encode())
        finally:
            os.close(fd)
        entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset), and whether the
        search is complete (an entry's last stable offset reached the upper bound, so later
        segments cannot add any)."""
        out = []
        for txn in self._load():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if entries:
            with open(self.path, "wb") as f:
                f.write(b"".join(t.encode() for t in entries))
        else:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        self._entries = entries

    def truncate_to(self, offset: int) -> None:
        """Remove transactions whose marker is at or after ``offset``."""
        entries = self._load()
        keep = [t for t in entries if t.last_offset < offset]
        if len(keep) != len(entries):
            self._rewrite(keep)

    def reset(self) -> None:
        self._rewrite([])

    def flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        pass

    def rename(self, new_path: str) -> None:
        try:
            os.replace(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = new_path

    def sanity_check(self) -> None:
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size % TXN_ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self.path}: length {size} is not a multiple of {TXN_ENTRY_SIZE}"
            )
