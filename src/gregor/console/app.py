"""The web console: an aiohttp application that talks to a Kafka-compatible cluster through
Gregor's client only (so it works against any such cluster), one admin client per console.

Pages are rendered on the server (``console.html``); forms post and redirect back with a
message, so every action works without JavaScript. The overview page's live charts poll
``/api/throughput`` (records written per topic and lag per group since the last poll) and draw
with Chart.js, served from Debian's libjs-chart.js when it is installed (the page says so when
it is not). Nothing is fetched from the internet. Form posts from other origins are refused
(``same_origin``).
"""

from __future__ import annotations

import asyncio
import json
import time
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from gregor.client import AIOAdminClient, AIOConsumer, AIOProducer, TopicPartition, timespec
from gregor.console.html import Raw, field, form, link, page, table
from gregor.protocol.errors import KafkaError

STATIC = Path(__file__).parent / "static"
#: Where Debian's libjs-chart.js puts Chart.js.
CHART_JS = Path("/usr/share/javascript/chart.js/chart.umd.min.js")
CHART_JS_FALLBACKS = (Path("/usr/share/javascript/chart.js/chart.min.js"), Path("/usr/share/javascript/chart.js/Chart.min.js"))
FORMATS = ("text", "json", "hex")
ADMIN: web.AppKey[AIOAdminClient] = web.AppKey("admin", AIOAdminClient)
CONFIG = web.AppKey("config", dict[str, Any])
LAST = web.AppKey("last", dict[str, Any])


@web.middleware
async def same_origin(request: web.Request, handler: Any) -> web.StreamResponse:
    """Forms change the cluster, so a POST must come from the console's own pages: its Origin
    (or, without one, its Referer) must be this host. Another site's page cannot make a
    logged-in browser delete a topic here (cross-site request forgery)."""
    if request.method == "POST":
        from urllib.parse import urlsplit

        source = request.headers.get("Origin") or request.headers.get("Referer") or ""
        if urlsplit(source).netloc != request.host:
            return web.Response(status=403, text="cross-origin form posts are refused\n")
    return await handler(request)


def make_app(client_config: dict[str, Any]) -> web.Application:
    app = web.Application(middlewares=[same_origin])
    app[CONFIG] = dict(client_config)
    app[LAST] = {}
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    app.add_routes([
        web.get("/", overview),
        web.get("/api/throughput", throughput),
        web.get("/topics", topics),
        web.post("/topics", create_topic),
        web.get("/topics/{name}", topic),
        web.post("/topics/{name}/configs", alter_topic_configs),
        web.post("/topics/{name}/partitions", add_partitions),
        web.post("/topics/{name}/delete", delete_topic),
        web.get("/topics/{name}/messages", messages),
        web.post("/topics/{name}/produce", produce),
        web.get("/groups", groups),
        web.get("/groups/{group}", group),
        web.post("/groups/{group}/reset", reset_group),
        web.get("/acls", acls),
        web.get("/users", users),
        web.get("/static/chart.js", chart_js),
        web.static("/static", STATIC),
    ])
    return app


async def _start(app: web.Application) -> None:
    admin = AIOAdminClient(app[CONFIG])
    await admin.start()
    app[ADMIN] = admin


async def _stop(app: web.Application) -> None:
    await app[ADMIN].close()


def _back(location: str, message: str | None = None, error: str | None = None) -> web.HTTPFound:
    query = urlencode({k: v for k, v in (("message", message), ("error", error)) if v})
    return web.HTTPFound(location + ("?" + query if query else ""))


def _html(request: web.Request, title: str, body: str, active: str) -> web.Response:
    return web.Response(
        text=page(title, body, active, request.query.get("message"), request.query.get("error")),
        content_type="text/html",
    )


# --- overview and live charts ---


