"""``gregor storage`` (kafka-storage): prepare a broker's metadata before its first start.

``format -t CLUSTER_ID [-c server.properties] [-o key=value] [--add-scram ...]`` writes the
file metadata store (``cluster-metadata.json`` in the first log dir) with the cluster id and,
as Kafka's ``kafka-storage format --add-scram`` does, SCRAM credentials, so a cluster whose
listeners all require SCRAM has its first user (an admin in ``super.users``) before anyone can
log in. ``--add-scram`` takes Kafka's syntax, once per credential::

    --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'
    --add-scram 'SCRAM-SHA-512=[name=admin,iterations=8192,salt=<base64>,saltedpassword=<base64>]'

(``password`` or ``saltedpassword`` with ``salt``; 4096 iterations unless given; a value may
be quoted). Like Kafka's tool it refuses a log dir that is already formatted unless
``--ignore-formatted`` (then it leaves it as it is). Only the salted credential is stored
(salt, stored key, server key, iterations); the password is never printed or written.
``random-uuid`` prints a new cluster id.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import uuid

import click

from gregor.broker.config.broker_config import BrokerConfig, ConfigError
from gregor.cluster.file_store import METADATA_FILE, FileMetadataStore
from gregor.security.scram import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
    make_credential,
)


class FormatterError(click.ClickException):
    """Kafka's FormatterException: the arguments cannot be used (exit code 1)."""


def _split_components(text: str) -> list[str]:
    """Split on commas outside double quotes."""
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def parse_add_scram(argument: str) -> tuple[str, ScramCredential]:
    """``MECHANISM=[name=...,password=...]`` -> (user name, credential), as Kafka's ScramParser
    reads it (with its messages)."""
    text = argument.strip()
    mechanism, sep, config = text.partition("=")
    if not sep:
        raise FormatterError(f"Failed to find equals sign in SCRAM argument '{text}'")
    if mechanism not in MECHANISM_IDS:
        raise FormatterError(f"The add-scram mechanism {mechanism} is not supported.")
    if not config.startswith("["):
        raise FormatterError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise FormatterError("Expected configuration string to end with ]")
    fields: dict[str, str] = {}
    for component in _split_components(config[1:-1]):
        key, sep, value = component.partition("=")
        if not sep:
            raise FormatterError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        fields[key] = value
    name = fields.pop("name", None)
    if name is None:
        raise FormatterError("You must supply 'name' to add-scram")
    salt: bytes | None = None
    if "salt" in fields:
        salt_text = fields.pop("salt")
        try:
            salt = base64.b64decode(salt_text, validate=True)
        except (binascii.Error, ValueError):
            raise FormatterError(f"Failed to decode given salt: {salt_text}") from None
    iterations = MIN_ITERATIONS
    if "iterations" in fields:
        count = fields.pop("iterations")
        try:
            iterations = int(count)
        except ValueError:
            raise FormatterError(f"Failed to parse iterations count: {count}") from None
    password, salted = fields.pop("password", None), fields.pop("saltedpassword", None)
    if fields:
        raise FormatterError(f"Unknown SCRAM configurations: {', '.join(sorted(fields))}")
    if iterations < MIN_ITERATIONS:
        raise FormatterError(
            f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram using {mechanism}"
        )
    if iterations > MAX_ITERATIONS:
        raise FormatterError(
            f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram using {mechanism}"
        )
    if password is not None:
        return name, make_credential(mechanism, password, iterations, salt)
    if salted is None:
        raise FormatterError("You must supply one of 'password' or 'saltedpassword' to add-scram")
    if salt is None:
        raise FormatterError("You must supply 'salt' with 'saltedpassword' to add-scram")
    try:
        salted_bytes = base64.b64decode(salted, validate=True)
    except (binascii.Error, ValueError):
        raise FormatterError(f"Failed to decode given saltedPassword: {salted}") from None
    return name, credential_from_salted_password(mechanism, salted_bytes, salt, iterations)


def check_cluster_id(text: str) -> str:
    """Kafka's cluster id form: 16 bytes in URL-safe base64 without padding."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(text) != 22 or len(raw) != 16:
        raise FormatterError(f"Cluster ID string {text} does not appear to be a valid UUID")
    return text


@click.group()
def storage() -> None:
    """Prepare a broker's metadata before its first start (like kafka-storage)."""


@storage.command("random-uuid")
def random_uuid() -> None:
    """Print a new cluster id (for format -t)."""
    click.echo(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))


@storage.command(
    "format",
    epilog="""
\b
Examples:
  gregor storage format -t "$(gregor storage random-uuid)" -c server.properties \\
      --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]'
""",
)
@click.option(
    "--config",
    "-c",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    help="The broker's server.properties.",
)
@click.option(
    "--override",
    "-o",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a broker config key, as gregor serve -o does (repeatable).",
)
@click.option(
    "--cluster-id",
    "-t",
    "cluster_id",
    required=True,
    help="The cluster id (gregor storage random-uuid).",
)
@click.option(
    "--add-scram",
    "-S",
    "scram",
    multiple=True,
    metavar="'MECH=[name=...,password=...]'",
    help="A SCRAM credential to create (repeatable), in Kafka's syntax.",
)
@click.option(
    "--ignore-formatted", "-g", is_flag=True, help="Leave an already formatted log dir as it is."
)
def format_(
    config_file: str | None,
    overrides: tuple[str, ...],
    cluster_id: str,
    scram: tuple[str, ...],
    ignore_formatted: bool,
) -> None:
    """Write the metadata store of a new broker: cluster id and SCRAM credentials."""
    try:
        config = BrokerConfig.load(config_file, overrides)
    except ConfigError as e:
        raise click.UsageError(str(e)) from None
    check_cluster_id(cluster_id)
    configured = config.get("cluster.id")
    if configured and configured != cluster_id:
        raise FormatterError(
            f"cluster.id={configured} in the configuration is not the given cluster id {cluster_id}"
        )
    if str(config["metadata.store"]).strip().lower() != "file":
        raise FormatterError(
            f"metadata.store={config['metadata.store']}: gregor storage format writes the file metadata store only"
        )
    credentials = [parse_add_scram(a) for a in scram]
    directory = config.log_dirs[0]
    path = directory / METADATA_FILE
    if path.exists():
        if ignore_formatted:
            click.echo(f"All of the log directories are already formatted ({path} exists).")
            return
        raise FormatterError(
            f"Log directory {directory} is already formatted. Use --ignore-formatted to ignore this "
            "directory and format the others."
        )

    async def write() -> None:
        directory.mkdir(parents=True, exist_ok=True)
        store = FileMetadataStore(directory, cluster_id)
        await store.start()
        try:
            for name, credential in credentials:  # one change per user and request, as Kafka's
                error = (await store.alter_scram_credentials([], [(name, credential)]))[name]
                if error is not None:
                    raise FormatterError(
                        f"cannot store the {credential.mechanism} credential of {name}: {error}"
                    )
        finally:
            await store.close()

    asyncio.run(write())
    users = sorted({f"{name} ({cred.mechanism})" for name, cred in credentials})
    click.echo(
        f"Formatting {path} with cluster id {cluster_id}"
        + (f" and SCRAM credentials for {', '.join(users)}." if users else ".")
    )
