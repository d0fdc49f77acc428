"""Which segments retention may delete, and the delayed deletion of their files.

Theory of operation. Retention deletes whole segments from the start of a log, never past the
high watermark, never the active segment while it is empty, and never a segment the cleaner has
pinned. :func:`deletable_prefix` finds the longest run of segments, oldest first, that a
predicate accepts; the predicates are Kafka's: wholly below the log start offset
(:func:`below_log_start`, any cleanup policy, after DeleteRecords), beyond ``retention.bytes``
(:func:`over_retention_bytes`) and older than ``retention.ms`` (:func:`older_than`), the last
two for ``cleanup.policy=delete`` only.

A deleted segment is first detached from its log and renamed ``.deleted``; its files are
unlinked ``file.delete.delay.ms`` later (:class:`RetiredSegments`), so a region handed out just
before stays readable, and a restart removes ``.deleted`` files left behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from gregor.storage.files import DELETED_SUFFIX
from gregor.storage.log_segments import LogSegments
from gregor.storage.segment import LogSegment

SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]
"""``predicate(segment, next segment or None)``: whether retention may delete ``segment``."""


def deletable_prefix(
    segments: LogSegments,
    predicate: SegmentPredicate,
    *,
    high_watermark: int,
    log_end_offset: int,
    pinned: Iterable[int] = (),
) -> list[LogSegment]:
    """The oldest segments, in order, that ``predicate`` accepts, up to the first that it
    refuses, that reaches past the high watermark, is pinned, or is the empty active one."""
    pins = set(pinned)
    out: list[LogSegment] = []
    n = len(segments)
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < n else None
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if nxt is None and seg.size == 0:
            break
        if seg.base_offset in pins:
            break
        if high_watermark < upper or not predicate(seg, nxt):
            break
        out.append(seg)
    return out


def below_log_start(log_start_offset: int) -> SegmentPredicate:
    """Segments wholly below the log start offset."""
    return lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset


def over_retention_bytes(excess: int) -> SegmentPredicate:
    """Oldest segments while deleting them keeps the log at or above ``retention.bytes``
    (``excess`` is the log's size minus that)."""
    left = [excess]

    def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
        if left[0] - seg.size >= 0:
            left[0] -= seg.size
            return True
        return False

    return over_size


def older_than(cutoff_ms: int) -> SegmentPredicate:
    """Segments whose largest timestamp is before ``cutoff_ms`` (now minus retention.ms)."""
    return lambda seg, nxt: seg.largest_timestamp < cutoff_ms


def delete_segment_files(segments: Iterable[LogSegment]) -> None:
    """Close and unlink segments already detached from their log (any thread)."""
    for seg in segments:
        seg.delete_files()


class RetiredSegments:
    """Segments detached from one log whose files wait for ``file.delete.delay.ms``."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[tuple[int, LogSegment]] = []  # (due ms, segment)

    def retire(self, segments: Iterable[LogSegment], now_ms: int, delay_ms: int) -> None:
        """Rename ``segments`` to ``.deleted``; unlink them now (no delay) or once due."""
        due = now_ms + delay_ms
        for seg in segments:
            seg.change_suffix("", DELETED_SUFFIX)
            if delay_ms == 0:
                seg.delete_files()
            else:
                self._pending.append((due, seg))

    def take_due(self, now_ms: int) -> list[LogSegment]:
        """The segments whose delay passed (the caller deletes their files)."""
        due = [seg for t, seg in self._pending if t <= now_ms]
        if due:
            self._pending = [(t, s) for t, s in self._pending if t > now_ms]
        return due

    def delete_all(self) -> None:
        """Unlink every waiting segment now (the log is closing)."""
        delete_segment_files(seg for _, seg in self._pending)
        self._pending = []

    def close_handles(self) -> None:
        """Close the waiting segments' files without unlinking (the directory goes whole)."""
        for _, seg in self._pending:
            seg.close_handles()
