"""The broker's delegation tokens (Kafka's DelegationTokenManager).

Theory of operation. Tokens live in the metadata image (``image.delegation_tokens``), so every
broker of a cluster sees each token once the store has it; what a broker keeps itself is the
secret (``delegation.token.secret.key``, or its old name ``delegation.token.master.key``; the
same on every broker) and a cache of the SCRAM credentials of tokens that have logged in here
(``TokenCredentials``), dropped when the token leaves the image. Without a secret, tokens are
disabled: every token API answers DELEGATION_TOKEN_AUTH_DISABLED and no token can log in.

``create`` / ``renew`` / ``expire`` apply Kafka's rules (``security.delegation_tokens``) in one
metadata change each and raise Kafka's errors; ``remove_expired`` runs on the controller every
``delegation.token.expiry.check.interval.ms`` (from the broker's maintenance loop) and takes
tokens whose expiry has passed out of the image. A token past its expiry but not yet removed
cannot log in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from gregor.broker.config.broker_config import BrokerConfig
from gregor.cluster.image import DelegationToken, MetadataImage, ScramCredential
from gregor.cluster.store import MetadataStore
from gregor.protocol.errors import DelegationTokenAuthDisabledError, DelegationTokenNotFoundError
from gregor.security import delegation_tokens as rules


def now_ms() -> int:
    return int(time.time() * 1000)


class DelegationTokenManager:
    def __init__(self, config: BrokerConfig, image: Callable[[], MetadataImage]) -> None:
        self.secret: str | None = (
            config["delegation.token.secret.key"] or config["delegation.token.master.key"] or None
        )
        self.max_lifetime_ms = int(config["delegation.token.max.lifetime.ms"])
        self.expiry_time_ms = int(config["delegation.token.expiry.time.ms"])
        self.check_interval_s = int(config["delegation.token.expiry.check.interval.ms"]) / 1000
        self._image = image
        self._credentials = rules.TokenCredentials()
        self._last_check = time.monotonic()
        self.store: MetadataStore | None = None  # set by the broker once the store is open

    @property
    def enabled(self) -> bool:
        return bool(self.secret)

    def _require_enabled(self) -> str:
        if not self.secret:
            raise DelegationTokenAuthDisabledError("Delegation Token feature is not enabled.")
        return self.secret

    def _store(self) -> MetadataStore:
        assert self.store is not None
        return self.store

    # --- login ---

    def login(self, token_id: str, mechanism: str) -> tuple[ScramCredential, str, int] | None:
        """The SCRAM credential, owner and expiry of a live token, for a ``tokenauth`` login."""
        token = self._image().delegation_tokens.get(token_id)
        found = self._credentials.login(token, self.secret, mechanism, now_ms())
        return None if found is None else (found.credential, found.owner, found.expiry_timestamp_ms)

    def hmac(self, token: DelegationToken) -> bytes:
        return rules.token_hmac(self._require_enabled(), token.token_id)

    # --- the APIs ---

    async def create(
        self, owner: str, requester: str, renewers: Sequence[str], max_lifetime_ms: int
    ) -> DelegationToken:
        self._require_enabled()
        token = rules.new_token(
            owner,
            requester,
            renewers,
            max_lifetime_ms,
            now_ms(),
            self.max_lifetime_ms,
            self.expiry_time_ms,
        )
        return await self._store().create_delegation_token(token)

    def _by_hmac(self, mac: bytes) -> DelegationToken:
        token = rules.find_by_hmac(
            self._image().delegation_tokens.values(), self._require_enabled(), mac
        )
        if token is None:
            raise DelegationTokenNotFoundError("Delegation Token not found.")
        return token

    async def renew(self, mac: bytes, principal: str, renew_period_ms: int) -> int:
        """The token's new expiry timestamp; Kafka's refusals raised."""
        token = self._by_hmac(mac)
        now, expiry_time = now_ms(), self.expiry_time_ms
        return await self._store().change_delegation_token(
            token.token_id, lambda t: rules.renewed(t, principal, renew_period_ms, now, expiry_time)
        )

    async def expire(self, mac: bytes, principal: str, expiry_period_ms: int) -> int:
        """The token's new expiry timestamp (now, for an immediate expiry)."""
        token = self._by_hmac(mac)
        now = now_ms()
        expiry = await self._store().change_delegation_token(
            token.token_id, lambda t: rules.expired_by(t, principal, expiry_period_ms, now)
        )
        return now if expiry < 0 else expiry

    def tokens(self) -> list[DelegationToken]:
        self._require_enabled()
        return sorted(
            self._image().delegation_tokens.values(),
            key=lambda t: (t.issue_timestamp_ms, t.token_id),
        )

    # --- upkeep ---

    async def remove_expired(self, is_controller: bool) -> list[str]:
        """On the controller, once per check interval: remove expired tokens from the image.
        Every broker drops the cached credentials of tokens gone from the image."""
        image = self._image()
        self._credentials.forget(image.delegation_tokens)
        if not is_controller or time.monotonic() - self._last_check < self.check_interval_s:
            return []
        self._last_check = time.monotonic()
        now = now_ms()
        if not any(t.expired(now) for t in image.delegation_tokens.values()):
            return []
        return await self._store().remove_expired_delegation_tokens(now)
