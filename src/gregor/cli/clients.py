"""``gregor clients``: client metrics subscriptions (kafka-client-metrics) and the telemetry
clients pushed (KIP-714).

``list`` names the subscriptions; ``describe [--name N]`` prints their settings; ``alter
--name N`` sets ``--metrics`` (prefixes, ``*`` for all), ``--interval`` (ms) and ``--match``
(``selector=regex`` pairs), creating the subscription if needed; ``delete --name N`` removes
it. ``metrics --metrics-url URL`` reads the last values each client instance pushed from a
broker's metrics endpoint (``metrics.listener``): one line per instance and data point.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import click

from gregor.cli.clientopts import client_config, client_options, done, fail, output_option

CLIENT_METRICS = 16
CONFIG_NAMES = ("metrics", "interval.ms", "match")


def _admin(bootstrap_server: str, properties: tuple[str, ...]) -> Any:
    from gregor.client import AdminClient

    return AdminClient(client_config(bootstrap_server, properties))


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    from gregor.protocol.errors import KafkaError

    try:
        return fn(*args, **kwargs)
    except KafkaError as e:
        fail(f"{e.name}: {e}")


@click.group()
def clients() -> None:
    """Client metrics subscriptions and pushed client telemetry (like kafka-client-metrics).

    \b
    Examples:
      gregor clients alter --name producers --metrics org.apache.kafka.producer. --interval 60000 \\
          --match client_software_name=librdkafka
      gregor clients list
      gregor clients describe --name producers
      gregor clients metrics --metrics-url http://127.0.0.1:9308/metrics
      gregor clients delete --name producers
    """


@clients.command(
    "list",
    epilog="""
\b
Examples:
  gregor clients list
  gregor clients list --output json
""",
)
@client_options
@output_option
def list_(bootstrap_server: str, properties: tuple[str, ...], output: str) -> None:
    """Names of the client metrics subscriptions."""
    with _admin(bootstrap_server, properties) as admin:
        names = _call(admin.list_client_metrics_resources)
    if output == "json":
        click.echo(json.dumps(names))
    else:
        for n in names:
            click.echo(n)


@clients.command(
    epilog="""
\b
Examples:
  gregor clients describe
  gregor clients describe --name producers --output json
"""
)
@client_options
@click.option("--name", default=None, help="One subscription (default: every one).")
@output_option
def describe(
    bootstrap_server: str, properties: tuple[str, ...], name: str | None, output: str
) -> None:
    """Settings of client metrics subscriptions."""
    with _admin(bootstrap_server, properties) as admin:
        names = [name] if name is not None else _call(admin.list_client_metrics_resources)
        found = _call(admin.describe_configs, [(CLIENT_METRICS, n) for n in names]) if names else {}
    docs = []
    for n in names:
        entries = found.get((CLIENT_METRICS, n))
        if entries is None or isinstance(entries, Exception):
            fail(f"{getattr(entries, 'name', 'NOT_FOUND')}: {entries}")
            return
        values = {k: entries[k].value if k in entries else "" for k in CONFIG_NAMES}
        docs.append({"name": n, **values})
        if output == "text":
            click.echo(f"Client metrics configs for {n} are:")
            for k in CONFIG_NAMES:
                click.echo(f"  {k}={values[k]}")
    if output == "json":
        click.echo(json.dumps(docs))


@clients.command(
    epilog="""
\b
Examples:
  gregor clients alter --name all --metrics '*' --interval 1000
  gregor clients alter --name rdkafka --metrics org.apache.kafka.producer.,org.apache.kafka.consumer. \\
      --match 'client_software_name=librdkafka,client_id=billing-.*'
