"""``gregor`` command line entry point."""

from __future__ import annotations

import click

from gregor import __version__
from gregor.cli.errors import DEBUG_ENV, GregorGroup

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@click.group(cls=GregorGroup)
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
    if config.console_address is not None:
        from gregor.cli.console import beside_broker

        companions.append(beside_broker(*config.console_address))
    if config.schema_registry_address is not None:
        from gregor.cli.schema_registry import beside_broker as registry_beside_broker

        companions.append(
            registry_beside_broker(
                *config.schema_registry_address, str(config.values["schema.registry.topic"])
            )
        )
    try:
        code = run(config, companions)
    except BrokerStartupError as e:
        raise click.ClickException(str(e)) from None
    raise SystemExit(code)


from gregor.cli.acls import acls  # noqa: E402
from gregor.cli.clients import clients  # noqa: E402
from gregor.cli.configs import configs  # noqa: E402
from gregor.cli.console import console  # noqa: E402
from gregor.cli.consume import consume  # noqa: E402
from gregor.cli.dump_log import dump_log  # noqa: E402
from gregor.cli.features import features  # noqa: E402
from gregor.cli.groups import groups  # noqa: E402
from gregor.cli.offsets import log_dirs, offsets  # noqa: E402
from gregor.cli.perf import perf  # noqa: E402
from gregor.cli.pipeline import pipeline  # noqa: E402
from gregor.cli.produce import produce  # noqa: E402
from gregor.cli.quotas import quotas  # noqa: E402
from gregor.cli.replicas import leader_election, reassign  # noqa: E402
from gregor.cli.schema_registry import schema_registry  # noqa: E402
from gregor.cli.schemas import schemas  # noqa: E402
from gregor.cli.share_groups import share_groups  # noqa: E402
from gregor.cli.storage import storage  # noqa: E402
from gregor.cli.tables import tables  # noqa: E402
from gregor.cli.tokens import tokens  # noqa: E402
from gregor.cli.topics import topics  # noqa: E402
from gregor.cli.transactions import transactions  # noqa: E402
from gregor.cli.users import users  # noqa: E402

main.add_command(topics)
main.add_command(produce)
main.add_command(consume)
main.add_command(groups)
main.add_command(pipeline)
main.add_command(acls)
main.add_command(users)
main.add_command(quotas)
main.add_command(tokens)
main.add_command(configs)
main.add_command(offsets)
main.add_command(log_dirs)
main.add_command(dump_log)
main.add_command(features)
main.add_command(clients)
main.add_command(share_groups)
main.add_command(perf)
main.add_command(transactions)
main.add_command(leader_election)
main.add_command(reassign)
main.add_command(console)
main.add_command(storage)
main.add_command(schema_registry)
main.add_command(schemas)
main.add_command(tables)


if __name__ == "__main__":
    main()
