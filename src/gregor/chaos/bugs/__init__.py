"""Bugs injected on purpose, one module a bug, to prove a chaos run catches them.

Each module has ``inject()`` (monkeypatch one broker function with a wrong one; called by
``gregor.chaos.launch`` before the broker starts), ``DESCRIPTION`` and ``NEMESIS`` (the faults
that expose it). These are the only chaos modules that import broker internals; when those
move, these follow. ``BUGS`` lists them by name (``--bug NAME``).
"""

from __future__ import annotations

BUGS = {
    "ack-before-isr": "acks=all acknowledged as soon as the leader appended, before the ISR has it",
    "stale-leader-append": "a leader that lost its leadership keeps appending",
    "skip-truncation": "a follower does not truncate its log to the new leader's after a leader change",
    "endtxn-old-epoch": "the transaction coordinator applies an EndTxn from an older producer epoch",
    "offsets-outside-txn": "TxnOffsetCommit offsets are committed at once, not with the transaction",
    "read-committed-past-lso": "read_committed fetches are served up to the high watermark, past the LSO",
}
