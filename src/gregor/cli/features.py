"""``gregor features`` (kafka-features): describe, upgrade, downgrade and disable features.

``describe`` prints each supported feature with its range and finalized level, as Kafka's tool
prints them (``metadata.version`` by release name, ``4.2-IV1``). ``upgrade`` / ``downgrade``
take ``--feature NAME=LEVEL`` (repeatable) and ``--metadata RELEASE`` (``3.9-IV0``, or ``3.9``
for that release's last level); ``disable --feature NAME`` sets a level of 0. A downgrade is a
safe one unless ``--unsafe``; ``--dry-run`` asks the broker to validate only. Each update
prints one line; any refusal exits non-zero.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, fail, output_option
from gregor.protocol.features import (
    METADATA_VERSION,
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    metadata_level,
)
from gregor.protocol.features import level_text as _level_text


def _release_level(text: str) -> int:
    level = metadata_level(text)
    if level is None:
        raise click.BadParameter(
            f"{text!r} is not a known metadata.version (like 3.9-IV0 or 4.0)",
            param_hint="--metadata",
        )
    return level


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


def _feature_levels(items: tuple[str, ...], metadata: str | None, option: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=LEVEL", param_hint=option)
        try:
            out[name] = int(value)
        except ValueError:
            raise click.BadParameter(
                f"{item!r}: the level must be an integer", param_hint=option
            ) from None
    if metadata is not None:
        if METADATA_VERSION in out:
            raise click.UsageError("give metadata.version with --metadata or --feature, not both")
        out[METADATA_VERSION] = _release_level(metadata)
    if not out:
        raise click.UsageError(
            "name at least one feature (--feature NAME=LEVEL or --metadata RELEASE)"
        )
    return out


def _update(
    bootstrap_server: str,
    properties: tuple[str, ...],
    levels: dict[str, int],
    kind: int,
    verb: str,
    dry_run: bool,
    output: str,
) -> None:
    from gregor.protocol.errors import KafkaError

    with _admin(bootstrap_server, properties) as admin:
        try:
            results = admin.update_features(
                {n: (lv, kind) for n, lv in levels.items()}, validate_only=dry_run
            )
        except KafkaError as e:
            fail(f"{e.name}: {e}")
    failed = False
    rows = []
    for name, lv in levels.items():
        err = results.get(name)
        target = _level_text(name, lv)
        if err is None:
            text = (
                f"{name} can be {verb} to {target}."
                if dry_run
                else f"{name} was {verb} to {target}."
            )
            if verb == "disabled":
                text = f"{name} can be disabled." if dry_run else f"{name} was disabled."
        else:
            failed = True
            action = {"upgraded": "upgrade", "downgraded": "downgrade", "disabled": "disable"}[verb]
            text = f"Could not {action} {name} to {target}. {err.name}: {err}"
        rows.append(
            {
                "feature": name,
                "level": lv,
                "error": None if err is None else err.name,
                "message": None if err is None else str(err),
            }
        )
        if output == "text":
            click.echo(text)
    if output == "json":
        click.echo(
            json.dumps(
                {"result": "error" if failed else "ok", "dry_run": dry_run, "features": rows}
            )
        )
    if failed:
        raise SystemExit(1)


_DRY_RUN = click.option("--dry-run", is_flag=True, help="Validate only; change nothing.")
_FEATURE = click.option(
    "--feature",
    "feature_items",
    multiple=True,
    metavar="NAME=LEVEL",
    help="A feature and its new level; repeatable.",
)
_METADATA = click.option(
    "--metadata",
    default=None,
    metavar="RELEASE",
    help="The new metadata.version, like 3.9-IV0 or 4.0.",
)


@click.group()
def features() -> None:
    """Describe and change the cluster's feature levels (like kafka-features).

    \b
    Examples:
      gregor features describe
      gregor features upgrade --feature group.version=1
      gregor features downgrade --metadata 4.0-IV3 --dry-run
      gregor features disable --feature group.version
    """


@features.command(
    epilog="""
