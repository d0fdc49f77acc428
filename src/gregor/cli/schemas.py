"""``gregor schemas``: a schema registry's subjects, versions, compatibility, config and mode,
through Confluent's REST API (Gregor's registry or any compatible one).

Every verb takes ``--registry URL`` (``$GREGOR_SCHEMA_REGISTRY_URL``, default
``http://127.0.0.1:8081``) and ``--output text|json``; ``--user NAME`` sends HTTP basic auth
with the password from ``$GREGOR_SCHEMA_REGISTRY_PASSWORD`` or a prompt (never an argument, which
``ps`` would show). The registry's own error (its ``error_code`` and ``message``) ends a command in
one line, exit 1.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

import click

from gregor.cli.clientopts import done, fail, output_option

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
MODES = ("READWRITE", "READONLY", "IMPORT")


class RegistryClient:
    """The registry's REST API for a command: the registry's own error, or an unreachable
    registry, ends the command in one line."""

    def __init__(self, url: str, user: str | None, password: str | None) -> None:
        from gregor.client.schema_registry import RegistryClient as Client

        self.url = url.rstrip("/")
        self._client = Client(url, user, password)

    def call(
        self, method: str, path: str, body: Any = None, **query: str | int | bool | None
    ) -> Any:
        from gregor.client.schema_registry import RegistryHTTPError, RegistryUnreachable

        try:
            return self._client.call(method, path, body, **query)
        except RegistryHTTPError as e:
            if e.status == 401 and e.code == 401:
                fail("the schema registry needs a login: --user NAME (401)")
            fail(str(e))
        except RegistryUnreachable as e:
            fail(str(e))


def registry_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option(
        "--registry",
        "-r",
        "registry_url",
        default="http://127.0.0.1:8081",
        show_default=True,
        envvar="GREGOR_SCHEMA_REGISTRY_URL",
        metavar="URL",
        help="The schema registry's URL ($GREGOR_SCHEMA_REGISTRY_URL).",
    )(fn)
    fn = click.option(
        "--user",
        default=None,
        metavar="NAME",
        help="Log in with HTTP basic auth; the password from $GREGOR_SCHEMA_REGISTRY_PASSWORD "
        "or a prompt.",
    )(fn)
    return output_option(fn)


def _client(registry_url: str, user: str | None) -> RegistryClient:
    parts = urllib.parse.urlsplit(registry_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise click.BadParameter(
            f"{registry_url!r} is not an http:// or https:// URL", param_hint="--registry"
        )
    password = None
    if user is not None:
        password = os.environ.get("GREGOR_SCHEMA_REGISTRY_PASSWORD")
        if password is None:
            password = click.prompt(f"Password for {user}", hide_input=True, err=True)
    return RegistryClient(registry_url, user, password)


def _read_schema(source: str) -> str:
    if source == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            fail(f"cannot read {source}: {e.strerror or e}")
    if not text.strip():
        fail(f"{'standard input' if source == '-' else source} holds no schema")
    return text


def _schema_type(source: str, given: str | None) -> str:
    if given is not None:
        return given.upper()
    # A .proto file is Protobuf; anything else is Avro unless --type says JSON (an Avro schema is
    # JSON text too, so the content cannot tell them apart reliably).
    return "PROTOBUF" if source.endswith(".proto") else "AVRO"


def _references(refs: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for ref in refs:
        name, sep, rest = ref.partition("=")
        subject, sep2, version = rest.rpartition(":")
        if not sep or not sep2 or not name or not subject or not version.isdigit():
            raise click.BadParameter(
                f"{ref!r} is not NAME=SUBJECT:VERSION", param_hint="--reference"
            )
        out.append({"name": name, "subject": subject, "version": int(version)})
    return out


def _version(value: str) -> str:
    if value != "latest" and not (value.lstrip("-").isdigit()):
        raise click.BadParameter(
            f"{value!r} is a version number or 'latest'", param_hint="--version"
        )
    return value


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")


@click.group(
    "schemas",
    epilog="""
\b
Examples:
  gregor schemas register orders-value orders.avsc
  gregor schemas register orders-value order.proto --type protobuf \\
      --reference common.proto=common-value:1
  gregor schemas list --prefix orders
  gregor schemas describe orders-value --version 2 --output json
  gregor schemas compatibility orders-value orders-v3.avsc --verbose
  gregor schemas config orders-value --set FULL_TRANSITIVE
  gregor schemas mode --set READONLY
  gregor schemas delete orders-value --version 1 --permanent
