"""The topics pages: the list (with sizes from the log dirs) and a new topic's form; a topic's
partitions, offsets and configs; changing its configs and partition count; deleting it, or its
records before an offset (each after a page that shows what would go and asks to confirm)."""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from aiohttp import web

from gregor.client import TopicPartition
from gregor.console.guard import why
from gregor.console.html import field, form, link, table
from gregor.console.pages import (
    back,
    confirm_form,
    confirmed_plan,
    kv_lines,
    respond,
    session_admin,
)
from gregor.protocol.errors import KafkaError


async def topics(request: web.Request) -> web.Response:
    admin = session_admin(request)
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
        (
            link(f"/topics/{quote(name)}", name),
            len(t.partitions),
            len(t.partitions[0].replicas) if t.partitions else 0,
            sum(1 for p in t.partitions if len(p.isr) < len(p.replicas)),
            _bytes(sizes.get(name)),
        )
        for name, t in sorted(described.items())
    ]
    create = form(
        "/topics",
        field("name", "Name")
        + field("partitions", "Partitions", "1", "number")
        + field("replication_factor", "Replication factor", "-1", "number")
        + field("configs", "Configs (k=v per line)", "", "textarea"),
        "Create topic",
        "create-topic",
    )
    body = (
        table(["Topic", "Partitions", "Replication", "Under-replicated", "Size"], rows, "topics")
        + "<h2>New topic</h2>"
        + create
    )
    return respond(request, "Topics", body, "/topics")


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


async def create_topic(request: web.Request) -> web.Response:
    from gregor.client import NewTopic

    data = await request.post()
    name = str(data.get("name", "")).strip()
    try:
        configs = kv_lines(str(data.get("configs", "")))
        partitions, rf = (
            int(str(data.get("partitions", "-1"))),
            int(str(data.get("replication_factor", "-1"))),
        )
    except ValueError as e:
        raise back("/topics", error=f"cannot create {name}: {e}") from None
    err = (
        await session_admin(request).create_topics([NewTopic(name, partitions, rf, configs)])
    ).get(name)
    if err is not None:
        raise back("/topics", error=f"cannot create {name}: {why(err)}")
    raise back(f"/topics/{quote(name)}", message=f"Created topic {name}.")


async def topic(request: web.Request) -> web.Response:
    admin = session_admin(request)
    name = request.match_info["name"]
    d = (await admin.describe_topics([name])).get(name)
    if d is None or isinstance(d, Exception):
        raise back("/topics", error=f"topic {name}: {why(d) if d else 'not found'}")
    tps = [TopicPartition(name, p.partition) for p in d.partitions]
    starts = await admin.list_offsets({tp: "earliest" for tp in tps})
    ends = await admin.list_offsets({tp: "latest" for tp in tps})
    rows = [
        (
            p.partition,
            p.leader,
            ",".join(map(str, p.replicas)),
            ",".join(map(str, p.isr)),
            starts[TopicPartition(name, p.partition)][0],
            ends[TopicPartition(name, p.partition)][0],
            link(f"/topics/{quote(name)}/messages?partition={p.partition}&from=earliest", "browse"),
        )
        for p in d.partitions
    ]
    entries = (await admin.describe_configs([("topic", name)])).get((2, name))
    configs = (
        []
        if not isinstance(entries, dict)
        else sorted((e.name, e.value, e.source) for e in entries.values())
    )
    overrides = "\n".join(f"{n}={v}" for n, v, src in configs if src == "DYNAMIC_TOPIC_CONFIG")
    base = f"/topics/{quote(name)}"
    body = (
        f"<p>Topic id {escape(str(d.topic_id))} · {len(d.partitions)} partitions · "
        f"{link(base + '/messages?from=tail', 'browse messages')}</p>"
        + table(
            ["Partition", "Leader", "Replicas", "ISR", "Start offset", "End offset", ""],
            rows,
            "partitions",
        )
        + "<h2>Produce a message</h2>"
        + form(
            base + "/produce",
            field("key", "Key")
            + field("value", "Value", "", "textarea")
            + field("headers", "Headers (k=v per line)", "", "textarea")
            + field("partition", "Partition (empty: the partitioner's)"),
            "Produce",
            "produce",
        )
        + "<h2>Configs</h2>"
        + table(
            ["Name", "Value", "Source"],
            [(n, v if v is not None else "", s) for n, v, s in configs],
            "configs",
        )
        + form(
            base + "/configs",
            field("configs", "Overrides (k=v per line; the whole set)", overrides, "textarea"),
            "Save configs",
            "edit-configs",
        )
        + "<h2>Partitions</h2>"
        + form(
            base + "/partitions",
            field("count", "New partition count", str(len(d.partitions) + 1), "number"),
            "Add partitions",
            "add-partitions",
        )
        + "<h2>Danger</h2>"
        + form(
            base + "/delete-records",
            field(
                "partition",
                "Partition",
                "all",
                options=("all", *(str(p.partition) for p in d.partitions)),
            )
            + field("offset", "Delete records before offset (end: all of them)", "end"),
            "Delete records…",
            "delete-records",
        )
        + form(base + "/delete", "", "Delete topic…", "delete-topic")
    )
    return respond(request, f"Topic {name}", body, "/topics")