\b
Examples:
  gregor features describe
  gregor features describe --output json
"""
)
@client_options
@output_option
def describe(bootstrap_server: str, properties: tuple[str, ...], output: str) -> None:
    """Supported ranges and finalized levels of every feature."""
    from gregor.protocol.errors import KafkaError

    with _admin(bootstrap_server, properties) as admin:
        try:
            meta = admin.describe_features()
        except KafkaError as e:
            fail(f"{e.name}: {e}")
    rows = []
    for name in sorted(set(meta.supported) | set(meta.finalized)):
        lo, hi = meta.supported.get(name, (0, 0))
        level = meta.finalized.get(name, (0, 0))[1]
        rows.append({"feature": name, "supported_min": lo, "supported_max": hi, "finalized": level})
        if output == "text":
            click.echo(
                f"Feature: {name}\tSupportedMinVersion: {_level_text(name, lo)}\t"
                f"SupportedMaxVersion: {_level_text(name, hi)}\tFinalizedVersionLevel: {_level_text(name, level)}\t"
                f"Epoch: {meta.finalized_epoch if meta.finalized_epoch is not None else '-'}"
            )
    if output == "json":
        click.echo(json.dumps({"finalized_epoch": meta.finalized_epoch, "features": rows}))


@features.command(
    epilog="""
\b
Examples:
  gregor features upgrade --feature group.version=1
  gregor features upgrade --metadata 4.2-IV1 --dry-run
"""
)
@client_options
@_FEATURE
@_METADATA
@_DRY_RUN
@output_option
def upgrade(
    bootstrap_server: str,
    properties: tuple[str, ...],
    feature_items: tuple[str, ...],
    metadata: str | None,
    dry_run: bool,
    output: str,
) -> None:
    """Raise feature levels."""
    levels = _feature_levels(feature_items, metadata, "--feature")
    _update(bootstrap_server, properties, levels, UPGRADE, "upgraded", dry_run, output)


@features.command(
    epilog="""
\b
Examples:
  gregor features downgrade --metadata 4.0-IV3
  gregor features downgrade --feature group.version=0 --dry-run
"""
)
@client_options
@_FEATURE
@_METADATA
@click.option("--unsafe", is_flag=True, help="An unsafe (lossy) downgrade instead of a safe one.")
@_DRY_RUN
@output_option
def downgrade(
    bootstrap_server: str,
    properties: tuple[str, ...],
    feature_items: tuple[str, ...],
    metadata: str | None,
    unsafe: bool,
    dry_run: bool,
    output: str,
) -> None:
    """Lower feature levels (safely, unless --unsafe)."""
    levels = _feature_levels(feature_items, metadata, "--feature")
    _update(
        bootstrap_server,
        properties,
        levels,
        UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE,
        "downgraded",
        dry_run,
        output,
    )


@features.command(
    epilog="""
\b
Examples:
  gregor features disable --feature group.version
  gregor features disable --feature group.version --dry-run --output json
"""
)
@client_options
@click.option(
    "--feature",
    "names",
    multiple=True,
    required=True,
    metavar="NAME",
    help="A feature to turn off; repeatable.",
)
@click.option("--unsafe", is_flag=True, help="An unsafe (lossy) downgrade instead of a safe one.")
@_DRY_RUN
@output_option
def disable(
    bootstrap_server: str,
    properties: tuple[str, ...],
    names: tuple[str, ...],
    unsafe: bool,
    dry_run: bool,
    output: str,
) -> None:
    """Turn features off (level 0)."""
    _update(
        bootstrap_server,
        properties,
        dict.fromkeys(names, 0),
        UNSAFE_DOWNGRADE if unsafe else SAFE_DOWNGRADE,
        "disabled",
        dry_run,
        output,
    )
