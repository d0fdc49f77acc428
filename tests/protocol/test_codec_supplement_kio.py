"""Every layout from tools/codegen/supplement.txt, built field by field in kio too and encoded
by both: the bytes must be the same (issue 35).

The supplement describes versions the protocol guide does not carry, from kio's schemas (an
independent implementation generated from Apache Kafka's message definitions). A round trip
(our bytes decoded and re-encoded by kio) cannot see two fields of one layout written in the
wrong order when their sizes add up the same: kio then reads both wrong and writes them back
as it read them. So here the same message is made on both sides from the same values, matched
by field name, and each side encodes its own; kio's decode of our bytes must then give every
field its value too. DescribeShareGroupOffsets v1's response had ``lag`` before
``leader_epoch`` and passed the round trip; it fails here.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import types
import typing
import uuid
from pathlib import Path
from typing import Any

import pytest
from codec_strategies import Options, message_def, message_strategy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.messages import API_BY_NAME
from gregor.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponse

kio_index = pytest.importorskip("kio.schema.index")
from kio.schema.errors import ErrorCode as KioErrorCode  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402
from kio.static.constants import EntityType  # noqa: E402

SPEC = Path(__file__).resolve().parents[2] / "src/gregor/protocol/spec"
OPTIONS = Options(null_arrays=False, unknown_tags=False, small_ints=True)


def _versions(text: str) -> range:
    low, _, high = text.partition("-")
    return range(int(low), int(high or low) + 1)


def supplement_layouts() -> list[tuple[str, str, int]]:
    """(api, request/response, version) of every version the supplement adds."""
    out = []
    for path in sorted(SPEC.glob("*.json")):
        spec = json.loads(path.read_text())
        if "request" not in spec:  # errors.json, index.json
            continue
        for kind in ("request", "response"):
            versions = spec[kind].get("supplement_versions")
            if versions:
                out.extend((spec["name"], kind, v) for v in _versions(versions))
    return out


LAYOUTS = supplement_layouts()


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def kio_class(api: str, kind: str, version: int) -> type:
    from pkgutil import resolve_name

    versions = kio_index.schema_name_map[_snake(api)]
    cls: type = resolve_name(versions[version][EntityType[kind]])
    return cls


def _our_name(f: dataclasses.Field[Any]) -> str:
    # kio turns millisecond durations into timedeltas, and millisecond timestamps
    # (log_append_time) into datetimes, and drops the unit from the name
    kafka_type = f.metadata.get("kafka_type", "")
    if kafka_type.startswith("timedelta") or kafka_type == "datetime_i64":
        return f.name + "_ms"
    return f.name


EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _inner(tp: Any) -> tuple[Any, bool]:
    """The dataclass (or other type) of a field's annotation, and whether it is a tuple."""
    origin = typing.get_origin(tp)
    if origin is tuple:
        return typing.get_args(tp)[0], True
    if origin in (typing.Union, types.UnionType):  # X | None: what X is
        (inner,) = [a for a in typing.get_args(tp) if a is not type(None)]
        return _inner(inner)
    return tp, False


def to_kio(obj: Any, kcls: type) -> Any:
    """The kio entity of ``kcls`` carrying ``obj``'s values, field by field by name."""
    hints = typing.get_type_hints(kcls)
    kwargs = {}
    for f in dataclasses.fields(kcls):
        value = getattr(obj, _our_name(f))
        inner, many = _inner(hints[f.name])
        kafka_type = f.metadata.get("kafka_type", "")
        if dataclasses.is_dataclass(inner):
            convert = lambda v, inner=inner: None if v is None else to_kio(v, inner)  # noqa: E731
        elif kafka_type.startswith("timedelta"):
            convert = lambda v: None if v is None else datetime.timedelta(milliseconds=v)  # noqa: E731
        elif kafka_type == "datetime_i64":  # -1 is "none" on the wire, as kio's None
            convert = lambda v: None if v == -1 else EPOCH + datetime.timedelta(milliseconds=v)  # noqa: E731
        elif kafka_type == "error_code":
            convert = KioErrorCode
        else:
            convert = lambda v: v  # noqa: E731
        kwargs[f.name] = (
            tuple(convert(v) for v in value) if many and value is not None else convert(value)
        )
    return kcls(**kwargs)


