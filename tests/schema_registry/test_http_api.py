"""Every endpoint of the REST API over raw HTTP, with Confluent's content type, answers and
error codes, against a registry on a real in-process broker."""

from __future__ import annotations

import json
from urllib.parse import quote

from .conftest import CT, Registry, avro_record

V1 = avro_record("com.example.User", ("name", "string"))
V2 = avro_record("com.example.User", ("name", "string"), ("age", "int", 0))
V3_BAD = avro_record("com.example.User", ("name", "string"), ("email", "string"))


def register(reg: Registry, subject: str, schema: str, **extra: object) -> int:
    reply = reg.post(f"/subjects/{quote(subject, safe='')}/versions", {"schema": schema, **extra})
    assert reply.status == 200, reply.text
    return int(reply.body["id"])


def test_root_types_and_content_type(registry: Registry) -> None:
    reply = registry.get("/")
    assert reply.status == 200 and reply.body == {}
    assert reply.headers["Content-Type"] == CT
    assert registry.get("/schemas/types").body == ["JSON", "PROTOBUF", "AVRO"]
    missing = registry.get("/subjects/nope/versions")
    assert missing.headers["Content-Type"] == CT and missing.body["error_code"] == 40401


def test_register_lookup_and_read_back(registry: Registry) -> None:
    reply = registry.post("/subjects/users-value/versions", {"schema": V1})
    assert reply.status == 200 and reply.body == {"id": 1, "version": 1}
    # the same schema again: the same id and version, nothing new written
    assert registry.post("/subjects/users-value/versions", {"schema": V1}).body == {
        "id": 1,
        "version": 1,
    }
    assert registry.post("/subjects/users-value/versions", {"schema": V2}).body == {
        "id": 2,
        "version": 2,
    }
    # the same schema under another subject keeps its id
    assert registry.post("/subjects/other/versions", {"schema": V2, "schemaType": "AVRO"}).body == {
        "id": 2,
        "version": 1,
    }
    got = registry.get("/subjects/users-value/versions/1").body
    assert got == {
        "subject": "users-value",
        "version": 1,
        "id": 1,
        "schema": json.dumps(json.loads(V1), separators=(",", ":")),
    }
    assert registry.get("/subjects/users-value/versions/latest").body["version"] == 2
    assert registry.get("/subjects/users-value/versions/-1").body["version"] == 2
    assert json.loads(registry.get("/subjects/users-value/versions/2/schema").text) == json.loads(
        V2
    )
    assert registry.get("/subjects/users-value/versions").body == [1, 2]
    assert registry.get("/subjects").body == ["other", "users-value"]
    assert registry.get("/subjects?subjectPrefix=us").body == ["users-value"]
    by_id = registry.get("/schemas/ids/2").body
    assert json.loads(by_id["schema"]) == json.loads(V2) and "schemaType" not in by_id
    assert json.loads(registry.get("/schemas/ids/1/schema").text) == json.loads(V1)
    assert registry.get("/schemas/ids/2/subjects").body == ["other", "users-value"]
    assert registry.get("/schemas/ids/2/versions").body == [
        {"subject": "other", "version": 1},
        {"subject": "users-value", "version": 2},
    ]
    assert registry.get("/schemas/ids/2?fetchMaxId=true").body["maxId"] == 2
    found = registry.post("/subjects/users-value", {"schema": V1}).body
    assert (found["subject"], found["version"], found["id"]) == ("users-value", 1, 1)
    listed = registry.get("/schemas").body
    assert [(s["subject"], s["version"], s["id"]) for s in listed] == [
        ("other", 1, 2),
        ("users-value", 1, 1),
        ("users-value", 2, 2),
    ]
    assert [
        (s["subject"], s["version"]) for s in registry.get("/schemas?latestOnly=true").body
    ] == [("other", 1), ("users-value", 2)]
    assert registry.get("/subjects/users-value/versions?offset=1&limit=1").body == [2]
    assert registry.get("/contexts").body == ["."]


