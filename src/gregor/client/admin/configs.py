"""Configs of topics, brokers, groups and client metrics resources: DescribeConfigs, AlterConfigs
(the whole override set), IncrementalAlterConfigs, and ListClientMetricsResources (KIP-714's
config resources)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gregor.client.admin.base import AdminBase, error_or_none, raise_first
from gregor.client.admin.types import CONFIG_SOURCES, ConfigEntry, config_resource_type
from gregor.client.core.errors import error_for_code
from gregor.protocol import messages
from gregor.protocol.errors import KafkaError


class ConfigsApi(AdminBase):
    """The admin client's config calls."""

    async def describe_configs(
        self, resources: Iterable[tuple[int | str, str]], *, include_synonyms: bool = False
    ) -> dict[tuple[int, str], dict[str, ConfigEntry] | KafkaError]:
        res = [(config_resource_type(t), n) for t, n in resources]
        conn = await self._any()
        req = messages.DescribeConfigsRequest(
            resources=[
                messages.DescribeConfigsRequest.Resources(
                    resource_type=t, resource_name=n, configuration_keys=None
                )
                for t, n in res
            ],
            include_synonyms=include_synonyms,
        )
        version = conn.version(req.API_KEY)
        resp: messages.DescribeConfigsResponse = await conn.send(req, version)
        out: dict[tuple[int, str], dict[str, ConfigEntry] | KafkaError] = {}
        for r in resp.results:
            key = (r.resource_type, r.resource_name)
            if r.error_code:
                out[key] = error_for_code(r.error_code)(r.error_message)
                continue
            entries = {}
            for c in r.configs:
                source = CONFIG_SOURCES.get(c.config_source, str(c.config_source))
                if version == 0:
                    source = "DEFAULT_CONFIG" if c.is_default else "UNKNOWN"
                entries[c.name] = ConfigEntry(
                    c.name,
                    c.value,
                    source,
                    c.read_only,
                    c.is_sensitive,
                    [
                        (s.name, s.value, CONFIG_SOURCES.get(s.source, str(s.source)))
                        for s in c.synonyms
                    ],
                )
            out[key] = entries
        return out

    async def alter_configs(
        self,
        configs: Mapping[tuple[int | str, str], Mapping[str, str | None]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[tuple[int, str], KafkaError | None]:
        """Replace a resource's whole override set (AlterConfigs)."""
        conn = await self._any()
        req = messages.AlterConfigsRequest(
            resources=[
                messages.AlterConfigsRequest.Resources(
                    resource_type=config_resource_type(t),
                    resource_name=n,
                    configs=[
                        messages.AlterConfigsRequest.Resources.Configs(name=k, value=v)
                        for k, v in kv.items()
                    ],
                )
                for (t, n), kv in configs.items()
            ],
            validate_only=validate_only,
        )
        resp: messages.AlterConfigsResponse = await conn.send(req, conn.version(req.API_KEY))
        out = {
            (r.resource_type, r.resource_name): error_or_none(r.error_code, r.error_message)
            for r in resp.responses
        }
        raise_first(out, raise_on_error)
        return out

    async def incremental_alter_configs(
        self,
        changes: Mapping[tuple[int | str, str], Iterable[tuple[str, int, str | None]]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[tuple[int, str], KafkaError | None]:
        """Apply (name, operation, value) changes; operations OP_SET/OP_DELETE/OP_APPEND/OP_SUBTRACT."""
        conn = await self._any()
        req = messages.IncrementalAlterConfigsRequest(
            resources=[
                messages.IncrementalAlterConfigsRequest.Resources(
                    resource_type=config_resource_type(t),
                    resource_name=n,
                    configs=[
                        messages.IncrementalAlterConfigsRequest.Resources.Configs(
                            name=k, config_operation=op, value=v
                        )
                        for k, op, v in ops
                    ],
                )
                for (t, n), ops in changes.items()
            ],
            validate_only=validate_only,
        )
        resp: messages.IncrementalAlterConfigsResponse = await conn.send(
            req, conn.version(req.API_KEY)
        )
        out = {
            (r.resource_type, r.resource_name): error_or_none(r.error_code, r.error_message)
            for r in resp.responses
        }
        raise_first(out, raise_on_error)
        return out

    async def list_client_metrics_resources(self) -> list[str]:
        """The names of the client metrics subscriptions (KIP-714 config resources)."""
        conn = await self._any()
        resp: messages.ListClientMetricsResourcesResponse = await conn.send(
            messages.ListClientMetricsResourcesRequest(),
            conn.version(messages.ListClientMetricsResourcesRequest.API_KEY),
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        return sorted(r.name for r in resp.client_metrics_resources)
