"""``gregor configs``: describe and alter configs, as ``kafka-configs.sh`` does.

``--entity-type`` is ``topics``, ``brokers``, ``broker-loggers`` or ``groups`` (config
resources: DescribeConfigs and IncrementalAlterConfigs), or ``users``, ``clients`` or ``ips``
(client quotas, and for users their SCRAM credentials). ``--entity-name NAME`` or
``--entity-default`` (brokers: the cluster-wide default; users, clients, ips: the default
entity) names the entity; ``describe`` without one lists every entity of the type that has
configs. ``--add-config 'k1=v1,k2=[a,b]'`` (a list value in brackets) and ``--delete-config
k1,k2`` as kafka-configs takes them. ``describe`` shows the dynamic configs, ``--all`` every
config with its source. ``--output json`` prints one JSON document instead.
"""

from __future__ import annotations

import json
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, fail
from gregor.cli.users import _split_top_level, parse_scram_configs

CONFIG_TYPES = {"topics": 2, "brokers": 4, "broker-loggers": 8, "groups": 32}
QUOTA_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
ENTITY_TYPES = (*CONFIG_TYPES, *QUOTA_TYPES)
_SINGULAR = {
    "topics": "topic",
    "brokers": "broker",
    "broker-loggers": "broker-logger",
    "groups": "group",
}
#: A config's own value is dynamic (set on the resource) when it comes from one of these.
_DYNAMIC = {
    "DYNAMIC_TOPIC_CONFIG",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
    "GROUP_CONFIG",
}

EXAMPLES = """
\b
Examples:
  gregor configs describe --entity-type topics --entity-name events
  gregor configs describe --entity-type brokers --entity-default --all --output json
  gregor configs alter --entity-type topics --entity-name events --add-config retention.ms=3600000,cleanup.policy=[compact,delete]
  gregor configs alter --entity-type clients --entity-name app --add-config producer_byte_rate=1048576
  gregor configs alter --entity-type users --entity-name alice --add-config 'SCRAM-SHA-256=[password=secret]'
"""


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


def _entity_options(fn: Any) -> Any:
    for opt in reversed(
        [
            click.option(
                "--entity-type",
                "entity_type",
                required=True,
                type=click.Choice(ENTITY_TYPES),
                help="What kind of entity.",
            ),
            click.option(
                "--entity-name",
                "entity_name",
                default=None,
                help="The entity (topic, broker id, group, user...).",
            ),
            click.option(
                "--entity-default",
                "entity_default",
                is_flag=True,
                help="The default entity (brokers: the cluster-wide default).",
            ),
            click.option(
                "--output", type=click.Choice(["text", "json"]), default="text", show_default=True
            ),
        ]
    ):
        fn = opt(fn)
    return fn


