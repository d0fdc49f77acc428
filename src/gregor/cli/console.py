"""``gregor console``: the web console (``gregor.console``) for a cluster, on 127.0.0.1 unless
told otherwise. It logs in with the same ``-X`` client settings as every command (SASL
credentials, TLS), so with security on it sees what that principal may see."""

from __future__ import annotations

import asyncio
import json

import click

from gregor.cli.clientopts import client_config, client_options


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{text!r} is not HOST:PORT", param_hint="--listen")
    return host.strip("[]"), int(port)


@click.command(epilog="""
\b
Examples:
  gregor console -b localhost:9092                       # http://127.0.0.1:9021
  gregor console -b broker:9094 --listen 127.0.0.1:8080 -X security.protocol=SASL_SSL \\
      -X sasl.mechanism=SCRAM-SHA-256 -X sasl.username=admin -X sasl.password=... -X ssl.ca.location=ca.pem
""")
@client_options
@click.option("--listen", default="127.0.0.1:9021", show_default=True, help="HOST:PORT to serve on (port 0: any).")
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help='json: the start line as {"url": ...}.')
def console(bootstrap_server: str, properties: tuple[str, ...], listen: str, output: str) -> None:
    """Serve the web console: overview, topics, messages, groups, live charts, ACLs, users."""
    try:
        from gregor.console.app import run_forever
    except ImportError:
        raise click.ClickException("the console needs the console extra: pip install 'gregor[console]'") from None
    host, port = parse_listen(listen)
    cfg = client_config(bootstrap_server, properties)

    def ready(bound: int) -> None:
        url = f"http://{host}:{bound}/"
        click.echo(json.dumps({"url": url}) if output == "json" else f"Gregor console on {url} (Ctrl-C to stop)")

    try:
        asyncio.run(run_forever(cfg, host, port, ready))
    except KeyboardInterrupt:
        pass
    except OSError as e:
        raise click.ClickException(f"cannot listen on {listen}: {e.strerror}") from None
