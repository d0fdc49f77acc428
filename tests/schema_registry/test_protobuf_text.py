"""Protobuf schemas registered as descriptors are stored as ``.proto`` text printed from the
descriptor (``print_proto``): the printed text must compile back to the same descriptor, for
each construct the printer knows."""

from __future__ import annotations

import base64

import pytest

from gregor.schema_registry.formats.base import Dependency
from gregor.schema_registry.formats.protobuf import ProtobufSchema, print_proto

FILES = {
    "proto3 scalars, repeated, optional, map, nested, enum, oneof, reserved": """
syntax = "proto3";
package acme.shop;
option java_package = "com.acme.shop";
option go_package = "acme/shop";
message Order {
  string id = 1;
  repeated int64 lines = 2;
  optional double discount = 3;
  map<string, Item> items = 4;
  Status status = 5;
  oneof payment {
    string card = 6;
    bytes token = 7;
  }
  message Item {
    sint32 qty = 1;
    fixed64 sku = 2;
  }
  enum Status {
    NEW = 0;
    PAID = 1;
  }
  reserved 10, 12 to 15;
  reserved "old";
}
enum Region {
  option allow_alias = true;
  EU = 0;
  EUROPE = 0;
  US = 1;
}
service Shop {
  rpc Place(Order) returns (Order);
  rpc Watch(stream Order) returns (stream Order);
}
""",
    "proto2 required, defaults, packed": """
syntax = "proto2";
package legacy;
message Reading {
  required string sensor = 1;
  optional int32 value = 2 [default = -7];
  optional string unit = 3 [default = "c\\"el"];
  repeated int32 samples = 4 [packed = true];
  optional bool ok = 5 [default = true];
}
""",
    "a well-known type import": """
syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Event {
  google.protobuf.Timestamp at = 1;
}
""",
}


@pytest.mark.parametrize("text", list(FILES.values()), ids=list(FILES))
def test_printed_text_compiles_to_the_same_descriptor(text: str) -> None:
    compiled = ProtobufSchema.parse(text).file
    printed = print_proto(compiled)
    again = ProtobufSchema.parse(printed).file
    assert again == compiled, printed


def test_a_descriptor_is_stored_as_text_and_served_serialized() -> None:
    text = FILES["proto3 scalars, repeated, optional, map, nested, enum, oneof, reserved"]
    fdp = ProtobufSchema.parse(text).file
    encoded = base64.b64encode(fdp.SerializeToString()).decode()
    from_descriptor = ProtobufSchema.parse(encoded)
    assert (
        "message Order {" in from_descriptor.canonical()
        and "map<string, .acme.shop.Order.Item> items = 4;" in (from_descriptor.canonical())
    )
    assert ProtobufSchema.parse(from_descriptor.canonical()).file == fdp
    served = ProtobufSchema.parse(from_descriptor.canonical()).formatted("serialized")
    assert base64.b64decode(served) == fdp.SerializeToString(deterministic=True)


def test_imports_resolve_to_references_by_name() -> None:
    common = 'syntax = "proto3";\npackage c;\nmessage Money { int64 units = 1; }\n'
    order = 'syntax = "proto3";\nimport "c/money.proto";\nmessage Order { c.Money price = 1; }\n'
    parsed = ProtobufSchema.parse(order, (Dependency("c/money.proto", "PROTOBUF", common),))
    assert list(parsed.file.dependency) == ["c/money.proto"]
    assert parsed.file.message_type[0].field[0].type_name == ".c.Money"
    with pytest.raises(ValueError, match="relative .proto path"):
        ProtobufSchema.parse(order, (Dependency("../../etc/x.proto", "PROTOBUF", common),))