def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b]`` -> {k1: v1, k2: "a,b"} (kafka-configs' syntax)."""
    out: dict[str, str] = {}
    for item in _split_top_level(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--add-config")
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _resource_name(entity_type: str, name: str | None, default: bool) -> str:
    if name is not None and default:
        raise click.UsageError("give --entity-name or --entity-default, not both")
    if entity_type == "brokers":
        if default:
            return ""
        if name is None or not name.isdigit():
            raise click.UsageError(
                "brokers need --entity-name with a broker id, or --entity-default"
            )
        return name
    if default:
        raise click.UsageError(
            f"--entity-default is for brokers, users, clients and ips, not {entity_type}"
        )
    if name is None:
        raise click.UsageError(f"{entity_type} need --entity-name")
    return name


def _label(entity_type: str, name: str) -> str:
    if entity_type == "brokers" and name == "":
        return "brokers in the cluster"
    return f"{_SINGULAR[entity_type]} {name}"


@click.group(epilog=EXAMPLES)
def configs() -> None:
    """Describe and alter configs of topics, brokers, groups, users and clients (like kafka-configs)."""


@configs.command(epilog=EXAMPLES)
@client_options
@_entity_options
@click.option(
    "--all", "show_all", is_flag=True, help="Every config with its source, not only dynamic ones."
)
def describe(
    bootstrap_server: str,
    properties: tuple[str, ...],
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    output: str,
    show_all: bool,
) -> None:
    """Show an entity's configs (for users/clients/ips: quotas, and users' SCRAM mechanisms)."""
    with _admin(bootstrap_server, properties) as admin:
        if entity_type in QUOTA_TYPES:
            _describe_quotas(admin, entity_type, entity_name, entity_default, output)
            return
        rtype = CONFIG_TYPES[entity_type]
        if entity_name is None and not entity_default:
            names = _all_names(admin, entity_type)
        else:
            names = [_resource_name(entity_type, entity_name, entity_default)]
        found = admin.describe_configs([(rtype, n) for n in names], include_synonyms=True)
    doc: list[dict[str, Any]] = []
    for name in names:
        entries = found.get((rtype, name))
        if isinstance(entries, Exception) or entries is None:
            fail(f"cannot describe {_label(entity_type, name)}: {entries}")
            return
        shown = [e for e in entries.values() if show_all or e.source in _DYNAMIC]
        doc.append(
            {
                "entity_type": entity_type,
                "entity_name": name,
                "configs": [
                    {
                        "name": e.name,
                        "value": e.value,
                        "source": e.source,
                        "sensitive": e.is_sensitive,
                        "read_only": e.read_only,
                        "synonyms": [
                            {"name": n, "value": v, "source": src} for n, v, src in e.synonyms
                        ],
                    }
                    for e in sorted(shown, key=lambda e: e.name)
                ],
            }
        )
    if output == "json":
        click.echo(json.dumps(doc, indent=2))
        return
    for item in doc:
        which = "All" if show_all else ("Default" if item["entity_name"] == "" else "Dynamic")
        label = _label(entity_type, item["entity_name"])
        click.echo(f"{which} configs for {label} are:")
        for c in item["configs"]:
            synonyms = ", ".join(f"{s['source']}:{s['name']}={s['value']}" for s in c["synonyms"])
            click.echo(
                f"  {c['name']}={c['value']} sensitive={str(c['sensitive']).lower()} synonyms={{{synonyms}}}"
            )


def _all_names(admin: Any, entity_type: str) -> list[str]:
    if entity_type == "topics":
        return sorted(admin.list_topics())
    if entity_type in ("brokers", "broker-loggers"):
        return [str(b[0]) for b in admin.describe_cluster().brokers]
    return sorted(g[0] for g in admin.list_groups())


def _describe_quotas(
    admin: Any, entity_type: str, name: str | None, default: bool, output: str
) -> None:
    if name is not None and default:
        raise click.UsageError("give --entity-name or --entity-default, not both")
    etype = QUOTA_TYPES[entity_type]
    components = (
        [(etype, 0, name)]
        if name is not None
        else [(etype, 1, None)]
        if default
        else [(etype, 2, None)]
    )
    quotas = admin.describe_client_quotas(components, strict=True)
    if name is None and not default:  # every entity of the type: the named ones and the default
        quotas.update(admin.describe_client_quotas([(etype, 1, None)], strict=True))
    scram: dict[str, Any] = {}
    if entity_type == "users":
        found = admin.describe_user_scram_credentials([name] if name is not None else None)
        scram = {u: c for u, c in found.items() if not isinstance(c, Exception)}
    entities: dict[str | None, dict[str, Any]] = {}
    for entity, values in quotas.items():
        entities.setdefault(dict(entity)[etype], {}).update(values)
    for user, creds in scram.items():
        for mechanism, iterations in creds:
            entities.setdefault(user, {})[mechanism.kafka_name] = f"iterations={iterations}"
    if output == "json":
        click.echo(
            json.dumps(
                [
                    {
                        "entity_type": entity_type,
                        "entity_name": n,
                        "configs": dict(sorted(v.items())),
                    }
                    for n, v in sorted(
                        entities.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")
                    )
                ],
                indent=2,
            )
        )
        return
    for n, values in sorted(entities.items(), key=lambda kv: (kv[0] is not None, kv[0] or "")):
        label = f"the default {etype}" if n is None else f"{etype} '{n}'"
        listed = ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
        click.echo(f"Configs for {label} are {listed}")


@configs.command(epilog=EXAMPLES)
@client_options
@_entity_options
@click.option("--add-config", "add", default=None, metavar="K=V[,K=[A,B]]", help="Configs to set.")
@click.option("--delete-config", "delete", default=None, metavar="K[,K]", help="Configs to remove.")
def alter(
    bootstrap_server: str,
    properties: tuple[str, ...],
    entity_type: str,
    entity_name: str | None,
    entity_default: bool,
    output: str,
    add: str | None,
    delete: str | None,
) -> None:
    """Set (--add-config) or remove (--delete-config) an entity's configs."""
    if not add and not delete:
        raise click.UsageError("give --add-config and/or --delete-config")
    deletes = [k.strip() for k in (delete or "").split(",") if k.strip()]
    with _admin(bootstrap_server, properties) as admin:
        if entity_type in QUOTA_TYPES:
            label = _alter_quotas(
                admin, entity_type, entity_name, entity_default, add or "", deletes
            )
        else:
            name = _resource_name(entity_type, entity_name, entity_default)
            from gregor.client.admin import OP_DELETE, OP_SET

            changes: list[tuple[str, int, str | None]] = [
                (k, OP_SET, v) for k, v in parse_add_config(add or "").items()
            ]
            changes += [(k, OP_DELETE, None) for k in deletes]
            err = admin.incremental_alter_configs({(CONFIG_TYPES[entity_type], name): changes}).get(
                (CONFIG_TYPES[entity_type], name)
            )
            label = _label(entity_type, name)
            if err is not None:
                fail(f"cannot alter {label}: {err.name}: {err}")
    if output == "json":
        click.echo(json.dumps({"entity_type": entity_type, "entity": label, "result": "ok"}))
    elif label == "brokers in the cluster":
        click.echo("Completed updating default config for brokers in the cluster.")
    else:
        click.echo(f"Completed updating config for {label}.")


def _alter_quotas(
    admin: Any, entity_type: str, name: str | None, default: bool, add: str, deletes: list[str]
) -> str:
    if name is not None and default:
        raise click.UsageError("give --entity-name or --entity-default, not both")
    if name is None and not default:
        raise click.UsageError(f"{entity_type} need --entity-name or --entity-default")
    etype = QUOTA_TYPES[entity_type]
    label = f"the default {etype}" if name is None else f"{etype} '{name}'"
    scram_items = [i for i in _split_top_level(add) if i.strip().upper().startswith("SCRAM-")]
    quota_items = [i for i in _split_top_level(add) if i not in scram_items]
    ops: dict[str, float | None] = {}
    for key, value in parse_add_config(",".join(quota_items)).items():
        try:
            ops[key] = float(value)
        except ValueError:
            raise click.BadParameter(
                f"{key}={value} is not a number", param_hint="--add-config"
            ) from None
    scram_deletes = [k for k in deletes if k.upper().startswith("SCRAM-")]
    ops.update({k: None for k in deletes if k not in scram_deletes})
    if (scram_items or scram_deletes) and (entity_type != "users" or name is None):
        raise click.UsageError("SCRAM credentials are set on a named user only")
    if ops:
        entity = ((etype, name),)
        err = next(iter(admin.alter_client_quotas({entity: ops}).values()), None)
        if err is not None:
            fail(f"cannot alter the quotas of {label}: {err}")
    if scram_items or scram_deletes:
        from gregor.client.acls import ScramMechanism

        assert name is not None
        try:
            ups = [
                (name, ScramMechanism.parse(m), pw, it)
                for m, pw, it in parse_scram_configs(",".join(scram_items))
            ]
            dels = [(name, ScramMechanism.parse(m)) for m in scram_deletes]
        except ValueError as e:
            raise click.BadParameter(str(e)) from None
        for d in dels:  # one change a request (a controller refuses two for one user)
            if (err := admin.alter_user_scram_credentials([], [d]).get(name)) is not None:
                fail(f"cannot delete the {d[1].kafka_name} credential of {label}: {err}")
        for u in ups:
            if (err := admin.alter_user_scram_credentials([u], []).get(name)) is not None:
                fail(f"cannot set the {u[1].kafka_name} credential of {label}: {err}")
    return label
