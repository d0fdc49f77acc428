"""Options shared by the client commands: where the cluster is and extra client settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def client_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--bootstrap-server",
        "-b",
        "bootstrap_server",
        default="localhost:9092",
        show_default=True,
        envvar="GREGOR_BOOTSTRAP_SERVERS",
        help="host:port[,host:port...] of brokers to start from.",
    )(fn)
    fn = click.option(
        "--property",
        "-X",
        "properties",
        multiple=True,
        metavar="KEY=VALUE",
        help="A client configuration (Kafka names, e.g. -X compression.type=lz4); repeatable.",
    )(fn)
    return fn


def client_config(bootstrap_server: str, properties: tuple[str, ...], **fixed: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"bootstrap.servers": bootstrap_server}
    for prop in properties:
        if "=" not in prop:
            raise click.BadParameter(f"{prop!r} is not KEY=VALUE", param_hint="-X")
        k, v = prop.split("=", 1)
        cfg[k.strip()] = v.strip()
    cfg.update({k: v for k, v in fixed.items() if v is not None})
    return cfg


def parse_kv(items: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint=what)
        k, v = item.split("=", 1)
        out[k] = v
    return out


def fail(message: str) -> None:
    raise click.ClickException(message)


def output_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--output text|json`` (text by default)."""
    return click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
                        help="json: one JSON document for scripts.")(fn)


def done(output: str, text: str, **data: Any) -> None:
    """An action's result: ``text`` as is, or ``data`` (with ``"result": "ok"``) as JSON."""
    if output == "json":
        import json

        click.echo(json.dumps({"result": "ok", **data}))
    else:
        click.echo(text)
