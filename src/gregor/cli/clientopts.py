"""Options shared by the client commands: where the cluster is, extra client settings, the
topic (as an argument or ``--topic``), and how a result is printed."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable
from typing import Any

import click


def _bootstrap_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--bootstrap-server",
        "-b",
        "bootstrap_server",
        default="localhost:9092",
        show_default=True,
        envvar="GREGOR_BOOTSTRAP_SERVERS",
        help="host:port[,host:port...] of brokers to start from.",
    )(fn)


def client_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = _bootstrap_option(fn)
    fn = click.option(
        "--property",
        "-X",
        "properties",
        multiple=True,
        metavar="KEY=VALUE",
        help="A client configuration (Kafka names, e.g. -X compression.type=lz4); repeatable.",
    )(fn)
    return fn


def console_client_options(role: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``client_options`` for ``produce`` / ``consume``: there, as in kafka-console-producer and
    -consumer, ``--property`` sets how lines are read or printed, and client settings are ``-X``
    or ``--producer-property`` / ``--consumer-property``."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn = _bootstrap_option(fn)
        return click.option(
            "-X",
            f"--{role}-property",
            "properties",
            multiple=True,
            metavar="KEY=VALUE",
            help=f"A {role} client setting (Kafka names, e.g. -X client.id=me); repeatable.",
        )(fn)

    return deco


def topic_param(
    *,
    multiple: bool = False,
    required: bool = True,
    help: str | None = None,  # noqa: A002
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The topic as an argument or as ``--topic`` / ``-t`` (Kafka's tools take the option, kcat
    users type ``-t``, Gregor's commands the argument): the command gets ``topic`` (``topics``, a
    tuple, with ``multiple``). Both forms may be mixed; giving none, when one is required, or
    two where one is expected, is an argument error."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            given = [*kwargs.pop("topic_arguments"), *kwargs.pop("topic_options")]
            if required and not given:
                raise click.UsageError("name a topic: TOPIC or --topic TOPIC")
            if multiple:
                kwargs["topics"] = tuple(given)
            else:
                if len(given) > 1:
                    raise click.UsageError(f"name one topic, not {len(given)}: {', '.join(given)}")
                kwargs["topic"] = given[0] if given else None
            return fn(*args, **kwargs)

        run = click.option(
            "--topic",
            "-t",
            "topic_options",
            multiple=True,
            metavar="TOPIC",
            help=help or "The topic (or give it as the argument TOPIC).",
        )(run)
        return click.argument(
            "topic_arguments",
            metavar="[TOPIC]..." if multiple else "[TOPIC]",
            nargs=-1,
            required=False,
        )(run)

    return deco


def no_such_topic(name: str, known: Iterable[str]) -> str:
    """The one-line error for a topic that does not exist, with the close names if any."""
    close = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"topic {name!r} does not exist{hint}"


def plaintext_bootstrap(broker: Any) -> tuple[str, str]:
    """(listener name, host:port) of a broker's first PLAINTEXT listener, for a companion served
    beside it (the console, the schema registry) to connect through."""
    name, bind_host, bound = next(
        (n, h, p)
        for n, h, p in broker.bound_listeners
        if broker.config.security_protocol(n) == "PLAINTEXT"
    )
    target = "127.0.0.1" if bind_host in ("", "0.0.0.0", "::") else bind_host
    return name, f"{target}:{bound}"


def client_config(
    bootstrap_server: str, properties: tuple[str, ...], **fixed: Any
) -> dict[str, Any]:
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
    return click.option(
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="json: one JSON document for scripts.",
    )(fn)


def done(output: str, text: str, **data: Any) -> None:
    """An action's result: ``text`` as is, or ``data`` (with ``"result": "ok"``) as JSON."""
    if output == "json":
        import json

        click.echo(json.dumps({"result": "ok", **data}))
    else:
        click.echo(text)


def done_in_part(output: str, text: str, errors: dict[str, str], **data: Any) -> None:
    """The result of an action on several things, some of which may have failed: ``text`` (what
    succeeded), or JSON whose ``result`` is ``"ok"`` only when nothing failed (``"error"``
    otherwise, with ``errors``: name -> a sentence that names it). Any failure then ends the
    command: one line, exit 1."""
    if output == "json":
        import json

        click.echo(
            json.dumps(
                {
                    "result": "error" if errors else "ok",
                    **data,
                    **({"errors": errors} if errors else {}),
                }
            )
        )
    elif text:
        click.echo(text)
    if errors:
        fail("; ".join(errors.values()))