async def alter_topic_configs(request: web.Request) -> web.Response:
    from gregor.client.admin import OP_DELETE, OP_SET

    admin = session_admin(request)
    name = request.match_info["name"]
    base = f"/topics/{quote(name)}"
    try:
        wanted = kv_lines(str((await request.post()).get("configs", "")))
    except ValueError as e:
        raise back(base, error=str(e)) from None
    entries = (await admin.describe_configs([("topic", name)])).get((2, name))
    current = (
        {e.name for e in entries.values() if e.source == "DYNAMIC_TOPIC_CONFIG"}
        if isinstance(entries, dict)
        else set()
    )
    changes = [(k, OP_SET, v) for k, v in wanted.items()] + [
        (k, OP_DELETE, None) for k in current - set(wanted)
    ]
    err = (await admin.incremental_alter_configs({("topic", name): changes})).get((2, name))
    if err is not None:
        raise back(base, error=f"cannot change the configs of {name}: {why(err)}")
    raise back(base, message=f"Updated the configs of {name}.")


async def add_partitions(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    base = f"/topics/{quote(name)}"
    try:
        count = int(str((await request.post()).get("count", "")))
    except ValueError:
        raise back(base, error="the partition count must be a number") from None
    err = (await session_admin(request).create_partitions({name: count})).get(name)
    if err is not None:
        raise back(base, error=f"cannot add partitions to {name}: {why(err)}")
    raise back(base, message=f"{name} now has {count} partitions.")


async def delete_topic(request: web.Request) -> web.Response:
    """First a page that asks for the topic's name; deleted when the name typed matches."""
    name = request.match_info["name"]
    typed = (await request.post()).get("confirm")
    if typed != name:
        body = (
            f"<p>Deleting <b>{escape(name)}</b> deletes all its partitions and records, for every "
            "client, and cannot be undone.</p>"
            + form(
                f"/topics/{quote(name)}/delete",
                field("confirm", "Type the topic's name to confirm"),
                f"Delete topic {name}",
                "confirm-delete-topic",
            )
            + f"<p>{link('/topics/' + quote(name), 'Cancel')}</p>"
        )
        error = None if typed is None else "The name typed is not the topic's: nothing was deleted."
        return respond(request, f"Delete topic {name}?", body, "/topics", error=error)
    err = (await session_admin(request).delete_topics([name])).get(name)
    if err is not None:
        raise back(f"/topics/{quote(name)}", error=f"cannot delete {name}: {why(err)}")
    raise back("/topics", message=f"Deleted topic {name}.")


async def delete_records(request: web.Request) -> web.Response:
    """Delete the records of a partition (or all) before an offset: first the plan (each
    partition's start, end and new start) and a form to confirm it, then exactly that plan."""
    admin = session_admin(request)
    name = request.match_info["name"]
    base = f"/topics/{quote(name)}"
    data = await request.post()
    which, before = (
        str(data.get("partition", "all")).strip(),
        str(data.get("offset", "end")).strip().lower(),
    )
    try:
        confirmed = confirmed_plan(data)
        only = None if which == "all" else int(which)
        offset = None if before == "end" else int(before)
        if offset is not None and offset < 0:
            raise ValueError("the offset must be 0 or more, or end")
    except ValueError as e:
        raise back(base, error=f"cannot delete records: {e}") from None
    if confirmed is not None:
        result = await admin.delete_records(
            {TopicPartition(name, p): o for p, o in confirmed.items()}
        )
        failed = [
            f"{tp.partition}: {why(r)}"
            for tp, r in sorted(result.items())
            if isinstance(r, Exception)
        ]
        if failed:
            raise back(base, error=f"cannot delete records of {name}: {'; '.join(failed)}")
        summary = ", ".join(
            f"partition {tp.partition} now starts at offset {r}" for tp, r in sorted(result.items())
        )
        raise back(base, message=f"Deleted records of {name}: {summary}.")
    d = (await admin.describe_topics([name])).get(name)
    if d is None or isinstance(d, Exception):
        raise back("/topics", error=f"topic {name}: {why(d) if d else 'not found'}")
    tps = [
        TopicPartition(name, p.partition)
        for p in d.partitions
        if only is None or p.partition == only
    ]
    if not tps:
        raise back(base, error=f"cannot delete records: {name} has no partition {which}")
    starts = {
        tp: v[0] or 0
        for tp, v in (await admin.list_offsets({tp: "earliest" for tp in tps})).items()
    }
    ends = {
        tp: v[0] or 0 for tp, v in (await admin.list_offsets({tp: "latest" for tp in tps})).items()
    }
    beyond = [tp.partition for tp in tps if offset is not None and offset > ends[tp]]
    if beyond:
        raise back(
            base,
            error=f"cannot delete records: offset {offset} is beyond the end of partition "
            f"{', '.join(map(str, beyond))}",
        )
    plan = {
        tp.partition: max(starts[tp], ends[tp] if offset is None else offset) for tp in sorted(tps)
    }
    rows = [
        (
            p,
            starts[TopicPartition(name, p)],
            ends[TopicPartition(name, p)],
            new,
            new - starts[TopicPartition(name, p)],
        )
        for p, new in plan.items()
    ]
    body = (
        f"<p>These records of <b>{escape(name)}</b> would be deleted, for every client; this cannot be undone.</p>"
        + table(
            ["Partition", "Start offset", "End offset", "New start offset", "Records deleted"],
            rows,
            "delete-records-plan",
        )
        + confirm_form(
            base + "/delete-records",
            {"partition": which, "offset": before},
            plan,
            "Delete these records",
            "confirm-delete-records",
        )
        + f"<p>{link(base, 'Cancel')}</p>"
    )
    return respond(request, f"Delete records of {name}?", body, "/topics")
