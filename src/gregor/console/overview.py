"""The overview page (the cluster's brokers, topics, partitions and groups at a glance) and its
live charts: ``/api/throughput`` answers records written per topic and lag per group since the
session's previous poll, drawn with Chart.js from Debian's libjs-chart.js (``/static/chart.js``)
when it is installed."""

from __future__ import annotations

import time
from html import escape
from pathlib import Path

from aiohttp import web

from gregor.client import TopicPartition
from gregor.console.html import table
from gregor.console.pages import respond, session_admin
from gregor.console.state import SESSION

#: Where Debian's libjs-chart.js puts Chart.js.
CHART_JS = Path("/usr/share/javascript/chart.js/chart.umd.min.js")
CHART_JS_FALLBACKS = (
    Path("/usr/share/javascript/chart.js/chart.min.js"),
    Path("/usr/share/javascript/chart.js/Chart.min.js"),
)


async def overview(request: web.Request) -> web.Response:
    admin = session_admin(request)
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
        + table(
            ["Id", "Host", "Port", "Rack", "Role"],
            [
                (
                    b[0],
                    b[1],
                    b[2],
                    b[3] or "-",
                    "controller" if b[0] == cluster.controller_id else "broker",
                )
                for b in cluster.brokers
            ],
            "brokers",
        )
        + "<h2>Live</h2><p id='live-status'></p>"
        + (
            "<div class='charts'><div class='chart'><canvas id='throughput-chart'></canvas></div>"
            "<div class='chart'><canvas id='lag-chart'></canvas></div></div>"
            if chart
            else "<p id='no-charts'>Charts need Chart.js: install Debian's libjs-chart.js.</p>"
        )
    )
    return respond(request, "Cluster overview", body, "/")


async def throughput(request: web.Request) -> web.Response:
    """Records written per topic and total lag per group since the previous poll (per second)."""
    admin = session_admin(request)
    described = await admin.list_topics()
    tps = [TopicPartition(t.name, p.partition) for t in described.values() for p in t.partitions]
    ends = await admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
    per_topic: dict[str, int] = {}
    for tp, (offset, _) in ends.items():
        per_topic[tp.topic] = per_topic.get(tp.topic, 0) + (offset or 0)
    lag: dict[str, int] = {}
    for gid, _ptype, _state in await admin.list_groups():
        committed = await admin.list_consumer_group_offsets(gid)
        lag[gid] = sum(
            max(0, (ends.get(tp, (om.offset, 0))[0] or 0) - om.offset)
            for tp, om in committed.items()
        )
    now = time.monotonic()
    last = request[SESSION].throughput
    elapsed = now - last["at"] if last else 0.0
    rates = {
        t: max(0.0, (n - last["ends"].get(t, n)) / elapsed) if elapsed > 0 else 0.0
        for t, n in per_topic.items()
    }
    last.update(at=now, ends=per_topic)
    return web.json_response(
        {"time": time.time(), "records_per_sec": rates, "end_offsets": per_topic, "lag": lag}
    )


async def chart_js(request: web.Request) -> web.StreamResponse:
    for path in (CHART_JS, *CHART_JS_FALLBACKS):
        if path.exists():
            return web.FileResponse(path, headers={"Content-Type": "application/javascript"})
    return web.Response(
        status=404,
        text="// Chart.js is not installed (Debian: libjs-chart.js)\n",
        content_type="application/javascript",
    )
