"""The web console: an aiohttp application that talks to a Kafka-compatible cluster through
Gregor's client only (so it works against any such cluster).

Who may use it and as whom is ``console.settings``; requests pass the guards of
``console.guard`` (allowed Host, same Origin, errors of the cluster as pages) and
``console.auth`` (a session, and its CSRF token on every state change) before any page here
sees them. Each page acts through the session's Kafka client (``_admin``): the visitor's own
with ``--auth sasl``, so the cluster's ACLs apply to what each visitor sees and does.

Pages are rendered on the server (``console.html``); forms post and redirect back with a
message, so every action works without JavaScript. Destructive actions (delete a topic, delete
records, reset a group's offsets) answer first with what they would do and a form to confirm
it. The overview's live charts poll ``/api/throughput`` (records written per topic and lag
per group since the session's last poll) and draw with Chart.js, served from Debian's
libjs-chart.js when it is installed (the page says so when it is not). Nothing is fetched
from the internet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from gregor.client import AIOAdminClient, AIOConsumer, AIOProducer, TopicPartition, timespec
from gregor.console.auth import login, login_form, logout, sessions
from gregor.console.guard import allowed_host, broker_errors, same_origin, security_headers, why
from gregor.console.html import Raw, field, form, hidden, link, page, table
from gregor.console.sessions import Clock, run_every
from gregor.console.settings import ConsoleSettings
from gregor.console.state import SESSION, STATE, ConsoleState
from gregor.protocol.errors import KafkaError

STATIC = Path(__file__).parent / "static"
#: Where Debian's libjs-chart.js puts Chart.js.
CHART_JS = Path("/usr/share/javascript/chart.js/chart.umd.min.js")
CHART_JS_FALLBACKS = (Path("/usr/share/javascript/chart.js/chart.min.js"), Path("/usr/share/javascript/chart.js/Chart.min.js"))
FORMATS = ("text", "json", "hex")
#: How often expired sessions are ended (their clients closed).
REAP_EVERY_S = 15.0
REAPER: web.AppKey[asyncio.Task[None]] = web.AppKey("console_reaper", asyncio.Task)


def make_app(settings: ConsoleSettings, clock: Clock = time.monotonic) -> web.Application:
    app = web.Application(middlewares=[allowed_host, same_origin, sessions, broker_errors])
    app[STATE] = ConsoleState(settings, clock)
    app.on_response_prepare.append(security_headers)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    app.add_routes([
        web.get("/login", login_form),
        web.post("/login", login),
        web.post("/logout", logout),
        web.get("/", overview),
        web.get("/api/throughput", throughput),
        web.get("/topics", topics),
        web.post("/topics", create_topic),
        web.get("/topics/{name}", topic),
        web.post("/topics/{name}/configs", alter_topic_configs),
        web.post("/topics/{name}/partitions", add_partitions),
        web.post("/topics/{name}/delete", delete_topic),
        web.post("/topics/{name}/delete-records", delete_records),
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
    state = app[STATE]
    if state.settings.auth != "sasl":
        admin = AIOAdminClient(dict(state.settings.client_config))
        try:
            await admin.start()
        except BaseException:
            await admin.close()
            raise
        state.shared_admin = admin
    app[REAPER] = asyncio.get_running_loop().create_task(run_every(REAP_EVERY_S, state.store.reap))


async def _stop(app: web.Application) -> None:
    state = app[STATE]
    if REAPER in app:
        app[REAPER].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await app[REAPER]
    await state.store.close()
    if state.shared_admin is not None:
        await state.shared_admin.close()


def _admin(request: web.Request) -> AIOAdminClient:
    admin: AIOAdminClient = request[SESSION].admin
    return admin


def _config(request: web.Request) -> dict[str, Any]:
    config: dict[str, Any] = request[SESSION].client_config
    return config


def _back(location: str, message: str | None = None, error: str | None = None) -> web.HTTPSeeOther:
    """Back to a page after a form's post (303: the browser gets it), with what happened."""
    query = urlencode({k: v for k, v in (("message", message), ("error", error)) if v})
    return web.HTTPSeeOther(location + ("?" + query if query else ""))


def _html(request: web.Request, title: str, body: str, active: str, error: str | None = None) -> web.Response:
    return web.Response(
        text=page(title, body, active, request.query.get("message"), error or request.query.get("error")),
        content_type="text/html",
    )


# --- overview and live charts ---