def test_not_found_errors(registry: Registry) -> None:
    register(registry, "s", V1)
    cases = [
        ("/subjects/nope/versions", 40401),
        ("/subjects/nope/versions/1", 40401),
        ("/subjects/s/versions/9", 40402),
        ("/schemas/ids/99", 40403),
        ("/schemas/ids/99/subjects", 40403),
        ("/schemas/ids/abc", 40403),
        ("/config/s", 40408),
        ("/mode/s", 40409),
        ("/subjects/s/versions/9/referencedby", 40402),
    ]
    for path, code in cases:
        reply = registry.get(path)
        assert (reply.status, reply.body["error_code"]) == (404, code), (path, reply.text)
        assert isinstance(reply.body["message"], str) and reply.body["message"]
    lookup = registry.post("/subjects/s", {"schema": V2})
    assert (lookup.status, lookup.body["error_code"]) == (404, 40403)
    lookup = registry.post("/subjects/nope", {"schema": V2})
    assert (lookup.status, lookup.body["error_code"]) == (404, 40401)
    unknown = registry.get("/no/such/path")
    assert (unknown.status, unknown.body["error_code"]) == (404, 404)
    wrong_method = registry.call("PATCH", "/subjects")
    assert (wrong_method.status, wrong_method.body["error_code"]) == (405, 405)


def test_invalid_input_errors(registry: Registry) -> None:
    register(registry, "s", V1)
    for version in ("0", "abc", "2147483648", "-2", "1.5"):
        reply = registry.get(f"/subjects/s/versions/{version}")
        assert (reply.status, reply.body["error_code"]) == (422, 42202), (version, reply.text)
    bad_schemas = [
        {"schema": "{not json"},
        {"schema": '{"type": "record", "name": "R"}'},
        {"schema": V1, "schemaType": "XML"},
        {"schema": 5},
        {},
        {"schema": V1, "references": "x"},
        {"schema": V1, "references": [{"name": "a", "subject": "missing", "version": 1}]},
        {"schema": '{"type": "strin"}', "schemaType": "JSON"},
    ]
    for body in bad_schemas:
        reply = registry.post("/subjects/t/versions", body)
        assert (reply.status, reply.body["error_code"]) == (422, 42201), (body, reply.text)
    not_json = registry.call("POST", "/subjects/t/versions", raw=b"{oops")
    assert (not_json.status, not_json.body["error_code"]) == (400, 400)
    not_object = registry.call("POST", "/subjects/t/versions", raw=b"[1]")
    assert (not_object.status, not_object.body["error_code"]) == (422, 422)
    too_big = registry.call("POST", "/subjects/t/versions", raw=b" " * (16 * 1024 * 1024 + 1))
    assert (too_big.status, too_big.body["error_code"]) == (413, 413)
    bad_level = registry.put("/config", {"compatibility": "SIDEWAYS"})
    assert (bad_level.status, bad_level.body["error_code"]) == (422, 42203)
    bad_mode = registry.put("/mode", {"mode": "WRITEONLY"})
    assert (bad_mode.status, bad_mode.body["error_code"]) == (422, 42204)
    control = registry.get("/subjects/a%01b/versions")
    assert (control.status, control.body["error_code"]) == (422, 42208)
    # nothing of the above reached the topic
    assert registry.get("/subjects").body == ["s"]


def test_incompatible_schema_is_409_and_verbose_says_why(registry: Registry) -> None:
    register(registry, "s", V1)
    reply = registry.post("/subjects/s/versions", {"schema": V3_BAD})
    assert (reply.status, reply.body["error_code"]) == (409, 409)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in reply.body["message"]
    check = registry.post(
        "/compatibility/subjects/s/versions/latest?verbose=true", {"schema": V3_BAD}
    )
    assert check.status == 200 and check.body["is_compatible"] is False
    assert any(
        "READER_FIELD_MISSING_DEFAULT_VALUE" in m and "'email'" in m for m in check.body["messages"]
    )
    assert "{compatibility: 'BACKWARD'}" in check.body["messages"]
    assert registry.post("/compatibility/subjects/s/versions/1", {"schema": V2}).body == {
        "is_compatible": True
    }
    assert registry.post("/compatibility/subjects/s/versions", {"schema": V2}).body == {
        "is_compatible": True
    }
    assert registry.post("/compatibility/subjects/new/versions", {"schema": V3_BAD}).body == {
        "is_compatible": True
    }
    missing = registry.post("/compatibility/subjects/nope/versions/latest", {"schema": V2})
    assert (missing.status, missing.body["error_code"]) == (404, 40401)
    missing = registry.post("/compatibility/subjects/s/versions/7", {"schema": V2})
    assert (missing.status, missing.body["error_code"]) == (404, 40402)