""",
)
def schemas() -> None:
    """A schema registry's subjects and schemas (Confluent's REST API)."""


@schemas.command("register")
@click.argument("subject")
@click.argument("source", metavar="FILE")
@click.option("--type", "schema_type", type=click.Choice(SCHEMA_TYPES, case_sensitive=False))
@click.option(
    "--reference",
    "references",
    multiple=True,
    metavar="NAME=SUBJECT:VERSION",
    help="A schema this one references (an import or named type); repeatable.",
)
@click.option("--normalize", is_flag=True, help="Register the schema's normalized form.")
@registry_options
def register(
    subject: str,
    source: str,
    schema_type: str | None,
    references: tuple[str, ...],
    normalize: bool,
    registry_url: str,
    user: str | None,
    output: str,
) -> None:
    """Register FILE's schema (- reads standard input) under SUBJECT: prints its id (an existing
    identical schema keeps its id)."""
    client = _client(registry_url, user)
    body: dict[str, Any] = {"schema": _read_schema(source)}
    kind = _schema_type(source, schema_type)
    if kind != "AVRO":
        body["schemaType"] = kind
    if references:
        body["references"] = _references(references)
    answer = client.call("POST", f"/subjects/{_quote(subject)}/versions", body, normalize=normalize)
    sid = answer.get("id") if isinstance(answer, dict) else None
    done(output, f"Registered {subject}: schema id {sid}", subject=subject, id=sid)


@schemas.command("list")
@click.option("--deleted", is_flag=True, help="Include soft-deleted subjects.")
@click.option("--prefix", default=None, help="Only subjects that start with this.")
@registry_options
def list_subjects(
    deleted: bool, prefix: str | None, registry_url: str, user: str | None, output: str
) -> None:
    """The registry's subjects."""
    client = _client(registry_url, user)
    subjects = client.call("GET", "/subjects", deleted=deleted, subjectPrefix=prefix) or []
    if output == "json":
        click.echo(json.dumps({"subjects": subjects}))
    else:
        for s in subjects:
            click.echo(s)


@schemas.command("describe")
@click.argument("subject")
@click.option(
    "--version", "version", default="latest", show_default=True, help="A version or 'latest'."
)
@registry_options
def describe(subject: str, version: str, registry_url: str, user: str | None, output: str) -> None:
    """SUBJECT's versions and the schema at one of them."""
    version = _version(version)
    client = _client(registry_url, user)
    versions = client.call("GET", f"/subjects/{_quote(subject)}/versions")
    got = client.call("GET", f"/subjects/{_quote(subject)}/versions/{version}")
    if output == "json":
        click.echo(json.dumps({"subject": subject, "versions": versions, **got}))
        return
    click.echo(f"Subject: {subject}")
    click.echo(f"Versions: {', '.join(str(v) for v in versions)}")
    click.echo(
        f"Version: {got.get('version')}  Id: {got.get('id')}  Type: {got.get('schemaType', 'AVRO')}"
    )
    for ref in got.get("references") or []:
        click.echo(f"Reference: {ref.get('name')} = {ref.get('subject')}:{ref.get('version')}")
    schema = got.get("schema", "")
    try:
        schema = json.dumps(json.loads(schema), indent=2)
    except ValueError:
        pass  # Protobuf text is shown as it is
    click.echo(schema)


@schemas.command("compatibility")
@click.argument("subject")
@click.argument("source", metavar="FILE")
@click.option("--type", "schema_type", type=click.Choice(SCHEMA_TYPES, case_sensitive=False))
@click.option(
    "--reference", "references", multiple=True, metavar="NAME=SUBJECT:VERSION", help="Repeatable."
)
@click.option(
    "--version",
    "version",
    default=None,
    help="Check against this version only (default: every version the subject's level names).",
)
@click.option("--verbose", is_flag=True, help="Say why the schema is incompatible.")
@registry_options
def compatibility(
    subject: str,
    source: str,
    schema_type: str | None,
    references: tuple[str, ...],
    version: str | None,
    verbose: bool,
    registry_url: str,
    user: str | None,
    output: str,
) -> None:
    """Whether FILE's schema could be registered under SUBJECT; exit 1 when it could not."""
    client = _client(registry_url, user)
    body: dict[str, Any] = {"schema": _read_schema(source)}
    kind = _schema_type(source, schema_type)
    if kind != "AVRO":
        body["schemaType"] = kind
    if references:
        body["references"] = _references(references)
    path = f"/compatibility/subjects/{_quote(subject)}/versions"
    if version is not None:
        path += f"/{_version(version)}"
    answer = client.call("POST", path, body, verbose=verbose)
    ok = bool(answer.get("is_compatible")) if isinstance(answer, dict) else False
    messages = list(answer.get("messages") or []) if isinstance(answer, dict) else []
    if output == "json":
        click.echo(json.dumps({"subject": subject, "is_compatible": ok, "messages": messages}))
    else:
        click.echo("compatible" if ok else "incompatible")
        for m in messages:
            click.echo(f"  {m}")
    if not ok:
        raise SystemExit(1)