def from_kio(entity: Any) -> Any:
    """kio's values as ours: nested dicts by our field names, plain ints and lists."""
    if dataclasses.is_dataclass(entity):
        return {
            _our_name(f): -1
            if f.metadata.get("kafka_type") == "datetime_i64" and getattr(entity, f.name) is None
            else from_kio(getattr(entity, f.name))
            for f in dataclasses.fields(entity)
        }
    if isinstance(entity, datetime.datetime):
        return (entity - EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(entity, tuple):
        return [from_kio(v) for v in entity]
    if isinstance(entity, datetime.timedelta):
        return entity // datetime.timedelta(milliseconds=1)
    if isinstance(entity, KioErrorCode):
        return int(entity)
    if isinstance(entity, uuid.UUID) and entity.int == 0:
        return None  # kio reads the zero UUID as None
    return entity


def ours_as_dict(obj: Any, kcls: type) -> Any:
    """``obj``'s values under kio's fields (the comparison's other side)."""
    return from_kio(to_kio(obj, kcls))


def kio_bytes(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def test_every_supplement_layout_is_listed() -> None:
    names = {(api, kind, v) for api, kind, v in LAYOUTS}
    assert ("DescribeShareGroupOffsets", "response", 1) in names
    assert ("ConsumerGroupHeartbeat", "request", 1) in names
    assert len(LAYOUTS) >= 20
    for api, kind, v in LAYOUTS:  # kio carries each one (else this test would check nothing)
        assert kio_class(api, kind, v) is not None


@pytest.mark.parametrize(
    ("api", "kind", "version"), LAYOUTS, ids=[f"{a}-{k}-v{v}" for a, k, v in LAYOUTS]
)
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_supplement_layout_encodes_as_kio_does(
    api: str, kind: str, version: int, data: st.DataObject
) -> None:
    obj = data.draw(message_strategy(message_def(api, kind), version, OPTIONS))
    kcls = kio_class(api, kind, version)
    ours = obj.encode(version)
    assert kio_bytes(to_kio(obj, kcls)) == ours
    decoded, size = entity_reader(kcls)(ours, 0)
    assert size == len(ours)
    assert from_kio(decoded) == ours_as_dict(obj, kcls)
    info = API_BY_NAME[api]
    cls = info.request if kind == "request" else info.response
    assert cls.decode(ours, version) == obj


def test_describe_share_group_offsets_v1_puts_the_leader_epoch_before_the_lag() -> None:
    # Kafka 4.1's DescribeShareGroupOffsetsResponse.json: partition_index, start_offset,
    # leader_epoch, lag (v1+, default -1), error_code, error_message.
    R = DescribeShareGroupOffsetsResponse
    P = R.Groups.Topics.Partitions
    resp = R(
        throttle_time_ms=0,
        groups=[
            R.Groups(
                group_id="g",
                error_code=0,
                error_message=None,
                topics=[
                    R.Groups.Topics(
                        topic_name="t",
                        topic_id=uuid.UUID(int=1),
                        partitions=[
                            P(
                                partition_index=2,
                                start_offset=10,
                                leader_epoch=7,
                                lag=5,
                                error_code=0,
                                error_message=None,
                            )
                        ],
                    )
                ],
            )
        ],
    )
    partition = (
        (2).to_bytes(4, "big")
        + (10).to_bytes(8, "big")
        + (7).to_bytes(4, "big")
        + (5).to_bytes(8, "big")
    )
    assert partition + b"\x00\x00\x00\x00" in resp.encode(1)
    assert P().lag == -1