"""
)
@client_options
@click.option("--name", required=True, help="The subscription to create or change.")
@click.option(
    "--metrics", default=None, metavar="P[,P]", help="Metric name prefixes; * for all; '' for none."
)
@click.option(
    "--interval", "interval_ms", type=int, default=None, help="Push interval in ms (100-3600000)."
)
@click.option(
    "--match",
    "match",
    default=None,
    metavar="SEL=RE[,SEL=RE]",
    help="Client selectors (client_id, client_instance_id, client_software_name, "
    "client_software_version, client_source_address, client_source_port) and regexes.",
)
@output_option
def alter(
    bootstrap_server: str,
    properties: tuple[str, ...],
    name: str,
    metrics: str | None,
    interval_ms: int | None,
    match: str | None,
    output: str,
) -> None:
    """Create or change a subscription."""
    from gregor.client.admin import OP_SET

    sets = [
        (k, v)
        for k, v in (("metrics", metrics), ("interval.ms", interval_ms), ("match", match))
        if v is not None
    ]
    if not sets:
        raise click.UsageError("give at least one of --metrics, --interval, --match")
    with _admin(bootstrap_server, properties) as admin:
        result = _call(
            admin.incremental_alter_configs,
            {(CLIENT_METRICS, name): [(k, OP_SET, str(v)) for k, v in sets]},
        )
    err = result.get((CLIENT_METRICS, name))
    if err is not None:
        fail(f"{err.name}: {err}")
    done(output, f"Completed updating config for client-metrics {name}.", name=name)


@clients.command(
    epilog="""
\b
Examples:
  gregor clients delete --name producers
"""
)
@client_options
@click.option("--name", required=True, help="The subscription to remove.")
@output_option
def delete(bootstrap_server: str, properties: tuple[str, ...], name: str, output: str) -> None:
    """Remove a subscription."""
    from gregor.client.admin import OP_DELETE

    with _admin(bootstrap_server, properties) as admin:
        if name not in _call(admin.list_client_metrics_resources):
            fail(f"no client metrics subscription named {name!r}")
        result = _call(
            admin.incremental_alter_configs,
            {(CLIENT_METRICS, name): [(k, OP_DELETE, None) for k in CONFIG_NAMES]},
        )
    err = result.get((CLIENT_METRICS, name))
    if err is not None:
        fail(f"{err.name}: {err}")
    done(output, f"Completed deleting client-metrics {name}.", name=name)


@clients.command(
    epilog="""
\b
Examples:
  gregor clients metrics --metrics-url http://127.0.0.1:9308/metrics
  gregor clients metrics --metrics-url http://127.0.0.1:9308/metrics --client-id billing --output json
"""
)
@click.option(
    "--metrics-url", required=True, help="A broker's metrics endpoint (metrics.listener)."
)
@click.option("--client-id", default=None, help="Only instances with this client id.")
@output_option
def metrics(metrics_url: str, client_id: str | None, output: str) -> None:
    """The values client instances last pushed to that broker (KIP-714 telemetry)."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(metrics_url, timeout=30) as resp:  # noqa: S310 - an operator's URL
            text = resp.read().decode()
    except (urllib.error.URLError, OSError, ValueError) as e:
        fail(f"cannot read {metrics_url}: {e}")
    rows = []
    for family in text_string_to_metric_families(text):
        if family.name != "gregor_client_telemetry":
            continue
        for s in family.samples:
            if client_id is not None and s.labels.get("client_id") != client_id:
                continue
            rows.append(
                {
                    **{
                        k: s.labels.get(k, "")
                        for k in (
                            "client_instance_id",
                            "client_id",
                            "client_software_name",
                            "client_software_version",
                            "metric",
                            "attributes",
                        )
                    },
                    "value": s.value,
                }
            )
    rows.sort(key=lambda r: (r["client_instance_id"], r["metric"], r["attributes"]))
    if output == "json":
        click.echo(json.dumps(rows))
        return
    for r in rows:
        software = f"{r['client_software_name']} {r['client_software_version']}".strip()
        attrs = f"{{{r['attributes']}}}" if r["attributes"] else ""
        click.echo(
            f"{r['client_instance_id']} {r['client_id']} ({software}) {r['metric']}{attrs} = {r['value']:g}"
        )
