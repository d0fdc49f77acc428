"""The ACL model and authorizer: Kafka's codes, binding validation, filter matching
(DescribeAcls/DeleteAcls) and authorization decisions."""

from __future__ import annotations

import pytest

from gregor.security.acls import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_error,
    filter_error,
)
from gregor.security.authorizer import AclAuthorizer, parse_super_users

Op = AclOperation
T = ResourceType
P = PatternType
ALLOW = AclPermissionType.ALLOW
DENY = AclPermissionType.DENY


def acl(
    name: str = "orders",
    op: AclOperation = Op.READ,
    perm: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = P.LITERAL,
    rtype: ResourceType = T.TOPIC,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(
    *bindings: AclBinding, super_users: str = "", allow_everyone: bool = False
) -> AclAuthorizer:
    acls = tuple(bindings)
    return AclAuthorizer(lambda: acls, parse_super_users(super_users), allow_everyone)


def may(
    a: AclAuthorizer,
    op: AclOperation,
    name: str = "orders",
    principal: str = "User:alice",
    host: str = "10.0.0.1",
    rtype: ResourceType = T.TOPIC,
) -> bool:
    return a.authorize(principal, host, op, rtype, name)


def test_kafka_codes() -> None:
    assert [
        int(t)
        for t in (
            T.UNKNOWN,
            T.ANY,
            T.TOPIC,
            T.GROUP,
            T.CLUSTER,
            T.TRANSACTIONAL_ID,
            T.DELEGATION_TOKEN,
            T.USER,
        )
    ] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert [int(p) for p in (P.UNKNOWN, P.ANY, P.MATCH, P.LITERAL, P.PREFIXED)] == [0, 1, 2, 3, 4]
    assert [int(p) for p in (AclPermissionType.UNKNOWN, AclPermissionType.ANY, DENY, ALLOW)] == [
        0,
        1,
        2,
        3,
    ]
    assert (
        int(Op.ALL),
        int(Op.READ),
        int(Op.WRITE),
        int(Op.CREATE),
        int(Op.DELETE),
        int(Op.ALTER),
        int(Op.DESCRIBE),
        int(Op.CLUSTER_ACTION),
        int(Op.DESCRIBE_CONFIGS),
        int(Op.ALTER_CONFIGS),
        int(Op.IDEMPOTENT_WRITE),
        int(Op.CREATE_TOKENS),
        int(Op.DESCRIBE_TOKENS),
    ) == (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)
    assert T.of(99) is T.UNKNOWN and Op.of(-1) is Op.UNKNOWN and P.of(4) is P.PREFIXED


# --- decisions ---


def test_no_acl_denies_unless_allow_everyone_if_no_acl_found() -> None:
    assert not may(authorizer(), Op.READ)
    assert may(authorizer(allow_everyone=True), Op.READ)
    # Any binding on the resource, for anyone, switches the fallback off for that resource.
    bob_only = acl(principal="User:bob")
    assert not may(authorizer(bob_only, allow_everyone=True), Op.READ)
    assert may(authorizer(bob_only, allow_everyone=True), Op.READ, name="other")


def test_super_users_may_do_anything() -> None:
    a = authorizer(
        acl(op=Op.ALL, perm=DENY, principal="User:*"), super_users="User:admin; User:ops"
    )
    assert may(a, Op.ALTER, principal="User:admin")
    assert may(a, Op.DELETE, principal="User:ops")
    assert not may(a, Op.READ, principal="User:alice")
    assert parse_super_users("User:a;;User:b ") == frozenset({"User:a", "User:b"})


def test_allow_matches_principal_host_and_operation() -> None:
    a = authorizer(acl(host="10.0.0.1"))
    assert may(a, Op.READ)
    assert not may(a, Op.READ, host="10.0.0.2")
    assert not may(a, Op.READ, principal="User:bob")
    assert not may(a, Op.WRITE)
    assert not may(a, Op.READ, rtype=T.GROUP, name="orders")


def test_wildcards_resource_principal_and_all() -> None:
    a = authorizer(acl(name="*", principal="User:*", op=Op.WRITE))
    assert may(a, Op.WRITE, name="anything", principal="User:someone")
    assert not may(a, Op.READ, name="anything")
    everything = authorizer(acl(op=Op.ALL))
    for op in (
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ):
        assert may(everything, op)


def test_prefixed_patterns_match_names_that_start_with_them() -> None:
    a = authorizer(acl(name="pay-", pattern=P.PREFIXED))
    assert may(a, Op.READ, name="pay-eu")
    assert may(a, Op.READ, name="pay-")
    assert not may(a, Op.READ, name="pa")
    assert not may(a, Op.READ, name="xpay-eu")
    # A LITERAL binding is not a prefix.
    assert not may(authorizer(acl(name="pay-")), Op.READ, name="pay-eu")


def test_deny_wins_over_allow() -> None:
    a = authorizer(
        acl(name="*", op=Op.ALL, principal="User:*"),
        acl(name="secret-", pattern=P.PREFIXED, op=Op.READ, perm=DENY),
    )
    assert may(a, Op.READ, name="public")
    assert not may(a, Op.READ, name="secret-x")
    assert may(a, Op.WRITE, name="secret-x")  # the DENY is for READ only
    assert may(a, Op.READ, name="secret-x", principal="User:bob")
    deny_all_from_host = authorizer(acl(op=Op.READ), acl(op=Op.ALL, perm=DENY, host="10.0.0.9"))
    assert may(deny_all_from_host, Op.READ)
    assert not may(deny_all_from_host, Op.READ, host="10.0.0.9")
    deny_everyone = authorizer(acl(op=Op.READ), acl(op=Op.READ, perm=DENY, principal="User:*"))
    assert not may(deny_everyone, Op.READ)


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_read_write_delete_alter_imply_describe(granted: AclOperation) -> None:
    a = authorizer(acl(op=granted))
    assert may(a, Op.DESCRIBE)
    assert not may(a, Op.DESCRIBE_CONFIGS)
    others = {Op.READ, Op.WRITE, Op.DELETE, Op.ALTER} - {granted}
    assert not any(may(a, op) for op in others)


def test_alter_configs_implies_describe_configs_and_nothing_else() -> None:
    a = authorizer(acl(op=Op.ALTER_CONFIGS))
    assert may(a, Op.DESCRIBE_CONFIGS) and may(a, Op.ALTER_CONFIGS)
    assert not may(a, Op.DESCRIBE)
    assert not may(authorizer(acl(op=Op.CREATE)), Op.DESCRIBE)


def test_implication_never_extends_a_deny() -> None:
    a = authorizer(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=DENY))
    assert may(a, Op.DESCRIBE)
    assert not may(a, Op.READ)
    b = authorizer(acl(op=Op.ALTER), acl(op=Op.DESCRIBE, perm=DENY))
    assert not may(b, Op.DESCRIBE)
    assert may(b, Op.ALTER)


