"""The ``metadata.store`` value that names an etcd cluster: ``etcd://host:port[,host:port...][/prefix]``.

- endpoints: one or more ``host[:port]`` separated by commas (port 2379 when left out); the
  store connects to the first that answers and moves to the next when one stops answering.
- prefix: every key of this Gregor cluster lives under it, so several Gregor clusters can
  share one etcd; ``/gregor`` when left out. Segments of letters, digits, ``. _ -``.

Parsing needs no etcd client, so the broker's configuration validates the value at start
(fail closed: a malformed URL stops the broker with a clear message).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["DEFAULT_PORT", "DEFAULT_PREFIX", "EtcdTarget", "parse_etcd_url"]

DEFAULT_PORT = 2379
DEFAULT_PREFIX = "/gregor"
SCHEME = "etcd://"

_HOST = re.compile(r"^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$")
_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class EtcdTarget:
    endpoints: tuple[tuple[str, int], ...]
    prefix: str

    def __str__(self) -> str:
        hosts = ",".join(f"{h}:{p}" for h, p in self.endpoints)
        return f"{SCHEME}{hosts}{self.prefix}"


def is_etcd_url(value: str) -> bool:
    return value.strip().lower().startswith(SCHEME)


def parse_etcd_url(value: str) -> EtcdTarget:
    """The endpoints and key prefix of an ``etcd://`` value; ValueError says what is wrong."""
    text = value.strip()
    if not text.lower().startswith(SCHEME):
        raise ValueError(f"{value!r} does not start with {SCHEME}")
    rest = text[len(SCHEME) :]
    hosts, slash, path = rest.partition("/")
    endpoints: list[tuple[str, int]] = []
    for item in hosts.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"{value!r} has an empty endpoint (expected host:port[,host:port])")
        host, port = item, DEFAULT_PORT
        if item.startswith("["):  # [ipv6]:port
            end = item.find("]")
            host, tail = item[: end + 1], item[end + 1 :]
            if tail:
                if not tail.startswith(":"):
                    raise ValueError(f"{value!r}: endpoint {item!r} is not [address]:port")
                port = _port(value, tail[1:])
        elif ":" in item:
            host, _, port_text = item.rpartition(":")
            port = _port(value, port_text)
        if not _HOST.match(host):
            raise ValueError(f"{value!r}: {host!r} is not a host name or address")
        endpoints.append((host, port))
    prefix = DEFAULT_PREFIX
    if slash:
        segments = path.rstrip("/").split("/")
        if not path.strip("/") or any(not _SEGMENT.match(s) for s in segments):
            raise ValueError(
                f"{value!r}: key prefix {'/' + path!r} must be /segment[/segment...] of letters, "
                "digits, '.', '_' or '-'"
            )
        prefix = "/" + "/".join(segments)
    return EtcdTarget(tuple(endpoints), prefix)


def _port(value: str, text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"{value!r}: port {text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"{value!r}: port {port} is out of range")
    return port
