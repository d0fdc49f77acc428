"""``gregor schemas``: each verb against a real registry on an in-process broker, its result
checked through the registry's REST API (not through the command's own output alone)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gregor.testing.cli import run_command
from gregor.testing.ports import free_port

from .conftest import Registry, avro_record

V1 = avro_record("Order", ("id", "long"))
V2 = avro_record("Order", ("id", "long"), ("note", "string", ""))
V_BAD = avro_record("Order", ("id", "string"))


def schemas(registry: Registry, *args: str, input: str | None = None) -> tuple[int, str, str]:  # noqa: A002
    return run_command(None, "schemas", *args, "--registry", registry.url, input=input)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_register_list_describe(registry: Registry, tmp_path: Path) -> None:
    code, out, err = schemas(registry, "register", "orders-value", write(tmp_path, "o.avsc", V1))
    assert code == 0, err
    sid = registry.get("/subjects/orders-value/versions/1").body["id"]
    assert out.strip() == f"Registered orders-value: schema id {sid}"

    code, out, _ = schemas(
        registry, "register", "orders-value", write(tmp_path, "o2.avsc", V2), "--output", "json"
    )
    assert code == 0
    second = json.loads(out)
    assert second == {
        "result": "ok",
        "subject": "orders-value",
        "id": registry.get("/subjects/orders-value/versions/2").body["id"],
    }
    assert second["id"] != sid

    code, out, _ = schemas(registry, "register", "payments-value", "-", input=V1)
    assert code == 0
    # The same schema under another subject keeps its id.
    assert out.strip() == f"Registered payments-value: schema id {sid}"

    code, out, _ = schemas(registry, "list")
    assert code == 0
    assert out.split() == ["orders-value", "payments-value"]
    code, out, _ = schemas(registry, "list", "--prefix", "pay", "--output", "json")
    assert json.loads(out) == {"subjects": ["payments-value"]}

    code, out, _ = schemas(registry, "describe", "orders-value", "--output", "json")
    described = json.loads(out)
    assert described["versions"] == [1, 2]
    assert described["version"] == 2
    assert json.loads(described["schema"]) == json.loads(V2)
    code, out, _ = schemas(registry, "describe", "orders-value", "--version", "1")
    assert code == 0
    lines = out.splitlines()
    assert lines[:3] == [
        "Subject: orders-value",
        "Versions: 1, 2",
        f"Version: 1  Id: {sid}  Type: AVRO",
    ]
    assert json.loads("\n".join(lines[3:])) == json.loads(V1)


@pytest.mark.process  # the registry compiles .proto text with grpcio-tools' protoc
def test_protobuf_with_a_reference(registry: Registry, tmp_path: Path) -> None:
    common = 'syntax = "proto3";\npackage shop;\nmessage Money { int64 cents = 1; }\n'
    order = (
        'syntax = "proto3";\npackage shop;\nimport "money.proto";\n'
        "message Order { Money total = 1; }\n"
    )
    code, _, err = schemas(registry, "register", "money", write(tmp_path, "money.proto", common))
    assert code == 0, err
    code, _, err = schemas(
        registry,
        "register",
        "order-value",
        write(tmp_path, "order.proto", order),
        "--reference",
        "money.proto=money:1",
    )
    assert code == 0, err
    got = registry.get("/subjects/order-value/versions/1").body
    assert got["schemaType"] == "PROTOBUF"
    assert got["references"] == [{"name": "money.proto", "subject": "money", "version": 1}]
    code, _, err = schemas(
        registry, "register", "x", write(tmp_path, "x.proto", order), "--reference", "money"
    )
    assert code == 2 and "NAME=SUBJECT:VERSION" in err


def test_compatibility(registry: Registry, tmp_path: Path) -> None:
    assert schemas(registry, "register", "c-value", write(tmp_path, "v1.avsc", V1))[0] == 0
    code, out, _ = schemas(registry, "compatibility", "c-value", write(tmp_path, "v2.avsc", V2))
    assert (code, out.strip()) == (0, "compatible")
    code, out, _ = schemas(
        registry,
        "compatibility",
        "c-value",
        write(tmp_path, "bad.avsc", V_BAD),
        "--verbose",
        "--output",
        "json",
    )
    assert code == 1
    answer = json.loads(out)
    assert answer["is_compatible"] is False and answer["messages"]
    # With NONE the same schema passes.
    assert schemas(registry, "config", "c-value", "--set", "none")[0] == 0
    assert registry.get("/config/c-value").body == {"compatibilityLevel": "NONE"}
    code, out, _ = schemas(registry, "compatibility", "c-value", str(tmp_path / "bad.avsc"))
    assert (code, out.strip()) == (0, "compatible")


def test_config_and_mode(registry: Registry, tmp_path: Path) -> None:
    code, out, _ = schemas(registry, "config")
    assert (code, out.strip()) == (0, "global: BACKWARD")
    assert schemas(registry, "config", "--set", "FULL_TRANSITIVE")[0] == 0
    assert registry.get("/config").body == {"compatibilityLevel": "FULL_TRANSITIVE"}
    code, out, _ = schemas(registry, "config", "s-value", "--output", "json")
    assert json.loads(out) == {"subject": "s-value", "compatibility": "FULL_TRANSITIVE"}
    assert schemas(registry, "config", "--delete")[0] == 0
    assert registry.get("/config").body == {"compatibilityLevel": "BACKWARD"}
    code, _, err = schemas(registry, "config", "--set", "FULL", "--delete")
    assert code == 2 and "not both" in err

    assert schemas(registry, "mode", "s-value", "--set", "readonly")[0] == 0
    assert registry.get("/mode/s-value").body == {"mode": "READONLY"}
    code, _, err = schemas(registry, "register", "s-value", write(tmp_path, "s.avsc", V1))
    assert code == 1
    assert err.strip().endswith("(error 42205)"), err
    assert len(err.strip().splitlines()) == 1
    assert registry.get("/subjects/s-value/versions").status == 404
    assert schemas(registry, "mode", "s-value", "--delete")[0] == 0
    code, out, _ = schemas(registry, "mode", "s-value")
    assert out.strip() == "s-value: READWRITE"
    assert schemas(registry, "register", "s-value", str(tmp_path / "s.avsc"))[0] == 0


def test_delete_soft_then_permanent(registry: Registry, tmp_path: Path) -> None:
    assert schemas(registry, "register", "d-value", write(tmp_path, "1.avsc", V1))[0] == 0
    assert schemas(registry, "register", "d-value", write(tmp_path, "2.avsc", V2))[0] == 0
    code, out, _ = schemas(registry, "delete", "d-value", "--version", "1")
    assert (code, out.strip()) == (0, "d-value version 1: deleted (versions 1)")
    assert registry.get("/subjects/d-value/versions").body == [2]
    code, _, err = schemas(registry, "delete", "d-value", "--permanent")
    assert code == 1 and "(error 40405)" in err  # Confluent's rule: soft delete first
    code, out, _ = schemas(registry, "delete", "d-value", "--output", "json")
    assert json.loads(out) == {
        "result": "ok",
        "subject": "d-value",
        "versions": [2],
        "permanent": False,
    }
    assert schemas(registry, "list")[1].split() == []
    assert schemas(registry, "list", "--deleted")[1].split() == ["d-value"]
    code, _, _ = schemas(registry, "delete", "d-value", "--permanent")
    assert code == 0
    assert schemas(registry, "list", "--deleted")[1].split() == []


def test_unreachable_and_bad_arguments(registry: Registry, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    code, _, err = run_command(None, "schemas", "list", "--registry", url)
    assert code == 1
    assert err.startswith(f"Error: cannot reach the schema registry at {url}:")
    code, _, err = run_command(None, "schemas", "list", "--registry", "ftp://x")
    assert code == 2 and "not an http:// or https:// URL" in err
    code, _, err = schemas(registry, "register", "e-value", str(tmp_path / "missing.avsc"))
    assert code == 1 and "cannot read" in err
    code, _, err = schemas(registry, "register", "e-value", "-", input="  ")
    assert code == 1 and "standard input holds no schema" in err
    code, _, err = schemas(registry, "register", "e-value", "-", input="{not json")
    assert code == 1 and "(error 42201)" in err
    code, _, err = schemas(registry, "describe", "nope-value")
    assert code == 1 and "(error 40401)" in err
    code, _, err = schemas(registry, "describe", "e-value", "--version", "two")
    assert code == 2 and "a version number or 'latest'" in err