async def overview(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    cluster = await admin.describe_cluster()
    described = await admin.list_topics(internal=True)
    partitions = sum(len(t.partitions) for t in described.values())
    under = sum(1 for t in described.values() for p in t.partitions if len(p.isr) < len(p.replicas))
    offline = sum(1 for t in described.values() for p in t.partitions if p.leader < 0)
    groups_ = await admin.list_groups()
    chart = CHART_JS.exists() or any(p.exists() for p in CHART_JS_FALLBACKS)
    body = (
        "<section class='cards'>"
        f"<div class='card'><b id='cluster-id'>{escape(cluster.cluster_id or '')}</b><span>cluster id</span></div>"
        f"<div class='card'><b>{len(cluster.brokers)}</b><span>brokers</span></div>"
        f"<div class='card'><b>{cluster.controller_id}</b><span>controller</span></div>"
        f"<div class='card'><b>{len([t for t in described.values() if not t.is_internal])}</b><span>topics</span></div>"
        f"<div class='card'><b>{partitions}</b><span>partitions</span></div>"
        f"<div class='card'><b id='under-replicated'>{under}</b><span>under-replicated</span></div>"
        f"<div class='card'><b>{offline}</b><span>offline</span></div>"
        f"<div class='card'><b>{len(groups_)}</b><span>consumer groups</span></div>"
        "</section><h2>Brokers</h2>"
        + table(["Id", "Host", "Port", "Rack", "Role"], [
            (b[0], b[1], b[2], b[3] or "-", "controller" if b[0] == cluster.controller_id else "broker")
            for b in cluster.brokers
        ], "brokers")
        + "<h2>Live</h2>"
        + ("<div class='charts'><div class='chart'><canvas id='throughput-chart'></canvas></div>"
           "<div class='chart'><canvas id='lag-chart'></canvas></div></div>"
           if chart else "<p id='no-charts'>Charts need Chart.js: install Debian's libjs-chart.js.</p>")
    )
    return _html(request, "Cluster overview", body, "/")


async def throughput(request: web.Request) -> web.Response:
    """Records written per topic and total lag per group since the previous poll (per second)."""
    admin = request.app[ADMIN]
    described = await admin.list_topics()
    tps = [TopicPartition(t.name, p.partition) for t in described.values() for p in t.partitions]
    ends = await admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
    per_topic: dict[str, int] = {}
    for tp, (offset, _) in ends.items():
        per_topic[tp.topic] = per_topic.get(tp.topic, 0) + (offset or 0)
    lag: dict[str, int] = {}
    for gid, _ptype, _state in await admin.list_groups():
        committed = await admin.list_consumer_group_offsets(gid)
        lag[gid] = sum(max(0, (ends.get(tp, (om.offset, 0))[0] or 0) - om.offset) for tp, om in committed.items())
    now = time.monotonic()
    last = request.app[LAST]
    elapsed = now - last["at"] if last else 0.0
    rates = {
        t: max(0.0, (n - last["ends"].get(t, n)) / elapsed) if elapsed > 0 else 0.0 for t, n in per_topic.items()
    }
    last.update(at=now, ends=per_topic)
    return web.json_response({"time": time.time(), "records_per_sec": rates, "end_offsets": per_topic, "lag": lag})


async def chart_js(request: web.Request) -> web.StreamResponse:
    for path in (CHART_JS, *CHART_JS_FALLBACKS):
        if path.exists():
            return web.FileResponse(path, headers={"Content-Type": "application/javascript"})
    return web.Response(status=404, text="// Chart.js is not installed (Debian: libjs-chart.js)\n",
                        content_type="application/javascript")


# --- topics ---


async def topics(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    described = await admin.list_topics(internal=request.query.get("internal") == "1")
    sizes: dict[str, int] = {}
    try:
        for dirs in (await admin.describe_log_dirs()).values():
            for info in dirs.values():
                for (t, _), v in info["partitions"].items():
                    sizes[t] = sizes.get(t, 0) + v["size"]
    except KafkaError:
        pass
    rows = [
        (link(f"/topics/{quote(name)}", name), len(t.partitions),
         len(t.partitions[0].replicas) if t.partitions else 0,
         sum(1 for p in t.partitions if len(p.isr) < len(p.replicas)), _bytes(sizes.get(name)))
        for name, t in sorted(described.items())
    ]
    create = form("/topics", field("name", "Name") + field("partitions", "Partitions", "1", "number")
                  + field("replication_factor", "Replication factor", "-1", "number")
                  + field("configs", "Configs (k=v per line)", "", "textarea"), "Create topic", "create-topic")
    body = table(["Topic", "Partitions", "Replication", "Under-replicated", "Size"], rows, "topics") + \
        "<h2>New topic</h2>" + create
    return _html(request, "Topics", body, "/topics")


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _kv_lines(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep:
                raise ValueError(f"{line!r} is not key=value")
            out[key.strip()] = value.strip()
    return out


async def create_topic(request: web.Request) -> web.Response:
    from gregor.client import NewTopic

    data = await request.post()
    name = str(data.get("name", "")).strip()
    try:
        configs = _kv_lines(str(data.get("configs", "")))
        partitions, rf = int(str(data.get("partitions", "-1"))), int(str(data.get("replication_factor", "-1")))
    except ValueError as e:
        raise _back("/topics", error=f"cannot create {name}: {e}") from None
    err = (await request.app[ADMIN].create_topics([NewTopic(name, partitions, rf, configs)])).get(name)
    if err is not None:
        raise _back("/topics", error=f"cannot create {name}: {err}")
    raise _back(f"/topics/{quote(name)}", message=f"Created topic {name}.")


async def topic(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    name = request.match_info["name"]
    d = (await admin.describe_topics([name])).get(name)
    if d is None or isinstance(d, Exception):
        raise _back("/topics", error=f"topic {name}: {d}")
    tps = [TopicPartition(name, p.partition) for p in d.partitions]
    starts = await admin.list_offsets({tp: "earliest" for tp in tps})
    ends = await admin.list_offsets({tp: "latest" for tp in tps})
    rows = [
        (p.partition, p.leader, ",".join(map(str, p.replicas)), ",".join(map(str, p.isr)),
         starts[TopicPartition(name, p.partition)][0], ends[TopicPartition(name, p.partition)][0],
         link(f"/topics/{quote(name)}/messages?partition={p.partition}&from=earliest", "browse"))
        for p in d.partitions
    ]
    entries = (await admin.describe_configs([("topic", name)])).get((2, name))
    configs = [] if not isinstance(entries, dict) else sorted(
        (e.name, e.value, e.source) for e in entries.values()
    )
    overrides = "\n".join(f"{n}={v}" for n, v, src in configs if src == "DYNAMIC_TOPIC_CONFIG")
    base = f"/topics/{quote(name)}"
    body = (
        f"<p>Topic id {escape(str(d.topic_id))} · {len(d.partitions)} partitions · "
        f"{link(base + '/messages?from=tail', 'browse messages')}</p>"
        + table(["Partition", "Leader", "Replicas", "ISR", "Start offset", "End offset", ""], rows, "partitions")
        + "<h2>Produce a message</h2>"
        + form(base + "/produce", field("key", "Key") + field("value", "Value", "", "textarea")
               + field("headers", "Headers (k=v per line)", "", "textarea")
               + field("partition", "Partition (empty: the partitioner's)"), "Produce", "produce")
        + "<h2>Configs</h2>"
        + table(["Name", "Value", "Source"], [(n, v if v is not None else "", s) for n, v, s in configs], "configs")
        + form(base + "/configs", field("configs", "Overrides (k=v per line; the whole set)", overrides, "textarea"),
               "Save configs", "edit-configs")
        + "<h2>Partitions</h2>"
        + form(base + "/partitions", field("count", "New partition count", str(len(d.partitions) + 1), "number"),
               "Add partitions", "add-partitions")
        + "<h2>Danger</h2>"
        + form(base + "/delete", "", "Delete topic", "delete-topic")
    )
    return _html(request, f"Topic {name}", body, "/topics")


async def alter_topic_configs(request: web.Request) -> web.Response:
    from gregor.client.admin import OP_DELETE, OP_SET

    admin = request.app[ADMIN]
    name = request.match_info["name"]
    base = f"/topics/{quote(name)}"
    try:
        wanted = _kv_lines(str((await request.post()).get("configs", "")))
    except ValueError as e:
        raise _back(base, error=str(e)) from None
    entries = (await admin.describe_configs([("topic", name)])).get((2, name))
    current = {e.name for e in entries.values() if e.source == "DYNAMIC_TOPIC_CONFIG"} if isinstance(entries, dict) else set()
    changes = [(k, OP_SET, v) for k, v in wanted.items()] + [(k, OP_DELETE, None) for k in current - set(wanted)]
    err = (await admin.incremental_alter_configs({("topic", name): changes})).get((2, name))
    if err is not None:
        raise _back(base, error=f"cannot change the configs of {name}: {err}")
    raise _back(base, message=f"Updated the configs of {name}.")


async def add_partitions(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    base = f"/topics/{quote(name)}"
    try:
        count = int(str((await request.post()).get("count", "")))
    except ValueError:
        raise _back(base, error="the partition count must be a number") from None
    err = (await request.app[ADMIN].create_partitions({name: count})).get(name)
    if err is not None:
        raise _back(base, error=f"cannot add partitions to {name}: {err}")
    raise _back(base, message=f"{name} now has {count} partitions.")


async def delete_topic(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    err = (await request.app[ADMIN].delete_topics([name])).get(name)
    if err is not None:
        raise _back(f"/topics/{quote(name)}", error=f"cannot delete {name}: {err}")
    raise _back("/topics", message=f"Deleted topic {name}.")


def render(data: bytes | None, fmt: str) -> Raw:
    if data is None:
        return Raw("<i>null</i>")
    if fmt == "hex":
        return Raw(f"<code>{data.hex(' ')}</code>")
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return Raw(f"<pre>{escape(json.dumps(json.loads(text), indent=2, ensure_ascii=False))}</pre>")
        except ValueError:
            pass
    return Raw(f"<span>{escape(text)}</span>")


async def messages(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
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
        raise _back(f"/topics/{quote(name)}", error=f"bad browse options: {e}") from None
    d = (await admin.describe_topics([name])).get(name)
    if d is None or isinstance(d, Exception):
        raise _back("/topics", error=f"topic {name}: {d}")
    tps = [TopicPartition(name, p.partition) for p in d.partitions if only is None or p.partition == only]
    starts = await admin.list_offsets({tp: "earliest" for tp in tps})
    ends = await admin.list_offsets({tp: "latest" for tp in tps})
    begin: dict[TopicPartition, int] = {}
    if start == "earliest":
        begin = {tp: starts[tp][0] or 0 for tp in tps}
    elif start == "offset":
        begin = {tp: max(offset, starts[tp][0] or 0) for tp in tps}
    elif start == "time" and at_ms is not None:
        found = await admin.list_offsets({tp: at_ms for tp in tps})
        begin = {tp: o if (o := found[tp][0]) is not None and o >= 0 else ends[tp][0] or 0 for tp in tps}
    else:  # tail: the last ``limit`` records of each partition
        begin = {tp: max(starts[tp][0] or 0, (ends[tp][0] or 0) - limit) for tp in tps}
    records = await _read(request.app[CONFIG], begin, {tp: ends[tp][0] or 0 for tp in tps}, limit)
    rows = [
        (r.partition, r.offset, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.timestamp / 1000)),
         render(r.key, fmt), render(r.value, fmt),
         Raw("<br>".join(f"{escape(k)}: {render(v, fmt)}" for k, v in r.headers)))
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
    body = (f"<p>{link('/topics/' + quote(name), 'back to ' + name)}</p>" + controls
            + table(["Partition", "Offset", "Timestamp (UTC)", "Key", "Value", "Headers"], rows, "messages"))
    return _html(request, f"Messages of {name}", body, "/topics")


async def _read(config: dict[str, Any], begin: dict[TopicPartition, int], end: dict[TopicPartition, int], limit: int) -> list[Any]:
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
        headers = list(_kv_lines(str(data.get("headers", ""))).items())
        part_text = str(data.get("partition", "")).strip()
        partition = int(part_text) if part_text else None
    except ValueError as e:
        raise _back(base, error=f"cannot produce: {e}") from None
    key = str(data.get("key", "")) or None
    config: dict[str, Any] = request.app[CONFIG]
    producer = AIOProducer(config)
    try:
        await producer.start()
        meta = await producer.send_and_wait(name, value=str(data.get("value", "")).encode(), key=key,
                                            partition=partition, headers=headers)
    except (KafkaError, ValueError) as e:
        raise _back(base, error=f"cannot produce: {e}") from None
    finally:
        await producer.close()
    raise _back(base, message=f"Produced to partition {meta.partition} at offset {meta.offset}.")


# --- groups ---


async def groups(request: web.Request) -> web.Response:
    found = await request.app[ADMIN].list_groups()
    rows = [(link(f"/groups/{quote(g)}", g), t or "-", s or "-") for g, t, s in found]
    return _html(request, "Consumer groups", table(["Group", "Protocol type", "State"], rows, "groups"), "/groups")


async def group(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    gid = request.match_info["group"]
    desc = (await admin.describe_groups([gid])).get(gid)
    committed = await admin.list_consumer_group_offsets(gid)
    owners = {tp: m for m in (desc.members if desc else []) for tp in m.assignment}
    tps = sorted(set(committed) | set(owners))
    ends = await admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
    rows = []
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp, (None, 0))[0]
        m = owners.get(tp)
        rows.append((tp.topic, tp.partition, cur.offset if cur else "-", end if end is not None else "-",
                     end - cur.offset if cur is not None and end is not None else "-",
                     m.member_id if m else "-", m.client_host if m else "-"))
    members = [(m.member_id, m.client_id, m.client_host, ", ".join(f"{t}-{p}" for t, p in sorted(m.assignment)))
               for m in (desc.members if desc else [])]
    topics_ = sorted({tp.topic for tp in tps})
    reset = form(
        f"/groups/{quote(gid)}/reset",
        field("topic", "Topic", topics_[0] if topics_ else "", options=topics_ or ("",))
        + field("strategy", "Reset to", "earliest",
                options=("earliest", "latest", "offset", "datetime", "duration", "shift"))
        + field("value", "Offset / time (YYYY-MM-DDTHH:MM:SS) / duration (PT1H) / shift"),
        "Reset offsets", "reset-offsets",
    )
    body = (
        f"<p>State <b id='group-state'>{escape(desc.state if desc else 'Unknown')}</b></p>"
        + "<h2>Members</h2>" + table(["Member", "Client id", "Host", "Assignment"], members, "members")
        + "<h2>Offsets and lag</h2>"
        + table(["Topic", "Partition", "Committed", "End", "Lag", "Member", "Host"], rows, "lag")
        + "<h2>Reset offsets (the group must have no members)</h2>" + reset
    )
    return _html(request, f"Group {gid}", body, "/groups")


async def reset_group(request: web.Request) -> web.Response:
    admin = request.app[ADMIN]
    gid = request.match_info["group"]
    base = f"/groups/{quote(gid)}"
    data = await request.post()
    topic_name, strategy, value = str(data.get("topic", "")), str(data.get("strategy", "")), str(data.get("value", ""))
    d = (await admin.describe_topics([topic_name])).get(topic_name)
    if d is None or isinstance(d, Exception):
        raise _back(base, error=f"topic {topic_name}: {d}")
    tps = [TopicPartition(topic_name, p.partition) for p in d.partitions]
    starts = {tp: v[0] or 0 for tp, v in (await admin.list_offsets({tp: "earliest" for tp in tps})).items()}
    ends = {tp: v[0] or 0 for tp, v in (await admin.list_offsets({tp: "latest" for tp in tps})).items()}
    plan: dict[TopicPartition, int]
    try:
        if strategy == "earliest":
            plan = {tp: starts[tp] for tp in tps}
        elif strategy == "latest":
            plan = {tp: ends[tp] for tp in tps}
        elif strategy == "offset":
            plan = {tp: int(value) for tp in tps}
        elif strategy == "datetime":
            found = await admin.list_offsets({tp: timespec.parse_datetime(value) for tp in tps})
            plan = {tp: o if (o := found[tp][0]) is not None and o >= 0 else ends[tp] for tp in tps}
        elif strategy == "duration":
            back_ms = timespec.parse_duration_ms(value)
            found = await admin.list_offsets({tp: int(time.time() * 1000) - back_ms for tp in tps})
            plan = {tp: o if (o := found[tp][0]) is not None and o >= 0 else ends[tp] for tp in tps}
        elif strategy == "shift":
            current = await admin.list_consumer_group_offsets(gid, tps)
            plan = {tp: (current[tp].offset if tp in current else ends[tp]) + int(value) for tp in tps}
        else:
            raise ValueError(f"unknown strategy {strategy!r}")
    except ValueError as e:
        raise _back(base, error=f"cannot reset: {e}") from None
    clamped: dict[TopicPartition, int | Any] = {tp: max(starts[tp], min(o, ends[tp])) for tp, o in plan.items()}
    try:
        await admin.alter_consumer_group_offsets(gid, clamped)
    except KafkaError as e:
        raise _back(base, error=f"cannot reset the offsets of {gid}: {e}") from None
    raise _back(base, message=f"Reset {len(plan)} offsets of {gid} on {topic_name}.")


# --- security ---


async def acls(request: web.Request) -> web.Response:
    from gregor.client.acls import AclBindingFilter
    from gregor.protocol.errors import SecurityDisabledError

    try:
        found = await request.app[ADMIN].describe_acls(AclBindingFilter())
    except SecurityDisabledError:
        return _html(request, "ACLs", "<p id='no-authorizer'>No authorizer is configured: every request is allowed.</p>", "/acls")
    rows = [(b.resource_type.name, b.name, b.pattern_type.name, b.principal, b.host, b.operation.name,
             b.permission_type.name) for b in found]
    body = table(["Resource", "Name", "Pattern", "Principal", "Host", "Operation", "Permission"], rows, "acls")
    return _html(request, "ACLs", body, "/acls")


async def users(request: web.Request) -> web.Response:
    found = await request.app[ADMIN].describe_user_scram_credentials()
    rows = [(u, ", ".join(f"{m.kafka_name} ({i} iterations)" for m, i in sorted(c)) if not isinstance(c, Exception) else str(c))
            for u, c in sorted(found.items())]
    return _html(request, "Users (SCRAM credentials)", table(["User", "Credentials"], rows, "users"), "/users")


async def serve(client_config: dict[str, Any], host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start the console on ``host:port`` (0: any free port); returns the runner and the port."""
    runner = web.AppRunner(make_app(client_config), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    addresses = runner.addresses
    return runner, addresses[0][1] if addresses else port


async def run_forever(client_config: dict[str, Any], host: str, port: int, ready: Any = None) -> None:
    runner, bound = await serve(client_config, host, port)
    if ready is not None:
        ready(bound)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
