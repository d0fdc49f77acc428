"""What every family of admin calls stands on: the client, its settings, and where to send.

Each family (``topics``, ``configs``, ``groups``, ``records``, ``security``, ``transactions``,
``cluster``) is a class deriving from :class:`AdminBase` whose methods use only ``_client``,
``_timeout_ms``, :meth:`AdminBase._controller` (the broker that owns cluster changes) and
:meth:`AdminBase._any` (any broker); :class:`~gregor.client.admin.client.AIOAdminClient` is
all of them together, as franz-go's ``kadm.Client`` is one type whose methods live in a file
per family. Families do not call each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self, TypeVar

from gregor.client.core.client import KafkaClient
from gregor.client.core.config import Config, Settings, SettingValue
from gregor.client.core.conn import BrokerConnection
from gregor.client.core.errors import error_for_code
from gregor.protocol.errors import KafkaError

K = TypeVar("K")


def error_or_none(code: int, message: str | None = None) -> KafkaError | None:
    """The exception for a per-item error code, None for 0."""
    return error_for_code(code)(message) if code else None


def raise_first(results: Mapping[K, object], raise_on_error: bool) -> None:
    """With ``raise_on_error``, raise the first per-item error of ``results``."""
    if raise_on_error:
        for v in results.values():
            if isinstance(v, BaseException):
                raise v


class AdminBase:
    def __init__(self, config: Settings | None = None, **kwargs: SettingValue) -> None:
        self.config = Config("admin", config, **kwargs)
        self._client = KafkaClient(self.config)
        self._timeout_ms = self.config["default.api.timeout.ms"]

    async def start(self) -> Self:
        await self._client.start()
        return self

    async def close(self) -> None:
        await self._client.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def client(self) -> KafkaClient:
        return self._client

    async def _controller(self) -> BrokerConnection:
        node = self._client.cluster.controller_id
        if node >= 0 and node in self._client.cluster.brokers:
            try:
                return await self._client.connection(node)
            except KafkaError:
                pass
        return await self._client.any_connection()

    async def _any(self) -> BrokerConnection:
        return await self._client.any_connection()