async def overview(request: web.Request) -> web.Response:
    admin = _admin(request)
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
        + "<h2>Live</h2><p id='live-status'></p>"
        + ("<div class='charts'><div class='chart'><canvas id='throughput-chart'></canvas></div>"
           "<div class='chart'><canvas id='lag-chart'></canvas></div></div>"
           if chart else "<p id='no-charts'>Charts need Chart.js: install Debian's libjs-chart.js.</p>")
    )
    return _html(request, "Cluster overview", body, "/")


async def throughput(request: web.Request) -> web.Response:
    """Records written per topic and total lag per group since the previous poll (per second)."""
    admin = _admin(request)
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
    last = request[SESSION].throughput
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
    admin = _admin(request)
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
    err = (await _admin(request).create_topics([NewTopic(name, partitions, rf, configs)])).get(name)
    if err is not None:
        raise _back("/topics", error=f"cannot create {name}: {why(err)}")
    raise _back(f"/topics/{quote(name)}", message=f"Created topic {name}.")


async def topic(request: web.Request) -> web.Response:
    admin = _admin(request)
    name = request.match_info["name"]
    d = (await admin.describe_topics([name])).get(name)
    if d is None or isinstance(d, Exception):
        raise _back("/topics", error=f"topic {name}: {why(d) if d else 'not found'}")
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
        + form(base + "/delete-records", field("partition", "Partition", "all", options=(
            "all", *(str(p.partition) for p in d.partitions)))
               + field("offset", "Delete records before offset (end: all of them)", "end"),
               "Delete records…", "delete-records")
        + form(base + "/delete", "", "Delete topic…", "delete-topic")
    )
    return _html(request, f"Topic {name}", body, "/topics")


async def alter_topic_configs(request: web.Request) -> web.Response:
    from gregor.client.admin import OP_DELETE, OP_SET

    admin = _admin(request)
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
        raise _back(base, error=f"cannot change the configs of {name}: {why(err)}")
    raise _back(base, message=f"Updated the configs of {name}.")


