"""``gregor`` command line entry point.

The commands are registered by name (:data:`COMMANDS`) and imported when one is run, so
``gregor serve`` (every broker process) and ``gregor topics list`` import only their own
command's module and what it needs, not the whole command tree (its clients, the console, the
schema registry, the storage tools). ``gregor --help`` imports them all, for their one-line help.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from gregor import __version__
from gregor.cli.errors import DEBUG_ENV, GregorGroup

#: command name -> "module:attribute" of its click command (imported on first use).
COMMANDS = {
    "acls": "gregor.cli.acls:acls",
    "clients": "gregor.cli.clients:clients",
    "configs": "gregor.cli.configs:configs",
    "console": "gregor.cli.console:console",
    "consume": "gregor.cli.consume:consume",
    "dump-log": "gregor.cli.dump_log:dump_log",
    "features": "gregor.cli.features:features",
    "groups": "gregor.cli.groups:groups",
    "leader-election": "gregor.cli.replicas:leader_election",
    "log-dirs": "gregor.cli.offsets:log_dirs",
    "offsets": "gregor.cli.offsets:offsets",
    "perf": "gregor.cli.perf:perf",
    "pipeline": "gregor.cli.pipeline:pipeline",
    "produce": "gregor.cli.produce:produce",
    "quotas": "gregor.cli.quotas:quotas",
    "reassign": "gregor.cli.replicas:reassign",
    "schema-registry": "gregor.cli.schema_registry:schema_registry",
    "schemas": "gregor.cli.schemas:schemas",
    "share-groups": "gregor.cli.share_groups:share_groups",
    "storage": "gregor.cli.storage:storage",
    "tables": "gregor.cli.tables:tables",
    "tokens": "gregor.cli.tokens:tokens",
    "topics": "gregor.cli.topics:topics",
    "transactions": "gregor.cli.transactions:transactions",
    "users": "gregor.cli.users:users",
}


class LazyGregorGroup(GregorGroup):
    """:class:`GregorGroup` whose commands of :data:`COMMANDS` are imported when looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in COMMANDS:
            return command
        module, _, attribute = COMMANDS[cmd_name].partition(":")
        loaded: Any = getattr(importlib.import_module(module), attribute)
        if not isinstance(loaded, click.Command) or loaded.name != cmd_name:
            raise RuntimeError(f"{COMMANDS[cmd_name]} is not the command {cmd_name!r}")
        self.add_command(loaded)
        return loaded


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@click.group(cls=LazyGregorGroup)
@click.version_option(__version__, prog_name="gregor")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    help=f"On an error, print the traceback instead of one line (anywhere on the line; or {DEBUG_ENV}=1).",
)
def main() -> None:
    """Gregor: a Kafka-compatible event streaming platform.

    An error is one line (Error: ...) with exit status 1, or 2 for a command typed wrong.
    """


@main.command(
    epilog="""
\b
Examples:
  gregor serve                                   # 127.0.0.1:9092, data in ./gregor-data
  gregor serve server.properties -o log.retention.ms=3600000
  gregor serve --console 127.0.0.1:9021 -o metrics.listener=http://127.0.0.1:9308
"""
)
@click.argument("config_file", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--override",
    "-o",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a broker config key, as in server.properties (repeatable).",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="INFO",
    show_default=True,
)
@click.option(
    "--console",
    "console_listen",
    default=None,
    metavar="HOST:PORT",
    help="Also serve the web console there (the console.listener config).",
)
@click.option(
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: log lines as JSON objects instead of logfmt.",
)
def serve(
    config_file: str | None,
    overrides: tuple[str, ...],
    log_level: str,
    console_listen: str | None,
    output: str,
) -> None:
    """Run a broker. With no arguments: 127.0.0.1:9092, data in ./gregor-data."""
    if console_listen:
        overrides = (*overrides, f"console.listener=http://{console_listen}")
    from gregor.broker.common.events import setup_logging
    from gregor.broker.config.broker_config import BrokerConfig, ConfigError

    setup_logging(log_level, "json" if output == "json" else "logfmt")
    try:
        config = BrokerConfig.load(config_file, overrides)
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    import logging

    from gregor.broker.common.events import log_event
    from gregor.broker.main import BrokerStartupError, run

    for key in config.unknown:
        # As Kafka: a key it does not know is reported and otherwise ignored.
        log_event(
            logging.getLogger("gregor.broker"), "config.unknown_key", logging.WARNING, key=key
        )

    companions = []
    served: list[str] = []  # the URL of the registry beside the broker, once it listens
    if config.schema_registry_address is not None:
        from urllib.parse import urlsplit

        from gregor.cli.schema_registry import beside_broker as registry_beside_broker

        def listening(url: str) -> None:
            served.append(url)
            bound = urlsplit(url)  # the port it listens on (the config's may be 0: any)
            if bound.hostname and bound.port:
                config.schema_registry_address = (bound.hostname, bound.port)

        companions.append(
            registry_beside_broker(
                *config.schema_registry_address,
                str(config.values["schema.registry.topic"]),
                listening,
            )
        )
    if config.console_address is not None:
        from gregor.cli.console import beside_broker

        # started after the registry, so that its Schemas pages show it
        companions.append(
            beside_broker(*config.console_address, lambda: served[0] if served else None)
        )
    try:
        code = run(config, companions)
    except BrokerStartupError as e:
        raise click.ClickException(str(e)) from None
    raise SystemExit(code)


if __name__ == "__main__":
    main()
