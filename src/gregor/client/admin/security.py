"""Who may do what: ACLs (CreateAcls, DescribeAcls, DeleteAcls), SCRAM credentials
(DescribeUserScramCredentials, AlterUserScramCredentials), client quotas (DescribeClientQuotas,
AlterClientQuotas) and delegation tokens (Create/Renew/Expire/DescribeDelegationToken).

Changes go to the controller; a SCRAM password is salted here and only its salted form leaves
the process."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping

from gregor.client.admin.base import AdminBase, error_or_none, raise_first
from gregor.client.admin.types import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    DelegationToken,
    PatternType,
    ResourceType,
    ScramMechanism,
)
from gregor.client.core.errors import UnsupportedForBrokerError, error_for_code
from gregor.protocol import messages
from gregor.protocol.errors import KafkaError


class SecurityApi(AdminBase):
    """The admin client's ACL, SCRAM, quota and delegation token calls."""

    async def create_acls(
        self, bindings: Iterable[AclBinding], *, raise_on_error: bool = False
    ) -> dict[AclBinding, KafkaError | None]:
        """Add ACLs; per binding, None or the broker's refusal."""
        bindings = list(bindings)
        conn = await self._controller()
        req = messages.CreateAclsRequest(
            creations=[
                messages.CreateAclsRequest.Creations(
                    resource_type=b.resource_type,
                    resource_name=b.name,
                    resource_pattern_type=b.pattern_type,
                    principal=b.principal,
                    host=b.host,
                    operation=b.operation,
                    permission_type=b.permission_type,
                )
                for b in bindings
            ]
        )
        resp: messages.CreateAclsResponse = await conn.send(req, conn.version(req.API_KEY))
        out = {
            b: error_or_none(r.error_code, r.error_message)
            for b, r in zip(bindings, resp.results, strict=True)
        }
        raise_first(out, raise_on_error)
        return out

    async def describe_acls(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """The ACLs that match ``acl_filter`` (every ACL without one); raises the broker's error."""
        f = acl_filter or AclBindingFilter()
        conn = await self._any()
        req = messages.DescribeAclsRequest(
            resource_type_filter=f.resource_type,
            resource_name_filter=f.name,
            pattern_type_filter=f.pattern_type,
            principal_filter=f.principal,
            host_filter=f.host,
            operation=f.operation,
            permission_type=f.permission_type,
        )
        resp: messages.DescribeAclsResponse = await conn.send(req, conn.version(req.API_KEY))
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        return [
            AclBinding(
                ResourceType(r.resource_type),
                r.resource_name,
                PatternType(r.pattern_type),
                a.principal,
                a.host,
                AclOperation(a.operation),
                AclPermissionType(a.permission_type),
            )
            for r in resp.resources
            for a in r.acls
        ]

    async def delete_acls(
        self, filters: Iterable[AclBindingFilter], *, raise_on_error: bool = False
    ) -> list[list[AclBinding] | KafkaError]:
        """Remove the ACLs each filter matches; per filter, the ACLs removed or the error."""
        filters = list(filters)
        conn = await self._controller()
        req = messages.DeleteAclsRequest(
            filters=[
                messages.DeleteAclsRequest.Filters(
                    resource_type_filter=f.resource_type,
                    resource_name_filter=f.name,
                    pattern_type_filter=f.pattern_type,
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=f.operation,
                    permission_type=f.permission_type,
                )
                for f in filters
            ]
        )
        resp: messages.DeleteAclsResponse = await conn.send(req, conn.version(req.API_KEY))
        out: list[list[AclBinding] | KafkaError] = []
        for r in resp.filter_results:
            err = error_or_none(r.error_code, r.error_message)
            if err is not None:
                out.append(err)
                continue
            out.append(
                [
                    AclBinding(
                        ResourceType(m.resource_type),
                        m.resource_name,
                        PatternType(m.pattern_type),
                        m.principal,
                        m.host,
                        AclOperation(m.operation),
                        AclPermissionType(m.permission_type),
                    )
                    for m in r.matching_acls
                ]
            )
        if raise_on_error:
            for item in out:
                if isinstance(item, KafkaError):
                    raise item
        return out

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None
    ) -> dict[str, list[tuple[ScramMechanism, int]] | KafkaError]:
        """Per user, (mechanism, iterations) of each SCRAM credential (never a password or a
        salt); every user with a credential when ``users`` is None."""
        conn = await self._any()
        req = messages.DescribeUserScramCredentialsRequest(
            users=None
            if users is None
            else [messages.DescribeUserScramCredentialsRequest.Users(name=u) for u in users]
        )
        resp: messages.DescribeUserScramCredentialsResponse = await conn.send(
            req, conn.version(req.API_KEY)
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        out: dict[str, list[tuple[ScramMechanism, int]] | KafkaError] = {}
        for r in resp.results:
            err = error_or_none(r.error_code, r.error_message)
            out[r.user] = (
                err
                if err is not None
                else [(ScramMechanism(c.mechanism), c.iterations) for c in r.credential_infos]
            )
        return out

    async def alter_user_scram_credentials(
        self,
        upsertions: Iterable[tuple[str, ScramMechanism | str, str, int]] = (),
        deletions: Iterable[tuple[str, ScramMechanism | str]] = (),
        *,
        raise_on_error: bool = False,
    ) -> dict[str, KafkaError | None]:
        """Set (user, mechanism, password, iterations) credentials and delete (user, mechanism)
        ones. The password is salted here (a random 32-byte salt, PBKDF2 as SCRAM defines
        it); only the salted form is sent. Per user, None or the broker's refusal."""
        ups = []
        for user, mechanism, password, iterations in upsertions:
            m = ScramMechanism.parse(mechanism)
            salt = os.urandom(32)
            salted = hashlib.pbkdf2_hmac(m.hash_name, password.encode(), salt, iterations)
            ups.append(
                messages.AlterUserScramCredentialsRequest.Upsertions(
                    name=user,
                    mechanism=m,
                    iterations=iterations,
                    salt=salt,
                    salted_password=salted,
                )
            )
        dels = [
            messages.AlterUserScramCredentialsRequest.Deletions(
                name=user, mechanism=ScramMechanism.parse(mechanism)
            )
            for user, mechanism in deletions
        ]
        conn = await self._controller()
        req = messages.AlterUserScramCredentialsRequest(deletions=dels, upsertions=ups)
        resp: messages.AlterUserScramCredentialsResponse = await conn.send(
            req, conn.version(req.API_KEY)
        )
        out = {r.user: error_or_none(r.error_code, r.error_message) for r in resp.results}
        raise_first(out, raise_on_error)
        return out

    async def describe_client_quotas(
        self, components: Iterable[tuple[str, int, str | None]] = (), *, strict: bool = False
    ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        """Quotas of the entities that match every (entity type, match type, name) component
        (match type 0: that name, 1: the default, 2: any name); ``strict`` leaves out entities
        with other types. Entities are (type, name or None) pairs sorted by type."""
        conn = await self._any()
        req = messages.DescribeClientQuotasRequest(
            components=[
                messages.DescribeClientQuotasRequest.Components(
                    entity_type=t, match_type=m, match=n
                )
                for t, m, n in components
            ],
            strict=strict,
        )
        resp: messages.DescribeClientQuotasResponse = await conn.send(
            req, conn.version(req.API_KEY)
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)(resp.error_message)
        return {
            tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {
                v.key: v.value for v in entry.values
            }
            for entry in resp.entries or []
        }

    async def alter_client_quotas(
        self,
        changes: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float | None]],
        *,
        validate_only: bool = False,
        raise_on_error: bool = False,
    ) -> dict[tuple[tuple[str, str | None], ...], KafkaError | None]:
        """Per entity ((type, name or None for the default) pairs), set keys to values or
        remove them (None); per entity, None or the broker's refusal."""
        conn = await self._controller()
        req = messages.AlterClientQuotasRequest(
            entries=[
                messages.AlterClientQuotasRequest.Entries(
                    entity=[
                        messages.AlterClientQuotasRequest.Entries.Entity(
                            entity_type=t, entity_name=n
                        )
                        for t, n in entity
                    ],
                    ops=[
                        messages.AlterClientQuotasRequest.Entries.Ops(
                            key=k, value=0.0 if v is None else float(v), remove=v is None
                        )
                        for k, v in ops.items()
                    ],
                )
                for entity, ops in changes.items()
            ],
            validate_only=validate_only,
        )
        resp: messages.AlterClientQuotasResponse = await conn.send(req, conn.version(req.API_KEY))
        out = {
            tuple(sorted((e.entity_type, e.entity_name) for e in r.entity)): error_or_none(
                r.error_code, r.error_message
            )
            for r in resp.entries
        }
        raise_first(out, raise_on_error)
        return out

    async def create_delegation_token(
        self, renewers: Iterable[str] = (), max_lifetime_ms: int = -1, owner: str | None = None
    ) -> DelegationToken:
        """A new token for the logged-in principal (or, with CREATE_TOKENS on that user, for
        ``owner``, "User:name"); ``renewers`` are "User:name" principals; -1: the broker's
        maximum lifetime. Raises the broker's refusal."""
        conn = await self._controller()
        owner_type, _, owner_name = (owner or "").partition(":")
        req = messages.CreateDelegationTokenRequest(
            owner_principal_type=owner_type if owner else None,
            owner_principal_name=owner_name if owner else None,
            renewers=[
                messages.CreateDelegationTokenRequest.Renewers(principal_type=t, principal_name=n)
                for t, _, n in (r.partition(":") for r in renewers)
            ],
            max_lifetime_ms=max_lifetime_ms,
        )
        version = conn.version(req.API_KEY)
        if owner and version < 3:
            raise UnsupportedForBrokerError(
                "creating a token for another owner needs CreateDelegationToken v3"
            )
        resp: messages.CreateDelegationTokenResponse = await conn.send(req, version)
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        requester = (
            f"{resp.token_requester_principal_type}:{resp.token_requester_principal_name}"
            if version >= 3
            else f"{resp.principal_type}:{resp.principal_name}"
        )
        return DelegationToken(
            resp.token_id,
            bytes(resp.hmac),
            f"{resp.principal_type}:{resp.principal_name}",
            requester,
            tuple(renewers),
            resp.issue_timestamp_ms,
            resp.expiry_timestamp_ms,
            resp.max_timestamp_ms,
        )

    async def renew_delegation_token(self, hmac: bytes, renew_period_ms: int = -1) -> int:
        """Renew the token with this HMAC; its new expiry timestamp (ms). -1: the broker's
        ``delegation.token.expiry.time.ms``."""
        conn = await self._controller()
        req = messages.RenewDelegationTokenRequest(hmac=hmac, renew_period_ms=renew_period_ms)
        resp: messages.RenewDelegationTokenResponse = await conn.send(
            req, conn.version(req.API_KEY)
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        return int(resp.expiry_timestamp_ms)

    async def expire_delegation_token(self, hmac: bytes, expiry_time_period_ms: int = -1) -> int:
        """Expire the token with this HMAC after the period (-1: now); its expiry timestamp."""
        conn = await self._controller()
        req = messages.ExpireDelegationTokenRequest(
            hmac=hmac, expiry_time_period_ms=expiry_time_period_ms
        )
        resp: messages.ExpireDelegationTokenResponse = await conn.send(
            req, conn.version(req.API_KEY)
        )
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        return int(resp.expiry_timestamp_ms)

    async def describe_delegation_tokens(
        self, owners: Iterable[str] | None = None
    ) -> list[DelegationToken]:
        """The tokens of these owners ("User:name"; None: every owner) the principal may see."""
        conn = await self._any()
        req = messages.DescribeDelegationTokenRequest(
            owners=None
            if owners is None
            else [
                messages.DescribeDelegationTokenRequest.Owners(principal_type=t, principal_name=n)
                for t, _, n in (o.partition(":") for o in owners)
            ]
        )
        version = conn.version(req.API_KEY)
        resp: messages.DescribeDelegationTokenResponse = await conn.send(req, version)
        if resp.error_code:
            raise error_for_code(resp.error_code)()
        out = []
        for t in resp.tokens:
            owner = f"{t.principal_type}:{t.principal_name}"
            requester = (
                f"{t.token_requester_principal_type}:{t.token_requester_principal_name}"
                if version >= 3
                else owner
            )
            out.append(
                DelegationToken(
                    t.token_id,
                    bytes(t.hmac),
                    owner,
                    requester,
                    tuple(f"{r.principal_type}:{r.principal_name}" for r in t.renewers),
                    t.issue_timestamp,
                    t.expiry_timestamp,
                    t.max_timestamp,
                )
            )
        return out
