"""The consumer groups pages: the list; a group's members, committed offsets and lag; resetting
its offsets on a topic (earliest, latest, an offset, a time, a duration back or a shift), after
a page that shows each partition's new offset and asks to confirm."""

from __future__ import annotations

import time
from html import escape
from urllib.parse import quote

from aiohttp import web

from gregor.client import TopicPartition, timespec
from gregor.console.guard import why
from gregor.console.html import field, form, link, table
from gregor.console.pages import back, confirm_form, confirmed_plan, respond, session_admin
from gregor.protocol.errors import KafkaError


async def groups(request: web.Request) -> web.Response:
    found = await session_admin(request).list_groups()
    rows = [(link(f"/groups/{quote(g)}", g), t or "-", s or "-") for g, t, s in found]
    return respond(
        request,
        "Consumer groups",
        table(["Group", "Protocol type", "State"], rows, "groups"),
        "/groups",
    )


async def group(request: web.Request) -> web.Response:
    admin = session_admin(request)
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
        rows.append(
            (
                tp.topic,
                tp.partition,
                cur.offset if cur else "-",
                end if end is not None else "-",
                end - cur.offset if cur is not None and end is not None else "-",
                m.member_id if m else "-",
                m.client_host if m else "-",
            )
        )
    members = [
        (
            m.member_id,
            m.client_id,
            m.client_host,
            ", ".join(f"{t}-{p}" for t, p in sorted(m.assignment)),
        )
        for m in (desc.members if desc else [])
    ]
    topics_ = sorted({tp.topic for tp in tps})
    reset = form(
        f"/groups/{quote(gid)}/reset",
        field("topic", "Topic", topics_[0] if topics_ else "", options=topics_ or ("",))
        + field(
            "strategy",
            "Reset to",
            "earliest",
            options=("earliest", "latest", "offset", "datetime", "duration", "shift"),
        )
        + field("value", "Offset / time (YYYY-MM-DDTHH:MM:SS) / duration (PT1H) / shift"),
        "Reset offsets",
        "reset-offsets",
    )
    body = (
        f"<p>State <b id='group-state'>{escape(desc.state if desc else 'Unknown')}</b></p>"
        + "<h2>Members</h2>"
        + table(["Member", "Client id", "Host", "Assignment"], members, "members")
        + "<h2>Offsets and lag</h2>"
        + table(["Topic", "Partition", "Committed", "End", "Lag", "Member", "Host"], rows, "lag")
        + "<h2>Reset offsets (the group must have no members)</h2>"
        + reset
    )
    return respond(request, f"Group {gid}", body, "/groups")


async def reset_group(request: web.Request) -> web.Response:
    """Reset a group's committed offsets on a topic: first the plan (each partition's committed
    and new offset) and a form to confirm it, then exactly that plan."""
    admin = session_admin(request)
    gid = request.match_info["group"]
    base = f"/groups/{quote(gid)}"
    data = await request.post()
    topic_name, strategy, value = (
        str(data.get("topic", "")),
        str(data.get("strategy", "")),
        str(data.get("value", "")),
    )
    try:
        confirmed = confirmed_plan(data)
    except ValueError as e:
        raise back(base, error=f"cannot reset: {e}") from None
    desc = (await admin.describe_groups([gid])).get(gid)
    if desc is not None and desc.members:
        raise back(
            base,
            error=f"cannot reset the offsets of {gid}: the group has {len(desc.members)} active "
            "members; it must be inactive (stop its consumers first)",
        )
    if confirmed is not None:
        try:
            await admin.alter_consumer_group_offsets(
                gid, {TopicPartition(topic_name, p): o for p, o in confirmed.items()}
            )
        except KafkaError as e:
            raise back(base, error=f"cannot reset the offsets of {gid}: {why(e)}") from None
        raise back(base, message=f"Reset {len(confirmed)} offsets of {gid} on {topic_name}.")
    d = (await admin.describe_topics([topic_name])).get(topic_name)
    if d is None or isinstance(d, Exception):
        raise back(base, error=f"topic {topic_name}: {why(d) if d else 'not found'}")
    tps = [TopicPartition(topic_name, p.partition) for p in d.partitions]
    starts = {
        tp: v[0] or 0
        for tp, v in (await admin.list_offsets({tp: "earliest" for tp in tps})).items()
    }
    ends = {
        tp: v[0] or 0 for tp, v in (await admin.list_offsets({tp: "latest" for tp in tps})).items()
    }
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
            plan = {
                tp: (current[tp].offset if tp in current else ends[tp]) + int(value) for tp in tps
            }
        else:
            raise ValueError(f"unknown strategy {strategy!r}")
    except ValueError as e:
        raise back(base, error=f"cannot reset: {e}") from None
    clamped = {tp.partition: max(starts[tp], min(o, ends[tp])) for tp, o in sorted(plan.items())}
    rows = [
        (
            topic_name,
            p,
            current[TopicPartition(topic_name, p)].offset
            if TopicPartition(topic_name, p) in current
            else "-",
            o,
        )
        for p, o in clamped.items()
    ]
    body = (
        f"<p>The committed offsets of group <b>{escape(gid)}</b> on <b>{escape(topic_name)}</b> would become:</p>"
        + table(["Topic", "Partition", "Committed offset", "New offset"], rows, "reset-plan")
        + confirm_form(
            base + "/reset",
            {"topic": topic_name, "strategy": strategy, "value": value},
            clamped,
            "Reset these offsets",
            "confirm-reset",
        )
        + f"<p>{link(base, 'Cancel')}</p>"
    )
    return respond(request, f"Reset the offsets of {gid}?", body, "/groups")
