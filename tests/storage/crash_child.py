"""Child process for the crash test: append forever in fsync mode, report each acknowledged
batch on stdout, until killed.

    python crash_child.py <log_dir>

Batch number ``i`` holds ``records_for(i)`` and starts at producer sequence
``base_sequence(i)``; after every append returns the child prints
``ack <i> <first_offset> <last_offset>``. It first prints ``ready <log_end_offset> <next_i>``
once the log is open (recovered).
"""

from __future__ import annotations

import sys

from gregor.protocol.records import build_batch
from gregor.storage import LogManager

PRODUCER_ID = 42
TOPIC = "crash"
CONFIG = {
    "flush.messages": "1",
    "segment.bytes": "16384",
    "index.interval.bytes": "700",
    "message.timestamp.after.max.ms": str(1 << 62),
}


def records_for(i: int) -> list[tuple[int, bytes, bytes]]:
    return [
        (1_000_000 + i, b"b%d-%d" % (i, j), (b"%d:" % i) * (5 + (i * 7 + j) % 40))
        for j in range(1 + i % 3)
    ]


def base_sequence(i: int) -> int:
    """Sequences count records: batches hold 1, 2, 3, 1, 2, 3, ... records."""
    r = i % 3
    return i // 3 * 6 + r * (r + 1) // 2


def batch_index(last_seq: int) -> int:
    """The batch whose last record has sequence ``last_seq``."""
    i = max(last_seq // 2 - 2, 0)
    while base_sequence(i + 1) - 1 < last_seq:
        i += 1
    return i


def batch_for(i: int) -> bytes:
    return build_batch(
        records_for(i), producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=base_sequence(i)
    )


def main(log_dir: str) -> None:
    manager = LogManager(log_dir, CONFIG)
    log = manager.get_or_create_log(TOPIC, 0)
    entry = log.producer_state.last_entry(PRODUCER_ID)
    seq = batch_index(entry.last_seq) + 1 if entry else 0
    out = sys.stdout
    out.write(f"ready {log.log_end_offset} {seq}\n")
    out.flush()
    while True:
        info = log.append(batch_for(seq))
        log.update_high_watermark(log.log_end_offset)
        out.write(f"ack {seq} {info.first_offset} {info.last_offset}\n")
        out.flush()
        seq += 1
        if seq % 50 == 0:
            manager.checkpoint()


if __name__ == "__main__":
    main(sys.argv[1])