@pytest.mark.parametrize(
    "rtype,name,op",
    [
        (T.GROUP, "g1", Op.READ),
        (T.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE),
        (T.TRANSACTIONAL_ID, "tx-1", Op.WRITE),
        (T.DELEGATION_TOKEN, "token-1", Op.DESCRIBE),
        (T.USER, "User:bob", Op.CREATE_TOKENS),
    ],
)
def test_every_resource_type(rtype: ResourceType, name: str, op: AclOperation) -> None:
    a = authorizer(acl(name=name, op=op, rtype=rtype))
    assert may(a, op, name=name, rtype=rtype)
    assert not may(a, op, name=name, rtype=T.TOPIC)


def test_the_index_follows_new_bindings() -> None:
    acls: tuple[AclBinding, ...] = ()
    a = AclAuthorizer(lambda: acls)
    assert not may(a, Op.READ)
    acls = (acl(),)
    assert may(a, Op.READ)
    acls = ()
    assert not may(a, Op.READ)


def test_authorized_operations_lists_the_allowed_ones() -> None:
    a = authorizer(acl(op=Op.WRITE), acl(op=Op.ALTER_CONFIGS))
    ops = [
        Op.READ,
        Op.WRITE,
        Op.CREATE,
        Op.DESCRIBE,
        Op.DELETE,
        Op.ALTER,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ]
    assert a.authorized_operations("User:alice", "10.0.0.1", T.TOPIC, "orders", ops) == [
        Op.WRITE,
        Op.DESCRIBE,
        Op.DESCRIBE_CONFIGS,
        Op.ALTER_CONFIGS,
    ]


def test_from_config() -> None:
    props = {"super.users": "User:admin", "allow.everyone.if.no.acl.found": "true"}
    a = AclAuthorizer.from_config(lambda: (), lambda k, d: props.get(k, d))
    assert a.super_users == {"User:admin"} and a.allow_everyone_if_no_acl_found
    b = AclAuthorizer.from_config(lambda: (), lambda k, d: d)
    assert b.super_users == frozenset() and not b.allow_everyone_if_no_acl_found


# --- validation ---


