"""How many connections the broker takes: Kafka's ``ConnectionQuotas``.

Theory of operation. Every accepted TCP connection is counted from the moment it is accepted
(before a TLS handshake or a SASL login) until it closes: per IP address, per listener and in
total. Three limits apply, with Kafka's semantics (``kafka.network.ConnectionQuotas``):

- ``max.connections`` (broker-wide) and ``listener.name.<l>.max.connections`` (one listener;
  unset, it is ``max.connections``'s value, as Kafka reads listener configs with the prefix
  overriding the plain key): while a listener has no free slot (its own count at its limit,
  or the broker's total at ``max.connections``) its acceptor takes no connection. New ones
  wait in the kernel's accept queue, as they do behind Kafka's blocked acceptor thread, and
  are taken as soon as a connection closes or a limit is raised. The inter-broker listener
  is exempt from the broker-wide limit when the broker has more than one listener, so
  replication and the controller's requests still get through a broker full of clients.
  Connections the exempt listener takes can put the total over ``max.connections``; then (and
  after the limit is lowered at run time) the least recently active connections of the other
  listeners are closed until the total is back within it (Kafka's processors close their
  lowest-priority channel on each poll while the limit is exceeded).
- ``max.connections.per.ip`` with ``max.connections.per.ip.overrides`` (``host:count,ip:count``;
  host names are resolved when the setting is applied): a connection that would exceed its
  address's limit is counted, refused and closed at once ("Rejected connection from ..., address
  already has the configured maximum of N connections").

All of them may change at run time (dynamic broker configs); ``configure`` applies new values,
wakes acceptors that wait for a slot and closes excess connections. Everything runs on the
broker's event loop, so there is no lock.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping, Sequence

from gregor.broker.common.events import log_event
from gregor.broker.config.broker_config import parse_ip_overrides

log = logging.getLogger("gregor.broker")

#: Kafka's default for each limit (Int.MaxValue): no limit.
UNLIMITED = 2147483647


def normalize_ip(address: str) -> str:
    """The address as one canonical string (an IPv4-mapped IPv6 address as its IPv4 form)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def _resolve(host: str) -> list[str]:
    """The addresses of an override's host (an IP literal is itself)."""
    try:
        return [normalize_ip(str(ipaddress.ip_address(host)))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        log_event(log, "connection_quotas.unresolved_host", logging.WARNING, host=host)
        return []
    return sorted({normalize_ip(str(info[4][0])) for info in infos})


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    value = props.get(key)
    return default if value is None or value == "" else int(value)


class ConnectionQuotas:
    """Counts and limits connections (see the module docstring)."""

    def __init__(
        self, listeners: Sequence[str], inter_broker_listener: str, props: Mapping[str, str]
    ) -> None:
        self.listeners = list(listeners)
        #: The inter-broker listener, exempt from max.connections (only with other listeners).
        self.protected = inter_broker_listener if len(self.listeners) > 1 else None
        self.counts: dict[str, int] = {}
        self.listener_counts: dict[str, int] = dict.fromkeys(self.listeners, 0)
        self.total = 0
        self.max_connections = UNLIMITED
        self.max_per_ip = UNLIMITED
        self.ip_overrides: dict[str, int] = {}
        self.listener_max: dict[str, int] = dict.fromkeys(self.listeners, UNLIMITED)
        #: Called when a slot may have come free (acceptors waiting for one resume).
        self.on_slot_free: list[Callable[[], None]] = []
        #: Called when the total is over max.connections: close excess connections.
        self.on_excess: Callable[[], None] | None = None
        self._overrides_text: str | None = None
        self.configure(props)

    def configure(self, props: Mapping[str, str]) -> None:
        """Apply the limits in ``props`` (server.properties with the dynamic configs on top;
        already validated)."""
        self.max_connections = _int(props, "max.connections", UNLIMITED)
        self.max_per_ip = _int(props, "max.connections.per.ip", UNLIMITED)
        text = props.get("max.connections.per.ip.overrides", "") or ""
        if text != self._overrides_text:
            overrides: dict[str, int] = {}
            for host, n in parse_ip_overrides(text).items():
                for address in _resolve(host):
                    overrides[address] = n
            self.ip_overrides = overrides
            self._overrides_text = text
        for name in self.listeners:
            prefixed = props.get(f"listener.name.{name.lower()}.max.connections")
            self.listener_max[name] = int(prefixed) if prefixed else self.max_connections
        self.slot_freed()
        if self.exceeded() and self.on_excess is not None:
            self.on_excess()

    def max_for(self, ip: str) -> int:
        return self.ip_overrides.get(ip, self.max_per_ip)

    def slot_available(self, listener: str) -> bool:
        """May ``listener`` take a connection now? (Kafka's connectionSlotAvailable.)"""
        if self.listener_counts.get(listener, 0) >= self.listener_max.get(listener, UNLIMITED):
            return False
        return listener == self.protected or self.total < self.max_connections

    def inc(self, listener: str, ip: str) -> int | None:
        """Count a connection ``listener`` accepted from ``ip``: None when it may stay, else
        its address's limit (the connection is not counted and must be closed)."""
        count = self.counts.get(ip, 0)
        limit = self.max_for(ip)
        if count >= limit:
            return limit
        self.counts[ip] = count + 1
        self.total += 1
        self.listener_counts[listener] = self.listener_counts.get(listener, 0) + 1
        if listener == self.protected and self.exceeded() and self.on_excess is not None:
            self.on_excess()
        return None

    def dec(self, listener: str, ip: str) -> None:
        """A counted connection has closed."""
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.total = max(0, self.total - 1)
        self.listener_counts[listener] = max(0, self.listener_counts.get(listener, 0) - 1)
        self.slot_freed()

    def exceeded(self) -> bool:
        """Is the total over max.connections? (Then connections of listeners other than the
        exempt one are closed.)"""
        return self.total > self.max_connections

    def slot_freed(self) -> None:
        for wake in list(self.on_slot_free):
            wake()