def _setting(
    kind: str,
    subject: str | None,
    value: str | None,
    delete: bool,
    client: RegistryClient,
    output: str,
    **query: str | bool | None,
) -> None:
    """GET, PUT or DELETE ``/config`` or ``/mode``, global or for a subject."""
    field = {"config": "compatibility", "mode": "mode"}[kind]
    shown = {"config": "compatibilityLevel", "mode": "mode"}[kind]
    where = f"/{kind}" + (f"/{_quote(subject)}" if subject else "")
    scope = subject or "global"
    if value is not None and delete:
        raise click.UsageError("give --set or --delete, not both")
    if value is not None:
        answer = client.call("PUT", where, {field: value.upper()}, **query)
        got = answer.get(field) if isinstance(answer, dict) else value.upper()
        done(output, f"{scope}: {got}", subject=subject, **{field: got})
    elif delete:
        client.call("DELETE", where)
        done(output, f"{scope}: removed", subject=subject)
    else:
        answer = client.call("GET", where, defaultToGlobal=True if subject else None)
        got = answer.get(shown, answer.get(field)) if isinstance(answer, dict) else None
        if output == "json":
            click.echo(json.dumps({"subject": subject, field: got}))
        else:
            click.echo(f"{scope}: {got}")


@schemas.command("config")
@click.argument("subject", required=False)
@click.option(
    "--set", "value", type=click.Choice(LEVELS, case_sensitive=False), help="A new level."
)
@click.option("--delete", is_flag=True, help="Remove the subject's (or the global) level.")
@registry_options
def config(
    subject: str | None,
    value: str | None,
    delete: bool,
    registry_url: str,
    user: str | None,
    output: str,
) -> None:
    """The compatibility level, global or of SUBJECT: shown, set or removed."""
    _setting("config", subject, value, delete, _client(registry_url, user), output)


@schemas.command("mode")
@click.argument("subject", required=False)
@click.option("--set", "value", type=click.Choice(MODES, case_sensitive=False), help="A new mode.")
@click.option("--delete", is_flag=True, help="Remove the subject's mode.")
@click.option("--force", is_flag=True, help="IMPORT although the registry holds schemas.")
@registry_options
def mode(
    subject: str | None,
    value: str | None,
    delete: bool,
    force: bool,
    registry_url: str,
    user: str | None,
    output: str,
) -> None:
    """The mode (READWRITE, READONLY, IMPORT), global or of SUBJECT: shown, set or removed."""
    _setting(
        "mode", subject, value, delete, _client(registry_url, user), output, force=force or None
    )


@schemas.command("delete")
@click.argument("subject")
@click.option("--version", "version", default=None, help="One version (default: the subject).")
@click.option(
    "--permanent",
    is_flag=True,
    help="Delete for good (after a soft delete, as Confluent's registry requires).",
)
@registry_options
def delete(
    subject: str,
    version: str | None,
    permanent: bool,
    registry_url: str,
    user: str | None,
    output: str,
) -> None:
    """Delete SUBJECT or one of its versions: soft by default, --permanent after that."""
    client = _client(registry_url, user)
    path = f"/subjects/{_quote(subject)}"
    if version is not None:
        path += f"/versions/{_version(version)}"
    answer = client.call("DELETE", path, permanent=permanent)
    removed = answer if isinstance(answer, list) else [answer]
    how = "permanently deleted" if permanent else "deleted"
    what = f"{subject} version {version}" if version is not None else subject
    done(
        output,
        f"{what}: {how} (versions {', '.join(str(v) for v in removed)})",
        subject=subject,
        versions=removed,
        permanent=permanent,
    )