def test_binding_validation_messages() -> None:
    assert binding_error(acl()) is None
    assert binding_error(acl(rtype=T.ANY)) == "Invalid resourceType ANY"
    assert binding_error(acl(rtype=T.UNKNOWN)) == "Invalid resourceType UNKNOWN"
    assert binding_error(acl(pattern=P.MATCH)) == "Invalid patternType MATCH"
    assert binding_error(acl(op=Op.ANY)) == "Invalid operation ANY"
    assert binding_error(acl(perm=AclPermissionType.ANY)) == "Invalid permissionType ANY"
    assert binding_error(acl(name="")) == "Resource name should not be empty"
    assert binding_error(acl(name="c", rtype=T.CLUSTER)) == (
        "The only valid name for the CLUSTER resource is kafka-cluster"
    )
    assert binding_error(acl(name="kafka-cluster", rtype=T.CLUSTER)) is None
    assert binding_error(acl(principal="alice")) == (
        "Could not parse principal from `alice` (no colon is present separating the principal "
        "type from the principal name)"
    )


def test_filter_validation() -> None:
    assert filter_error(AclBindingFilter()) is None
    assert filter_error(AclBindingFilter(resource_type=T.UNKNOWN)) == "Resource type is UNKNOWN."
    assert (
        filter_error(AclBindingFilter(pattern_type=P.UNKNOWN))
        == "Resource pattern type is UNKNOWN."
    )
    assert filter_error(AclBindingFilter(operation=Op.UNKNOWN)) == "Operation is UNKNOWN."
    assert filter_error(AclBindingFilter(permission_type=AclPermissionType.UNKNOWN)) == (
        "Permission type is UNKNOWN."
    )


# --- filters (DescribeAcls / DeleteAcls) ---

LIT = acl("orders")
WILD = acl("*")
PRE = acl("ord", pattern=P.PREFIXED)
PRE_OTHER = acl("pay", pattern=P.PREFIXED)
GROUP = acl("orders", rtype=T.GROUP)
BOB_DENY = acl("orders", op=Op.WRITE, perm=DENY, principal="User:bob", host="10.0.0.2")
ALL_BINDINGS = [LIT, WILD, PRE, PRE_OTHER, GROUP, BOB_DENY]


def selected(f: AclBindingFilter) -> list[AclBinding]:
    return [b for b in ALL_BINDINGS if f.matches(b)]


def test_the_any_filter_matches_everything() -> None:
    assert selected(AclBindingFilter()) == ALL_BINDINGS


def test_pattern_filters() -> None:
    # ANY pattern type with a name: exact name, any pattern type.
    assert selected(AclBindingFilter(T.TOPIC, "orders", P.ANY)) == [LIT, BOB_DENY]
    assert selected(AclBindingFilter(T.TOPIC, "ord", P.ANY)) == [PRE]
    # LITERAL / PREFIXED: that pattern type and the exact name.
    assert selected(AclBindingFilter(T.TOPIC, "orders", P.LITERAL)) == [LIT, BOB_DENY]
    assert selected(AclBindingFilter(T.TOPIC, "*", P.LITERAL)) == [WILD]
    assert selected(AclBindingFilter(T.TOPIC, "ord", P.PREFIXED)) == [PRE]
    assert selected(AclBindingFilter(T.TOPIC, None, P.PREFIXED)) == [PRE, PRE_OTHER]
    # MATCH: every binding that applies to a resource of that name.
    assert selected(AclBindingFilter(T.TOPIC, "orders", P.MATCH)) == [LIT, WILD, PRE, BOB_DENY]
    assert selected(AclBindingFilter(T.TOPIC, "payments", P.MATCH)) == [WILD, PRE_OTHER]
    assert selected(AclBindingFilter(T.TOPIC, None, P.MATCH)) == [
        LIT,
        WILD,
        PRE,
        PRE_OTHER,
        BOB_DENY,
    ]
    # Resource type.
    assert selected(AclBindingFilter(T.GROUP)) == [GROUP]
    assert selected(AclBindingFilter(T.ANY, "orders", P.LITERAL)) == [LIT, GROUP, BOB_DENY]


def test_entry_filters() -> None:
    assert selected(AclBindingFilter(principal="User:bob")) == [BOB_DENY]
    assert selected(AclBindingFilter(host="10.0.0.2")) == [BOB_DENY]
    assert selected(AclBindingFilter(host="*", permission_type=ALLOW)) == [
        LIT,
        WILD,
        PRE,
        PRE_OTHER,
        GROUP,
    ]
    assert selected(AclBindingFilter(operation=Op.WRITE)) == [BOB_DENY]
    assert selected(AclBindingFilter(permission_type=DENY)) == [BOB_DENY]
    # The filter's operation is matched exactly: ALL in a binding is not "any operation".
    assert selected(AclBindingFilter(operation=Op.ALL)) == []
    assert AclBindingFilter(operation=Op.ALL).matches(acl(op=Op.ALL))
