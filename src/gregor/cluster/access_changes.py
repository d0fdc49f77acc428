"""The access parts of the metadata as pure changes (``changes``' contract: old image in, new
image out, or a Kafka error): SCRAM credentials, ACLs, client quotas and delegation tokens.
Each function validates as Kafka's controller does and returns the next image
(``change_base.next_image``) with per-entry results where the API answers per entry."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gregor.cluster.change_base import next_image
from gregor.cluster.image import (
    AclBinding,
    DelegationToken,
    MetadataImage,
    ScramCredential,
)
from gregor.protocol.errors import (
    DelegationTokenNotFoundError,
    DuplicateResourceError,
    InvalidRequestError,
    KafkaError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from gregor.security import quotas as quota_rules
from gregor.security.acls import AclBindingFilter, binding_error, filter_error
from gregor.security.scram import MAX_ITERATIONS, MECHANISM_IDS, MIN_ITERATIONS

__all__ = [
    "alter_client_quotas",
    "alter_scram_credentials",
    "change_delegation_token",
    "create_acls",
    "create_delegation_token",
    "delete_acls",
    "remove_expired_delegation_tokens",
]


def alter_scram_credentials(
    image: MetadataImage,
    deletions: Sequence[tuple[str, str]],
    upsertions: Sequence[tuple[str, ScramCredential]],
) -> tuple[MetadataImage, dict[str, KafkaError | None]]:
    """Delete ``(user, mechanism)`` credentials and add or replace ``(user, credential)`` ones.

    Each user's alterations succeed or fail together, as Kafka's AlterUserScramCredentials
    answers per user: a user named twice in the request (DUPLICATE_RESOURCE), an empty name or
    an iteration count outside [4096, 16384] (UNACCEPTABLE_CREDENTIAL), a mechanism other than
    SCRAM-SHA-256/512 (UNSUPPORTED_SASL_MECHANISM) or the deletion of a credential that does
    not exist (RESOURCE_NOT_FOUND) fails that user only. Returns the new image (version + 1
    even when every user failed) and, per user, None or the error.
    """
    results: dict[str, KafkaError | None] = {}
    seen: dict[str, int] = {}
    for user, _ in deletions:
        seen[user] = seen.get(user, 0) + 1
    for user, _cred in upsertions:
        seen[user] = seen.get(user, 0) + 1
    creds = {u: dict(c) for u, c in image.scram_credentials.items()}
    for user, count in seen.items():
        if count > 1:
            results[user] = DuplicateResourceError(
                "A user credential cannot be altered twice in the same request"
            )
        elif not user:
            results[user] = UnacceptableCredentialError("Username must not be empty")
    for user, mechanism in deletions:
        if user in results:
            continue
        if mechanism not in MECHANISM_IDS:
            results[user] = UnsupportedSaslMechanismError("Unknown SCRAM mechanism")
        elif mechanism not in creds.get(user, {}):
            results[user] = ResourceNotFoundError(
                "Attempt to delete a user credential that does not exist"
            )
        else:
            del creds[user][mechanism]
            if not creds[user]:
                del creds[user]
            results[user] = None
    for user, cred in upsertions:
        if user in results:
            continue
        if cred.mechanism not in MECHANISM_IDS:
            results[user] = UnsupportedSaslMechanismError("Unknown SCRAM mechanism")
        elif cred.iterations < MIN_ITERATIONS:
            results[user] = UnacceptableCredentialError("Too few iterations")
        elif cred.iterations > MAX_ITERATIONS:
            results[user] = UnacceptableCredentialError("Too many iterations")
        else:
            creds.setdefault(user, {})[cred.mechanism] = cred
            results[user] = None
    return next_image(image, scram_credentials=creds), results


def create_acls(
    image: MetadataImage, bindings: Sequence[AclBinding]
) -> tuple[MetadataImage, list[KafkaError | None]]:
    """Add ACL bindings; per binding None or the error that refused it (INVALID_REQUEST with
    Kafka's message). Creating a binding that exists succeeds and changes nothing. Returns the
    new image (version + 1 even when every binding was refused)."""
    acls = dict.fromkeys(image.acls)
    results: list[KafkaError | None] = []
    for b in bindings:
        problem = binding_error(b)
        if problem is None:
            acls[b] = None
            results.append(None)
        else:
            results.append(InvalidRequestError(problem))
    return next_image(image, acls=list(acls)), results


def delete_acls(
    image: MetadataImage, filters: Sequence[AclBindingFilter]
) -> tuple[MetadataImage, list[KafkaError | list[AclBinding]]]:
    """Remove every binding any filter matches; per filter the bindings it removed (a binding
    two filters match is reported by both) or the error that refused the filter
    (INVALID_REQUEST for a filter with an UNKNOWN element)."""
    results: list[KafkaError | list[AclBinding]] = []
    deleted: set[AclBinding] = set()
    for f in filters:
        problem = filter_error(f)
        if problem is not None:
            results.append(InvalidRequestError(problem))
            continue
        matched = [b for b in image.acls if f.matches(b)]
        deleted.update(matched)
        results.append(matched)
    return next_image(image, acls=[b for b in image.acls if b not in deleted]), results


def alter_client_quotas(
    image: MetadataImage,
    entries: Sequence[tuple[Sequence[tuple[str, str | None]], Sequence[tuple[str, float, bool]]]],
    validate_only: bool = False,
) -> tuple[MetadataImage, list[KafkaError | None]]:
    """Apply each entry's (key, value, remove) operations to its entity, as Kafka's
    AlterClientQuotas does: per entry, all of its operations or none (INVALID_REQUEST with
    Kafka's message for a bad entity, key or value; removing a key that is not set is no
    error). ``validate_only`` checks without changing anything. Returns the new image
    (version + 1 even when nothing changed) and, per entry, None or the error."""
    quotas = {e: dict(v) for e, v in image.client_quotas.items()}
    results: list[KafkaError | None] = []
    for pairs, ops in entries:
        try:
            entity = quota_rules.entity_of(pairs)
            keys = quota_rules.validate_entity(entity)
            seen: set[str] = set()
            for key, value, remove in ops:
                if key in seen:
                    raise quota_rules.QuotaError(f"Duplicate quota key {key} in the request")
                seen.add(key)
                if not remove:
                    quota_rules.validate_value(keys, key, value)
        except quota_rules.QuotaError as e:
            results.append(InvalidRequestError(str(e)))
            continue
        if not validate_only:
            values = quotas.setdefault(entity, {})
            for key, value, remove in ops:
                if remove:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
        results.append(None)
    return next_image(image, client_quotas=quotas), results


def create_delegation_token(
    image: MetadataImage, token: DelegationToken
) -> tuple[MetadataImage, DelegationToken]:
    """Add a new token (its id is random: a clash is a refusal, never an overwrite)."""
    if token.token_id in image.delegation_tokens:
        raise InvalidRequestError(f"delegation token {token.token_id} exists")
    return next_image(
        image, delegation_tokens={**image.delegation_tokens, token.token_id: token}
    ), token


def change_delegation_token(
    image: MetadataImage, token_id: str, change: Callable[[DelegationToken], DelegationToken | None]
) -> tuple[MetadataImage, int]:
    """Renew or expire a token: ``change`` (``delegation_tokens.renewed`` / ``expired_by``,
    which raise Kafka's refusals) gives its new form, or None to remove it. Returns the new
    expiry timestamp (-1 once removed); DELEGATION_TOKEN_NOT_FOUND when the token is gone."""
    token = image.delegation_tokens.get(token_id)
    if token is None:
        raise DelegationTokenNotFoundError("Delegation Token not found.")
    new = change(token)
    tokens = dict(image.delegation_tokens)
    if new is None:
        del tokens[token_id]
    else:
        tokens[token_id] = new
    return next_image(
        image, delegation_tokens=tokens
    ), -1 if new is None else new.expiry_timestamp_ms


def remove_expired_delegation_tokens(
    image: MetadataImage, now_ms: int
) -> tuple[MetadataImage, list[str]]:
    """Remove every token whose expiry (or maximum) has passed; the ids removed."""
    gone = [t.token_id for t in image.delegation_tokens.values() if t.expired(now_ms)]
    tokens = {i: t for i, t in image.delegation_tokens.items() if i not in gone}
    return next_image(image, delegation_tokens=tokens), gone