async def add_partitions(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    base = f"/topics/{quote(name)}"
    try:
        count = int(str((await request.post()).get("count", "")))
    except ValueError:
        raise _back(base, error="the partition count must be a number") from None
    err = (await _admin(request).create_partitions({name: count})).get(name)
    if err is not None:
        raise _back(base, error=f"cannot add partitions to {name}: {why(err)}")
    raise _back(base, message=f"{name} now has {count} partitions.")


async def delete_topic(request: web.Request) -> web.Response:
    """First a page that asks for the topic's name; deleted when the name typed matches."""
    name = request.match_info["name"]
    typed = (await request.post()).get("confirm")
    if typed != name:
        body = (
            f"<p>Deleting <b>{escape(name)}</b> deletes all its partitions and records, for every "
            "client, and cannot be undone.</p>"
            + form(f"/topics/{quote(name)}/delete", field("confirm", "Type the topic's name to confirm"),
                   f"Delete topic {name}", "confirm-delete-topic")
            + f"<p>{link('/topics/' + quote(name), 'Cancel')}</p>"
        )
        error = None if typed is None else "The name typed is not the topic's: nothing was deleted."
        return _html(request, f"Delete topic {name}?", body, "/topics", error=error)
    err = (await _admin(request).delete_topics([name])).get(name)
    if err is not None:
        raise _back(f"/topics/{quote(name)}", error=f"cannot delete {name}: {why(err)}")
    raise _back("/topics", message=f"Deleted topic {name}.")


def _plan_field(data: Any) -> dict[int, int] | None:
    """The confirmed plan (``{"partition": offset}`` in JSON), or None when there is none."""
    text = data.get("plan")
    if text is None or data.get("confirmed") != "yes":
        return None
    try:
        plan = json.loads(str(text))
        out = {int(k): int(v) for k, v in plan.items()}
    except (ValueError, TypeError, AttributeError):
        raise ValueError("the confirmed plan is not readable") from None
    if not out or any(p < 0 or o < 0 for p, o in out.items()):
        raise ValueError("the confirmed plan is not readable")
    return out


def _confirm(action: str, values: dict[str, str], plan: dict[int, int], button: str, form_id: str) -> str:
    fields = "".join(hidden(k, v) for k, v in values.items())
    fields += hidden("plan", json.dumps({str(p): o for p, o in sorted(plan.items())})) + hidden("confirmed", "yes")
    return form(action, fields, button, form_id)


async def delete_records(request: web.Request) -> web.Response:
    """Delete the records of a partition (or all) before an offset: first the plan (each
    partition's start, end and new start) and a form to confirm it, then exactly that plan."""
    admin = _admin(request)
    name = request.match_info["name"]
    base = f"/topics/{quote(name)}"
    data = await request.post()
    which, before = str(data.get("partition", "all")).strip(), str(data.get("offset", "end")).strip().lower()
    try:
        confirmed = _plan_field(data)
        only = None if which == "all" else int(which)
        offset = None if before == "end" else int(before)
        if offset is not None and offset < 0:
            raise ValueError("the offset must be 0 or more, or end")
    except ValueError as e:
        raise _back(base, error=f"cannot delete records: {e}") from None
    if confirmed is not None:
        result = await admin.delete_records({TopicPartition(name, p): o for p, o in confirmed.items()})
        failed = [f"{tp.partition}: {why(r)}" for tp, r in sorted(result.items()) if isinstance(r, Exception)]
        if failed:
            raise _back(base, error=f"cannot delete records of {name}: {'; '.join(failed)}")
        summary = ", ".join(f"partition {tp.partition} now starts at offset {r}" for tp, r in sorted(result.items()))
        raise _back(base, message=f"Deleted records of {name}: {summary}.")
    d = (await admin.describe_topics([name])).get(name)
    if d is None or isinstance(d, Exception):
        raise _back("/topics", error=f"topic {name}: {why(d) if d else 'not found'}")
    tps = [TopicPartition(name, p.partition) for p in d.partitions if only is None or p.partition == only]
    if not tps:
        raise _back(base, error=f"cannot delete records: {name} has no partition {which}")
    starts = {tp: v[0] or 0 for tp, v in (await admin.list_offsets({tp: "earliest" for tp in tps})).items()}
    ends = {tp: v[0] or 0 for tp, v in (await admin.list_offsets({tp: "latest" for tp in tps})).items()}
    beyond = [tp.partition for tp in tps if offset is not None and offset > ends[tp]]
    if beyond:
        raise _back(base, error=f"cannot delete records: offset {offset} is beyond the end of partition "
                                f"{', '.join(map(str, beyond))}")
    plan = {tp.partition: max(starts[tp], ends[tp] if offset is None else offset) for tp in sorted(tps)}
    rows = [(p, starts[TopicPartition(name, p)], ends[TopicPartition(name, p)], new, new - starts[TopicPartition(name, p)])
            for p, new in plan.items()]
    body = (
        f"<p>These records of <b>{escape(name)}</b> would be deleted, for every client; this cannot be undone.</p>"
        + table(["Partition", "Start offset", "End offset", "New start offset", "Records deleted"], rows,
                "delete-records-plan")
        + _confirm(base + "/delete-records", {"partition": which, "offset": before}, plan, "Delete these records",
                   "confirm-delete-records")
        + f"<p>{link(base, 'Cancel')}</p>"
    )
    return _html(request, f"Delete records of {name}?", body, "/topics")


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
    admin = _admin(request)
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
        raise _back("/topics", error=f"topic {name}: {why(d) if d else 'not found'}")
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
    records = await _read(_config(request), begin, {tp: ends[tp][0] or 0 for tp in tps}, limit)
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
        raise _back(base, error=f"cannot produce: {why(e)}") from None
    key = str(data.get("key", "")) or None
    config: dict[str, Any] = _config(request)
    # one record: no producer id needed, and a visitor without WRITE hears about the topic
    # (TOPIC_AUTHORIZATION_FAILED), not about idempotence (CLUSTER_AUTHORIZATION_FAILED)
    producer = AIOProducer({"enable.idempotence": False, "acks": "all", **config})
    try:
        await producer.start()
        meta = await producer.send_and_wait(name, value=str(data.get("value", "")).encode(), key=key,
                                            partition=partition, headers=headers)
    except (KafkaError, ValueError) as e:
        raise _back(base, error=f"cannot produce: {why(e)}") from None
    finally:
        await producer.close()
    raise _back(base, message=f"Produced to partition {meta.partition} at offset {meta.offset}.")


# --- groups ---


async def groups(request: web.Request) -> web.Response:
    found = await _admin(request).list_groups()
    rows = [(link(f"/groups/{quote(g)}", g), t or "-", s or "-") for g, t, s in found]
    return _html(request, "Consumer groups", table(["Group", "Protocol type", "State"], rows, "groups"), "/groups")


async def group(request: web.Request) -> web.Response:
    admin = _admin(request)
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
    """Reset a group's committed offsets on a topic: first the plan (each partition's committed
    and new offset) and a form to confirm it, then exactly that plan."""
    admin = _admin(request)
    gid = request.match_info["group"]
    base = f"/groups/{quote(gid)}"
    data = await request.post()
    topic_name, strategy, value = str(data.get("topic", "")), str(data.get("strategy", "")), str(data.get("value", ""))
    try:
        confirmed = _plan_field(data)
    except ValueError as e:
        raise _back(base, error=f"cannot reset: {e}") from None
    desc = (await admin.describe_groups([gid])).get(gid)
    if desc is not None and desc.members:
        raise _back(base, error=f"cannot reset the offsets of {gid}: the group has {len(desc.members)} active "
                               "members; it must be inactive (stop its consumers first)")
    if confirmed is not None:
        try:
            await admin.alter_consumer_group_offsets(gid, {TopicPartition(topic_name, p): o for p, o in confirmed.items()})
        except KafkaError as e:
            raise _back(base, error=f"cannot reset the offsets of {gid}: {why(e)}") from None
        raise _back(base, message=f"Reset {len(confirmed)} offsets of {gid} on {topic_name}.")
    d = (await admin.describe_topics([topic_name])).get(topic_name)
    if d is None or isinstance(d, Exception):
        raise _back(base, error=f"topic {topic_name}: {why(d) if d else 'not found'}")
    tps = [TopicPartition(topic_name, p.partition) for p in d.partitions]
    starts = {tp: v[0] or 0 for tp, v in (await admin.list_offsets({tp: "earliest" for tp in tps})).items()}
    ends = {tp: v[0] or 0 for tp, v in (await admin.list_offsets({tp: "latest" for tp in tps})).items()}
    current = await admin.list_consumer_group_offsets(gid, tps)
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
            plan = {tp: (current[tp].offset if tp in current else ends[tp]) + int(value) for tp in tps}
        else:
            raise ValueError(f"unknown strategy {strategy!r}")
    except ValueError as e:
        raise _back(base, error=f"cannot reset: {e}") from None
    clamped = {tp.partition: max(starts[tp], min(o, ends[tp])) for tp, o in sorted(plan.items())}
    rows = [(topic_name, p, current[TopicPartition(topic_name, p)].offset if TopicPartition(topic_name, p) in current
             else "-", o) for p, o in clamped.items()]
    body = (
        f"<p>The committed offsets of group <b>{escape(gid)}</b> on <b>{escape(topic_name)}</b> would become:</p>"
        + table(["Topic", "Partition", "Committed offset", "New offset"], rows, "reset-plan")
        + _confirm(base + "/reset", {"topic": topic_name, "strategy": strategy, "value": value}, clamped,
                   "Reset these offsets", "confirm-reset")
        + f"<p>{link(base, 'Cancel')}</p>"
    )
    return _html(request, f"Reset the offsets of {gid}?", body, "/groups")


# --- security ---


async def acls(request: web.Request) -> web.Response:
    from gregor.client.acls import AclBindingFilter
    from gregor.protocol.errors import SecurityDisabledError

    try:
        found = await _admin(request).describe_acls(AclBindingFilter())
    except SecurityDisabledError:
        return _html(request, "ACLs", "<p id='no-authorizer'>No authorizer is configured: every request is allowed.</p>", "/acls")
    rows = [(b.resource_type.name, b.name, b.pattern_type.name, b.principal, b.host, b.operation.name,
             b.permission_type.name) for b in found]
    body = table(["Resource", "Name", "Pattern", "Principal", "Host", "Operation", "Permission"], rows, "acls")
    return _html(request, "ACLs", body, "/acls")


async def users(request: web.Request) -> web.Response:
    found = await _admin(request).describe_user_scram_credentials()
    rows = [(u, ", ".join(f"{m.kafka_name} ({i} iterations)" for m, i in sorted(c)) if not isinstance(c, Exception) else why(c))
            for u, c in sorted(found.items())]
    return _html(request, "Users (SCRAM credentials)", table(["User", "Credentials"], rows, "users"), "/users")


async def serve(settings: ConsoleSettings, clock: Clock = time.monotonic) -> tuple[web.AppRunner, int]:
    """Start the console on the settings' host and port (0: any free port), over TLS when
    they have a context; returns the runner and the bound port."""
    runner = web.AppRunner(make_app(settings, clock), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port, ssl_context=settings.tls)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    addresses = runner.addresses
    return runner, addresses[0][1] if addresses else settings.port


async def run_forever(settings: ConsoleSettings, ready: Any = None) -> None:
    runner, bound = await serve(settings)
    if ready is not None:
        ready(bound)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
