"""The reference pipeline's generator: deterministic page views, vectorized in Arrow.

Events are generated in chunks of :data:`CHUNK`, each from its own seed, so any chunk can be
generated alone (the main job's generator produces chunk by chunk) and the ground truth counted
from the same columns (``clickstream.expected_windows``). No state.
"""

from __future__ import annotations

from typing import Any

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
END_PAGE = "__end__"
PAGES = ["/", "/search", "/cart", "/checkout", "/help"] + [f"/products/{i}" for i in range(1, 8)]
REFERRERS = ["direct", "search", "social", "email"]

CHUNK = 65_536  # events per generated chunk; each chunk has its own seed, so chunks are independent


def _seed(seed: int, chunk: int, column: int) -> int:
    return (seed * 1_000_003 + chunk) * 8 + column


def generate_columns(
    n: int,
    *,
    users: int = 300,
    minutes: int = 10,
    jitter_s: int = 20,
    seed: int = 7,
    chunk: int | None = None,
) -> Any:
    """The generated page views as a ``pyarrow.Table`` (vectorized: about a million a second).

    Columns event_id, user_id, page, ts, referrer, duration_ms; ``chunk`` k gives only events
    ``[k * CHUNK, (k + 1) * CHUNK)``. Event i is due at ``START_MS + span * i // n`` of event time
    and stamped up to ``jitter_s`` earlier, so the stream is out of order by less than the jitter.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if chunk is None:
        parts = [
            generate_columns(n, users=users, minutes=minutes, jitter_s=jitter_s, seed=seed, chunk=k)
            for k in range(-(-n // CHUNK))
        ]
        return pa.concat_tables(parts) if parts else _empty_table()
    lo, hi = chunk * CHUNK, min((chunk + 1) * CHUNK, n)
    if hi <= lo:
        return _empty_table()
    count = hi - lo
    span = minutes * 60_000

    def uniform(column: int) -> Any:
        return pc.random(count, initializer=_seed(seed, chunk, column))

    def below(column: int, k: int) -> Any:  # integers in [0, k)
        return pc.cast(pc.floor(pc.multiply(uniform(column), k)), pa.int64())

    idx = pa.array(range(lo, hi), pa.int64())
    nominal = pc.add(START_MS, pc.divide(pc.multiply(idx, span), n))
    ts = pc.max_element_wise(START_MS, pc.subtract(nominal, below(0, jitter_s * 1000)))
    ts = pc.min_element_wise(ts, START_MS + span - 1)
    user = pc.binary_join_element_wise(
        "u", pc.utf8_lpad(pc.cast(below(1, users), pa.string()), 4, "0"), ""
    )
    # a few popular pages, a long tail: page k has weight 1 / (k + 1)
    weights = [1.0 / (i + 1) for i in range(len(PAGES))]
    total = sum(weights)
    u = uniform(2)
    page_idx = pa.nulls(count, pa.int64()).fill_null(0)
    acc = 0.0
    for w in weights[:-1]:
        acc += w / total
        page_idx = pc.add(page_idx, pc.cast(pc.greater_equal(u, acc), pa.int64()))
    page = pc.take(pa.array(PAGES), page_idx)
    referrer = pc.take(pa.array(REFERRERS), below(3, len(REFERRERS)))
    duration = pc.cast(pc.add(200, below(4, 59_800)), pa.int32())
    return pa.table(
        {
            "event_id": idx,
            "user_id": user,
            "page": page,
            "ts": ts,
            "referrer": referrer,
            "duration_ms": duration,
        }
    )


def _empty_table() -> Any:
    import pyarrow as pa

    return pa.table(
        {
            "event_id": pa.array([], pa.int64()),
            "user_id": pa.array([], pa.string()),
            "page": pa.array([], pa.string()),
            "ts": pa.array([], pa.int64()),
            "referrer": pa.array([], pa.string()),
            "duration_ms": pa.array([], pa.int32()),
        }
    )


def json_values(table: Any) -> Any:
    """Each row as the JSON page view of the module docstring (a binary Arrow array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def text(name: str) -> Any:
        return pc.cast(table.column(name), pa.string())

    return pc.cast(
        pc.binary_join_element_wise(
            '{"event_id":',
            text("event_id"),
            ',"user_id":"',
            table.column("user_id"),
            '","page":"',
            table.column("page"),
            '","ts":',
            text("ts"),
            ',"referrer":"',
            table.column("referrer"),
            '","duration_ms":',
            text("duration_ms"),
            "}",
            "",
        ),
        pa.binary(),
    )


def generate_events(
    n: int, *, users: int = 300, minutes: int = 10, jitter_s: int = 20, seed: int = 7
) -> list[dict]:
    """``n`` page views spread over ``minutes`` of event time, out of order by < ``jitter_s``."""
    return generate_columns(
        n, users=users, minutes=minutes, jitter_s=jitter_s, seed=seed
    ).to_pylist()


def end_marker(events: Any, window_ms: int = 60_000, watermark_ms: int = 60_000) -> dict:
    """An event late enough in event time that the watermark passes every real window."""
    if isinstance(events, list):
        last = max(e["ts"] for e in events) if events else START_MS
    else:
        last = events if isinstance(events, int) else START_MS
    ts = (last // window_ms + 1) * window_ms + watermark_ms + window_ms
    return {
        "event_id": -1,
        "user_id": "",
        "page": END_PAGE,
        "ts": ts,
        "referrer": "",
        "duration_ms": 0,
    }
