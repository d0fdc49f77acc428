"""A topic's messages: browse them (from the tail, the earliest offset, an offset or a time;
shown as text, JSON or hex) with a consumer of the session's own client config, and produce one
(key, value, headers, partition) with a producer of it."""

from __future__ import annotations

import json
import time
from html import escape
from typing import Any
from urllib.parse import quote

from aiohttp import web

from gregor.client import AIOConsumer, AIOProducer, TopicPartition, timespec
from gregor.console.guard import why
from gregor.console.html import Raw, field, link, table
from gregor.console.pages import back, kv_lines, respond, session_admin, session_config
from gregor.protocol.errors import KafkaError

FORMATS = ("text", "json", "hex")


def render(data: bytes | None, fmt: str) -> Raw:
    if data is None:
        return Raw("<i>null</i>")
    if fmt == "hex":
        return Raw(f"<code>{data.hex(' ')}</code>")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return Raw(
                f"<pre>{escape(json.dumps(json.loads(text), indent=2, ensure_ascii=False))}</pre>"
            )
        except ValueError:
            pass
    return Raw(f"<span>{escape(text)}</span>")


async def messages(request: web.Request) -> web.Response:
    admin = session_admin(request)
    name = request.match_info["name"]
    q = request.query
    fmt = q.get("format", "text") if q.get("format") in FORMATS else "text"
    start = q.get("from", "tail")
    try:
        limit = max(1, min(500, int(q.get("limit", "50"))))
        only = int(q["partition"]) if q.get("partition", "") != "" else None
        offset = int(q.get("offset", "0") or 0)
        at_ms = timespec.parse_datetime(q.get("time", "")) if start == "time" else None
    except ValueError as e:
        raise back(f"/topics/{quote(name)}", error=f"bad browse options: {e}") from None
    d = (await admin.describe_topics([name])).get(name)
    if d is None or isinstance(d, Exception):
        raise back("/topics", error=f"topic {name}: {why(d) if d else 'not found'}")
    tps = [
        TopicPartition(name, p.partition)
        for p in d.partitions
        if only is None or p.partition == only
    ]
    starts = await admin.list_offsets({tp: "earliest" for tp in tps})
    ends = await admin.list_offsets({tp: "latest" for tp in tps})
    begin: dict[TopicPartition, int] = {}
    if start == "earliest":
        begin = {tp: starts[tp][0] or 0 for tp in tps}
    elif start == "offset":
        begin = {tp: max(offset, starts[tp][0] or 0) for tp in tps}
    elif start == "time" and at_ms is not None:
        found = await admin.list_offsets({tp: at_ms for tp in tps})
        begin = {
            tp: o if (o := found[tp][0]) is not None and o >= 0 else ends[tp][0] or 0 for tp in tps
        }
    else:  # tail: the last ``limit`` records of each partition
        begin = {tp: max(starts[tp][0] or 0, (ends[tp][0] or 0) - limit) for tp in tps}
    records = await _read(
        session_config(request), begin, {tp: ends[tp][0] or 0 for tp in tps}, limit
    )
    rows = [
        (
            r.partition,
            r.offset,
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.timestamp / 1000)),
            render(r.key, fmt),
            render(r.value, fmt),
            Raw("<br>".join(f"{escape(k)}: {render(v, fmt)}" for k, v in r.headers)),
        )
        for r in records
    ]
    base = f"/topics/{quote(name)}/messages"
    controls = (
        f"<form method='get' action='{base}' id='browse'>"
        + field("partition", "Partition", "" if only is None else str(only))
        + field("from", "From", start, options=("tail", "earliest", "offset", "time"))
        + field("offset", "Offset", str(offset), "number")
        + field("time", "Time (YYYY-MM-DDTHH:MM:SS, UTC)", q.get("time", ""))
        + field("limit", "Limit", str(limit), "number")
        + field("format", "Show as", fmt, options=FORMATS)
        + "<button type='submit'>Show</button></form>"
    )
    body = (
        f"<p>{link('/topics/' + quote(name), 'back to ' + name)}</p>"
        + controls
        + table(
            ["Partition", "Offset", "Timestamp (UTC)", "Key", "Value", "Headers"], rows, "messages"
        )
    )
    return respond(request, f"Messages of {name}", body, "/topics")


async def _read(
    config: dict[str, Any],
    begin: dict[TopicPartition, int],
    end: dict[TopicPartition, int],
    limit: int,
) -> list[Any]:
    """Up to ``limit`` records per partition from ``begin`` to ``end`` (not past it)."""
    wanted = {tp: min(limit, end[tp] - b) for tp, b in begin.items() if end[tp] > b}
    if not wanted:
        return []
    consumer = AIOConsumer({**config, "enable.auto.commit": False})
    out: list[Any] = []
    try:
        await consumer.start()
        consumer.assign(list(wanted))
        for tp, b in begin.items():
            if tp in wanted:
                consumer.seek(tp, b)
        got = dict.fromkeys(wanted, 0)
        deadline = time.monotonic() + 5
        while any(got[tp] < n for tp, n in wanted.items()) and time.monotonic() < deadline:
            for r in await consumer.poll(500):
                tp = TopicPartition(r.topic, r.partition)
                if tp in got and got[tp] < wanted[tp]:
                    got[tp] += 1
                    out.append(r)
    finally:
        await consumer.close(autocommit=False)
    return sorted(out, key=lambda r: (r.partition, r.offset))


async def produce(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    base = f"/topics/{quote(name)}"
    data = await request.post()
    try:
        headers = list(kv_lines(str(data.get("headers", ""))).items())
        part_text = str(data.get("partition", "")).strip()
        partition = int(part_text) if part_text else None
    except ValueError as e:
        raise back(base, error=f"cannot produce: {why(e)}") from None
    key = str(data.get("key", "")) or None
    config: dict[str, Any] = session_config(request)
    # one record: no producer id needed, and a visitor without WRITE hears about the topic
    # (TOPIC_AUTHORIZATION_FAILED), not about idempotence (CLUSTER_AUTHORIZATION_FAILED)
    producer = AIOProducer({"enable.idempotence": False, "acks": "all", **config})
    try:
        await producer.start()
        meta = await producer.send_and_wait(
            name,
            value=str(data.get("value", "")).encode(),
            key=key,
            partition=partition,
            headers=headers,
        )
    except (KafkaError, ValueError) as e:
        raise back(base, error=f"cannot produce: {why(e)}") from None
    finally:
        await producer.close()
    raise back(base, message=f"Produced to partition {meta.partition} at offset {meta.offset}.")
