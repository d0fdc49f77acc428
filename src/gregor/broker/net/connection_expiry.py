"""The connections a broker closes on its own: the idle ones (Kafka's ``IdleExpiryManager``,
``connections.max.idle.ms``; a connection with a request in hand or frames queued is never
idle) and, while the connections are more than ``max.connections``, the least recently active
of the listeners that are not exempt (Kafka's ``Processor.closeExcessConnections``).

No state of its own: the broker's maintenance task calls ``close_idle`` about once a second,
and ``ConnectionQuotas`` calls back into ``close_excess`` when a limit is lowered.
"""

import asyncio
import logging

from gregor.broker.common.events import log_event
from gregor.broker.net.connection_quotas import ConnectionQuotas
from gregor.broker.net.server import Connection

log = logging.getLogger("gregor.broker")


def close_idle(connections: set[Connection], max_idle_ms: int) -> int:
    """Close connections with no request in hand that have been silent for ``max_idle_ms``
    (``connections.max.idle.ms``); returns how many."""
    if max_idle_ms < 0:
        return 0
    now = asyncio.get_running_loop().time()
    closed = 0
    for conn in list(connections):
        if (
            not conn.busy
            and not conn.has_queued_frames
            and (now - conn.last_active) * 1000 >= max_idle_ms
        ):
            log_event(log, "connection.idle_closed", peer=conn.info.peer, idle_ms=max_idle_ms)
            conn.close()
            closed += 1
    return closed


def close_excess(connections: set[Connection], quotas: ConnectionQuotas) -> int:
    """While the connections are more than ``max.connections`` (the exempt inter-broker
    listener took some, or the limit was lowered), close the least recently active one of
    the other listeners, as Kafka's processors close their lowest-priority channel; returns
    how many were closed."""
    closed = 0
    if not quotas.exceeded():
        return 0
    candidates = sorted(
        (c for c in connections if not c.closed and c.info.listener != quotas.protected),
        # last_active has the loop clock's resolution (a millisecond under uvloop); the
        # arrival of the last request (perf_counter) orders connections active within one.
        key=lambda c: (c.last_active, c.frame_arrival),
    )
    for conn in candidates:
        if not quotas.exceeded():
            break
        log_event(
            log,
            "connection.closed",
            logging.INFO,
            peer=conn.info.peer,
            listener=conn.info.listener,
            reason=f"max.connections={quotas.max_connections} exceeded",
        )
        conn.close()
        closed += 1
    return closed
