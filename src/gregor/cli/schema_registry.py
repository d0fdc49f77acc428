"""``gregor schema-registry``: a Confluent-compatible schema registry for a cluster, keeping its
schemas in the cluster's ``_schemas`` topic (``gregor.schema_registry``).

:func:`beside_broker` is the registry ``gregor serve`` runs beside its broker
(``schema.registry.listener``), a client of the broker's first PLAINTEXT listener on the
broker's own event loop: the command layer composes the two, so the broker imports no
registry."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import click

from gregor.cli.clientopts import client_config, client_options

if TYPE_CHECKING:
    from gregor.broker.broker import Broker
    from gregor.broker.main import Companion

EXTRA_NEEDED = (
    "the schema registry needs the schema-registry extra: pip install 'gregor[schema-registry]'"
)


def beside_broker(host: str, port: int, topic: str) -> Companion:
    """The schema registry beside a broker (``schema.registry.listener``): started once the
    broker listens, it reads ``topic`` to its end before it answers. The broker's config has
    checked the address (loopback: the registry has no login yet) and the PLAINTEXT listener."""
    try:
        from gregor.schema_registry.server import SchemaRegistryServer
    except ImportError:
        raise click.ClickException(f"schema.registry.listener is set but {EXTRA_NEEDED}") from None

    async def start(broker: Broker) -> Callable[[], Awaitable[None]]:
        import logging

        from gregor.broker.common.events import log_event
        from gregor.broker.main import BrokerStartupError
        from gregor.schema_registry.errors import RegistryError
        from gregor.schema_registry.store import StoreConfigError

        name, bind_host, bound = next(
            (n, h, p)
            for n, h, p in broker.bound_listeners
            if broker.config.security_protocol(n) == "PLAINTEXT"
        )
        target = "127.0.0.1" if bind_host in ("", "0.0.0.0", "::") else bind_host
        shown = f"[{host}]" if ":" in host else host
        server = SchemaRegistryServer(
            {"bootstrap.servers": f"{target}:{bound}"}, f"http://{shown}:{port}", topic=topic
        )
        try:
            await server.start()
        except OSError as e:
            # asyncio names the address before the reason: "... bind on address (...): reason"
            reason = str(e.strerror or e).rsplit("): ", 1)[-1]
            raise BrokerStartupError(
                f"schema.registry.listener: cannot listen on {shown}:{port}: {reason}"
            ) from None
        except StoreConfigError as e:
            raise BrokerStartupError(f"schema.registry.listener: {e}") from None
        except RegistryError as e:
            raise BrokerStartupError(
                f"schema.registry.listener: the registry could not read {topic}: {e.message}"
            ) from None
        log_event(
            logging.getLogger("gregor.broker"),
            "schema_registry.started",
            url=server.url,
            topic=topic,
            listener=name,
        )
        return server.stop

    return start


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command(
    "schema-registry",
    epilog="""
\b
Examples:
  gregor schema-registry -b localhost:9092                   # http://127.0.0.1:8081
  gregor schema-registry -b broker:9092 --topic _schemas_dev --listener http://0.0.0.0:8081 \\
      --insecure-no-auth     # beyond loopback: anyone who reaches it may change schemas

\b
Clients use it as Confluent's: schema.registry.url=http://127.0.0.1:8081. One registry
writes to a topic at a time: run one per --topic (a writer election comes later). There
is no authentication yet (it comes with the broker-served registry): a listener beyond
loopback needs --insecure-no-auth.
""",
)
@client_options
@click.option(
    "--listener",
    default="http://127.0.0.1:8081",
    show_default=True,
    metavar="http://HOST:PORT",
    help="Where to serve the REST API (port 0: any).",
)
@click.option(
    "--topic", default="_schemas", show_default=True, help="The topic that stores the schemas."
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=-1, max=32767),
    default=-1,
    show_default=True,
    help="The topic's replication factor when the registry creates it (-1: the broker's default).",
)
@click.option(
    "--insecure-no-auth",
    is_flag=True,
    help="Serve beyond loopback although the registry has no authentication yet.",
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help='json: the start line as {"url": ...}.',
)
def schema_registry(
    bootstrap_server: str,
    properties: tuple[str, ...],
    listener: str,
    topic: str,
    replication_factor: int,
    insecure_no_auth: bool,
    output: str,
) -> None:
    """Serve a schema registry (Confluent's REST API) backed by the cluster."""
    try:
        from gregor.schema_registry.errors import RegistryError
        from gregor.schema_registry.server import ListenerError, parse_listener, run_forever
        from gregor.schema_registry.store import StoreConfigError
    except ImportError:
        raise click.ClickException(EXTRA_NEEDED) from None
    from gregor.broker.common.events import setup_logging

    try:
        host, _ = parse_listener(listener)
    except ListenerError as e:
        raise click.BadParameter(str(e), param_hint="--listener") from None
    if not _loopback(host) and not insecure_no_auth:
        raise click.UsageError(
            f"{listener} is beyond loopback and the schema registry has no authentication yet: anyone who "
            "reaches it could change or delete schemas (pass --insecure-no-auth to serve it anyway)"
        )
    if not topic or len(topic) > 249:
        raise click.BadParameter("a topic name of 1 to 249 characters", param_hint="--topic")
    cfg = client_config(bootstrap_server, properties)
    setup_logging("INFO")

    def ready(url: str) -> None:
        click.echo(
            json.dumps({"url": url})
            if output == "json"
            else f"Gregor schema registry on {url} (Ctrl-C to stop)"
        )

    try:
        asyncio.run(
            run_forever(cfg, listener, ready, topic=topic, replication_factor=replication_factor)
        )
    except KeyboardInterrupt:
        pass
    except StoreConfigError as e:
        raise click.ClickException(str(e)) from None
    except RegistryError as e:  # the store could not be read to its end at start
        raise click.ClickException(f"the schema registry could not start: {e.message}") from None
    except OSError as e:
        raise click.ClickException(f"cannot listen on {listener}: {e.strerror or e}") from None