def test_transitive_levels_check_every_version(registry: Registry) -> None:
    one = avro_record("R", ("a", "string"))
    two = avro_record("R", ("a", "string"), ("b", "string", "x"))
    three = avro_record("R", ("a", "string"), ("b", "string"))  # reads two, not one
    assert registry.put("/config/t", {"compatibility": "BACKWARD_TRANSITIVE"}).body == {
        "compatibility": "BACKWARD_TRANSITIVE"
    }
    register(registry, "t", one)
    register(registry, "t", two)
    assert registry.post("/subjects/t/versions", {"schema": three}).status == 409
    assert registry.put("/config/t", {"compatibility": "backward"}).body == {
        "compatibility": "BACKWARD"
    }
    assert registry.post("/subjects/t/versions", {"schema": three}).body == {"id": 3, "version": 3}


def test_levels_matrix_through_the_api(registry: Registry) -> None:
    old = avro_record("R", ("a", "int"))
    added_no_default = avro_record("R", ("a", "int"), ("b", "int"))
    promoted = avro_record("R", ("a", "long"))
    expectations = {  # level: (added_no_default accepted, promoted accepted)
        "NONE": (True, True),
        "BACKWARD": (False, True),
        "FORWARD": (True, False),
        "FULL": (False, False),
    }
    for level, (added_ok, promoted_ok) in expectations.items():
        subject = f"m-{level}"
        assert registry.put(f"/config/{subject}", {"compatibility": level}).status == 200
        register(registry, subject, old)
        for schema, ok in ((added_no_default, added_ok), (promoted, promoted_ok)):
            reply = registry.post(
                f"/compatibility/subjects/{subject}/versions/latest", {"schema": schema}
            )
            assert reply.body["is_compatible"] is ok, (level, schema)


def test_config_global_and_per_subject(registry: Registry) -> None:
    assert registry.get("/config").body == {"compatibilityLevel": "BACKWARD"}
    assert registry.put("/config", {"compatibility": "FULL"}).body == {"compatibility": "FULL"}
    assert registry.get("/config").body == {"compatibilityLevel": "FULL"}
    register(registry, "s", V1)
    assert registry.get("/config/s?defaultToGlobal=true").body == {"compatibilityLevel": "FULL"}
    assert registry.put("/config/s", {"compatibility": "NONE"}).body == {"compatibility": "NONE"}
    assert registry.get("/config/s").body == {"compatibilityLevel": "NONE"}
    assert registry.delete("/config/s").body == {"compatibilityLevel": "NONE"}
    assert registry.get("/config/s").body["error_code"] == 40408
    assert registry.delete("/config").body == {"compatibilityLevel": "FULL"}
    assert registry.get("/config").body == {"compatibilityLevel": "BACKWARD"}
    assert registry.delete("/config/nope").body["error_code"] == 40401


