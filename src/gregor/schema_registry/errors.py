"""The registry's errors: an HTTP status and Confluent's error code, answered as
``{"error_code": ..., "message": ...}``.

The codes are those of Confluent's Schema Registry API: 404xx for what is not there, 409 for an
incompatible schema, 422xx for input the registry refuses, 500xx for the store
and for writes no writer can take (50003 forwarding failed, 50004 leader not known).
"""

from __future__ import annotations


class RegistryError(Exception):
    """An answer other than success: ``status`` (HTTP) and ``code`` (Confluent's error code)."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(what: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, what)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404, 40405, f"Subject '{subject}' was not deleted first before being permanently deleted"
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently deleted",
    )


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def incompatible(messages: list[str]) -> RegistryError:
    detail = "; ".join(messages)
    return RegistryError(
        409,
        409,
        f"Schema being registered is incompatible with an earlier schema for subject; {detail}",
    )


def invalid_schema(why: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema: {why}")


def invalid_version(version: str) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. "
        'Allowed values are between [1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level. Valid values are none, backward, forward, full, "
        f"backward_transitive, forward_transitive, and full_transitive (got {level!r})",
    )


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(
        422,
        42204,
        f"Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT (got {mode!r})",
    )


def operation_not_permitted(why: str) -> RegistryError:
    return RegistryError(422, 42205, why)


def reference_exists(why: str) -> RegistryError:
    return RegistryError(422, 42206, why)


def unprocessable(why: str) -> RegistryError:
    """A request whose JSON is well formed but whose fields are not (Jersey's 422)."""
    return RegistryError(422, 422, why)


def bad_request(why: str) -> RegistryError:
    return RegistryError(400, 400, why)


def store_error(why: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error in the backend data store: {why}")


def store_timeout(why: str) -> RegistryError:
    return RegistryError(500, 50002, f"Write to the Kafka store timed out: {why}")


def forwarding_failed(why: str) -> RegistryError:
    """A non-writer could not get the writer's answer to a forwarded write."""
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader: {why}")


def unknown_leader(
    why: str = "no writer is elected (a rebalance is in progress, or no registry is eligible)",
) -> RegistryError:
    """A write that no registry can take now: Confluent's 'unknown leader'."""
    return RegistryError(500, 50004, f"Leader not known: {why}")
