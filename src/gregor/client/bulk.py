"""The old path of :mod:`gregor.client.consumer.bulk`, kept for importers outside the client (the
Spark data source, the pipelines, tests, bench); new code imports the consumer module."""

from gregor.client.consumer.bulk import (
    _IDLE,  # the idle connections, which the failover tests inspect
    DataLossError,
    RangeReader,
    client_config,
    close_shared_clients,
    end_offsets,
    end_offsets_async,
    next_fetch_offset,
    shared_client,
)

__all__ = [
    "DataLossError",
    "RangeReader",
    "_IDLE",
    "client_config",
    "close_shared_clients",
    "end_offsets",
    "end_offsets_async",
    "next_fetch_offset",
    "shared_client",
]