def test_mode_global_and_per_subject(registry: Registry) -> None:
    assert registry.get("/mode").body == {"mode": "READWRITE"}
    register(registry, "s", V1)
    assert registry.put("/mode/s", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    assert registry.get("/mode/s").body == {"mode": "READONLY"}
    refused = registry.post("/subjects/s/versions", {"schema": V2})
    assert (refused.status, refused.body["error_code"]) == (422, 42205)
    refused = registry.delete("/subjects/s")
    assert (refused.status, refused.body["error_code"]) == (422, 42205)
    assert registry.delete("/mode/s").body == {"mode": "READONLY"}
    assert registry.get("/mode/s?defaultToGlobal=true").body == {"mode": "READWRITE"}
    # IMPORT needs an empty registry unless forced
    refused = registry.put("/mode", {"mode": "IMPORT"})
    assert (refused.status, refused.body["error_code"]) == (422, 42205)
    assert registry.put("/mode?force=true", {"mode": "IMPORT"}).body == {"mode": "IMPORT"}
    imported = registry.post(
        "/subjects/imported/versions", {"schema": V3_BAD, "id": 100, "version": 7}
    )
    assert imported.body == {"id": 100, "version": 7}
    assert registry.get("/subjects/imported/versions/7").body["id"] == 100
    clash = registry.post("/subjects/x/versions", {"schema": V1, "id": 100, "version": 1})
    assert (clash.status, clash.body["error_code"]) == (422, 42205)
    assert registry.put("/mode", {"mode": "READWRITE"}).body == {"mode": "READWRITE"}
    given_id = registry.post("/subjects/x/versions", {"schema": V1, "id": 5})
    assert (given_id.status, given_id.body["error_code"]) == (422, 42205)
    # ids go on past the imported one
    assert register(registry, "later", avro_record("Later", ("z", "int"))) == 101


def test_soft_and_permanent_deletes(registry: Registry) -> None:
    register(registry, "s", V1)
    register(registry, "s", V2)
    # a permanent delete needs a soft one first
    refused = registry.delete("/subjects/s/versions/1?permanent=true")
    assert (refused.status, refused.body["error_code"]) == (404, 40407)
    assert registry.delete("/subjects/s/versions/1").body == 1
    again = registry.delete("/subjects/s/versions/1")
    assert (again.status, again.body["error_code"]) == (404, 40406)
    assert registry.get("/subjects/s/versions").body == [2]
    assert registry.get("/subjects/s/versions?deleted=true").body == [1, 2]
    assert registry.get("/subjects/s/versions/1").body["error_code"] == 40402
    assert registry.get("/subjects/s/versions/1?deleted=true").body["version"] == 1
    assert registry.get("/schemas/ids/1").status == 200  # a soft-deleted schema still decodes
    assert registry.get("/schemas/ids/1/subjects").body == []
    assert registry.get("/schemas/ids/1/subjects?deleted=true").body == ["s"]
    refused = registry.delete("/subjects/s?permanent=true")
    assert (refused.status, refused.body["error_code"]) == (404, 40405)
    assert registry.delete("/subjects/s").body == [2]
    again = registry.delete("/subjects/s")
    assert (again.status, again.body["error_code"]) == (404, 40404)
    assert registry.get("/subjects").body == []
    assert registry.get("/subjects?deleted=true").body == ["s"]
    assert registry.get("/subjects?deletedOnly=true").body == ["s"]
    assert registry.get("/subjects/s/versions").body["error_code"] == 40401
    # re-registering a soft-deleted schema: a new version, the same id
    assert registry.post("/subjects/s/versions", {"schema": V1}).body == {"id": 1, "version": 3}
    assert registry.delete("/subjects/s/versions/3").body == 3
    assert registry.delete("/subjects/s?permanent=true").body == [1, 2, 3]
    assert registry.get("/subjects?deleted=true").body == []
    assert registry.get("/schemas/ids/1").body["error_code"] == 40403
    assert registry.delete("/subjects/s").body["error_code"] == 40401


def test_references_and_referencedby(registry: Registry) -> None:
    address = json.dumps(
        {
            "type": "record",
            "name": "Address",
            "namespace": "com.example",
            "fields": [{"name": "city", "type": "string"}],
        }
    )
    aid = register(registry, "address", address)
    person = json.dumps(
        {
            "type": "record",
            "name": "Person",
            "namespace": "com.example",
            "fields": [{"name": "home", "type": "com.example.Address"}],
        }
    )
    refs = [{"name": "com.example.Address", "subject": "address", "version": 1}]
    without = registry.post("/subjects/person/versions", {"schema": person})
    assert (without.status, without.body["error_code"]) == (422, 42201)
    pid = register(registry, "person", person, references=refs)
    assert pid != aid
    got = registry.get("/subjects/person/versions/1").body
    assert got["references"] == refs
    assert registry.get(f"/schemas/ids/{pid}").body["references"] == refs
    assert registry.get("/subjects/address/versions/1/referencedby").body == [pid]
    refused = registry.delete("/subjects/address/versions/1")
    assert (refused.status, refused.body["error_code"]) == (422, 42206)
    refused = registry.delete("/subjects/address")
    assert (refused.status, refused.body["error_code"]) == (422, 42206)
    found = registry.post("/subjects/person", {"schema": person, "references": refs}).body
    assert found["id"] == pid


def test_normalize(registry: Registry) -> None:
    spaced = '{ "type" : "record", "namespace": "n", "name" : "R", "fields" : [ {"name":"a","type":{"type":"int"}} ] }'
    same = '{"name":"n.R","type":"record","fields":[{"type":"int","name":"a"}]}'
    first = registry.post("/subjects/s/versions?normalize=true", {"schema": spaced}).body
    assert registry.post("/subjects/s/versions?normalize=true", {"schema": same}).body == first
    assert registry.post("/subjects/s?normalize=true", {"schema": same}).body["id"] == first["id"]
    assert registry.post("/subjects/s", {"schema": same}).status == 404  # not without normalize
    stored = json.loads(registry.get("/subjects/s/versions/1").body["schema"])
    assert stored == {"fields": [{"name": "a", "type": "int"}], "name": "n.R", "type": "record"}


def test_json_schema_and_protobuf_register(registry: Registry) -> None:
    js = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    reply = registry.post("/subjects/j/versions", {"schema": js, "schemaType": "JSON"})
    assert reply.body == {"id": 1, "version": 1}
    assert registry.get("/subjects/j/versions/1").body["schemaType"] == "JSON"
    proto = 'syntax = "proto3";\npackage acme;\nmessage Order { string id = 1; }\n'
    reply = registry.post("/subjects/p/versions", {"schema": proto, "schemaType": "PROTOBUF"})
    assert reply.body == {"id": 2, "version": 1}
    got = registry.get("/schemas/ids/2").body
    assert got["schemaType"] == "PROTOBUF" and got["schema"] == proto
    serialized = registry.get("/schemas/ids/2?format=serialized").body["schema"]
    from base64 import b64decode

    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.ParseFromString(b64decode(serialized))
    assert fdp.package == "acme" and [m.name for m in fdp.message_type] == ["Order"]
    bad = registry.post(
        "/subjects/p/versions",
        {"schema": proto.replace("string id", "int32 id"), "schemaType": "PROTOBUF"},
    )
    assert (bad.status, bad.body["error_code"]) == (409, 409)


def test_subject_names_with_slashes_and_unicode(registry: Registry) -> None:
    for subject in ("a/b", "ünï", ":.ctx:orders"):
        register(registry, subject, V1)
        assert registry.get(f"/subjects/{quote(subject, safe='')}/versions").body == [1], subject
    assert sorted(registry.get("/subjects").body) == sorted([":.ctx:orders", "a/b", "ünï"])
    assert registry.get("/contexts").body == [".", ".ctx"]


def test_hostile_bodies_never_answer_a_traceback(registry: Registry) -> None:
    bodies = [
        b"\xff\xfe\x00",
        b'{"schema": "' + b"[" * 100000 + b'"}',
        b'{"schema": null}',
        b'{"schema": "\\"int\\"", "id": true}',
        b'{"schema": "\\"int\\"", "version": "1"}',
        b'{"schema": "\\"int\\"", "references": [{"name": "x", "subject": "y", "version": "z"}]}',
        b"[" * 100000,
    ]
    for raw in bodies:
        reply = registry.call("POST", "/subjects/h/versions", raw=raw)
        assert reply.status in (400, 422), (raw[:40], reply.status, reply.text[:300])
        assert "Traceback" not in reply.text and isinstance(reply.body["error_code"], int)
    assert registry.get("/subjects").body == []


def test_json_schema_references(registry: Registry) -> None:
    address = json.dumps(
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    )
    registry.post("/subjects/address-json/versions", {"schema": address, "schemaType": "JSON"})
    person = json.dumps({"type": "object", "properties": {"home": {"$ref": "address.json"}}})
    refs = [{"name": "address.json", "subject": "address-json", "version": 1}]
    reply = registry.post(
        "/subjects/person-json/versions",
        {"schema": person, "schemaType": "JSON", "references": refs},
    )
    assert reply.status == 200, reply.text
    assert registry.get("/subjects/address-json/versions/1/referencedby").body == [reply.body["id"]]
    wrong_type = registry.post(
        "/subjects/wrong/versions",
        {
            "schema": person,
            "schemaType": "JSON",
            "references": [{"name": "a", "subject": "address-json", "version": 2}],
        },
    )
    assert (wrong_type.status, wrong_type.body["error_code"]) == (422, 42201)
    unresolved = registry.post(
        "/subjects/person-json/versions", {"schema": person, "schemaType": "JSON"}
    )
    assert (unresolved.status, unresolved.body["error_code"]) == (422, 42201)
    assert "address.json" in unresolved.body["message"]
    dangling = json.dumps(
        {"type": "object", "properties": {"a": {"$ref": "#/definitions/nowhere"}}}
    )
    reply = registry.post("/subjects/dangling/versions", {"schema": dangling, "schemaType": "JSON"})
    assert (reply.status, reply.body["error_code"]) == (422, 42201)
