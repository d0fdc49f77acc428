"""The web console: an aiohttp application that talks to a Kafka-compatible cluster through
Gregor's client only (so it works against any such cluster).

Who may use it and as whom is ``console.settings``; requests pass the guards of
``console.guard`` (allowed Host, same Origin, errors of the cluster as pages) and
``console.auth`` (a session, and its CSRF token on every state change) before any page here
sees them. Each page acts through the session's Kafka client (``pages.session_admin``): the
visitor's own with ``--auth sasl``, so the cluster's ACLs apply to what each visitor sees and does.

This module makes the application (its routes, start and stop) and serves it; the pages live by
family: ``overview`` (with the live charts), ``topics``, ``messages``, ``groups``, ``access``
(ACLs and users), ``tables`` (topics written as Iceberg tables, with their lag) and ``schemas``
(a schema registry's subjects, versions and diffs), on the helpers of ``pages``.

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
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from gregor.client import AIOAdminClient
from gregor.console.access import acls, users
from gregor.console.auth import login, login_form, logout, sessions
from gregor.console.groups import group, groups, reset_group
from gregor.console.guard import allowed_host, broker_errors, same_origin, security_headers
from gregor.console.messages import messages, produce
from gregor.console.overview import chart_js, overview, throughput
from gregor.console.schemas import diff, schemas_nav, subject, subjects, version
from gregor.console.sessions import Clock, run_every
from gregor.console.settings import ConsoleSettings
from gregor.console.state import STATE, ConsoleState
from gregor.console.tables import tables, topic_table
from gregor.console.topics import (
    add_partitions,
    alter_topic_configs,
    create_topic,
    delete_records,
    delete_topic,
    topic,
    topics,
)

STATIC = Path(__file__).parent / "static"
#: How often expired sessions are ended (their clients closed).
REAP_EVERY_S = 15.0
REAPER: web.AppKey[asyncio.Task[None]] = web.AppKey("console_reaper", asyncio.Task)


def make_app(settings: ConsoleSettings, clock: Clock = time.monotonic) -> web.Application:
    app = web.Application(
        middlewares=[schemas_nav, allowed_host, same_origin, sessions, broker_errors]
    )
    app[STATE] = ConsoleState(settings, clock)
    app.on_response_prepare.append(security_headers)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    app.add_routes(
        [
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
            web.get("/tables", tables),
            web.get("/tables/{topic}", topic_table),
            web.get("/schemas", subjects),
            web.get("/schemas/{subject}", subject),
            web.get("/schemas/{subject}/versions/{version}", version),
            web.get("/schemas/{subject}/diff", diff),
            web.get("/static/chart.js", chart_js),
            web.static("/static", STATIC),
        ]
    )
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


async def serve(
    settings: ConsoleSettings, clock: Clock = time.monotonic
) -> tuple[web.AppRunner, int]:
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
