"""Cross-check against kafka-python's protocol package (kafka.protocol, JSON-schema driven).

For every API and version both describe: kafka-python decodes our bytes, its re-encoding is
byte-identical, and our decode of its bytes equals the original. Also a few messages built
with kafka-python's own constructors decode in ours to the expected values.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import uuid

import pytest
from codec_strategies import Options, all_messages, message_def, message_strategy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol import messages as ours

kp = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_message import ApiMessage  # noqa: E402

# Cross-checks against another implementation: in the full suite, not the fast run.
pytestmark = pytest.mark.interop

SETTINGS = settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
INTEROP = Options(null_arrays=False, unknown_tags=False)


def _kafka_python_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for mod in pkgutil.walk_packages(kp.__path__, "kafka.protocol."):
        if ".old" in mod.name or "schemas" in mod.name:
            continue
        m = importlib.import_module(mod.name)
        for name, c in vars(m).items():
            if (
                inspect.isclass(c)
                and issubclass(c, ApiMessage)
                and c is not ApiMessage
                and getattr(c, "_json", None)
            ):
                found[name] = c
    return found


KP = _kafka_python_classes()


def _versions(api: str, kind: str) -> list[int]:
    kcls = KP.get(api + kind.title())
    if kcls is None:
        return []
    lo, hi = (int(x) for x in _valid(kcls.json["validVersions"]))
    m = message_def(api, kind)
    return [v for v in m.versions if lo <= v <= hi]


def _valid(text: str) -> tuple[str, str]:
    if "-" in text:
        a, b = text.split("-")
        return a, b
    return text, text


SHARED = [(api, kind) for api, kind in all_messages() if _versions(api, kind)]


def _kp_decode(kcls: type, data: bytes, version: int):
    obj = kcls.decode(data, version=version)
    obj._header = None  # decode() leaves the slot unset; encode() reads it
    return obj


def test_kafka_python_covers_the_core_apis() -> None:
    names = {api for api, _ in SHARED}
    for api in [
        "ApiVersions",
        "Metadata",
        "Produce",
        "Fetch",
        "ListOffsets",
        "FindCoordinator",
        "JoinGroup",
        "SyncGroup",
        "OffsetCommit",
        "OffsetFetch",
        "CreateTopics",
    ]:
        assert api in names
    assert len(names) >= 45


@pytest.mark.parametrize("api,kind", SHARED)
@SETTINGS
@given(data=st.data())
def test_kafka_python_agrees(api: str, kind: str, data: st.DataObject) -> None:
    m = message_def(api, kind)
    info = ours.API_BY_NAME[api]
    cls = info.request if kind == "request" else info.response
    kcls = KP[api + kind.title()]
    for v in _versions(api, kind):
        obj = data.draw(message_strategy(m, v, INTEROP), label=f"v{v}")
        if api == "ApiVersions" and kind == "response":
            obj.error_code = 0  # kafka-python decodes any error response as v0 (as brokers send)
        encoded = obj.encode(v)
        theirs = _kp_decode(kcls, encoded, v).encode(version=v)
        assert bytes(theirs) == encoded, f"v{v}: kafka-python re-encodes differently"
        assert cls.decode(theirs, v) == obj, f"v{v}"


def test_their_metadata_request_decodes_in_ours() -> None:
    from kafka.protocol.metadata import MetadataRequest

    for v in (1, 4, 9, 12):
        data = MetadataRequest(
            version=v,
            topics=[MetadataRequest.MetadataRequestTopic(name="orders")],
            allow_auto_topic_creation=False,
        ).encode(version=v)
        got = ours.MetadataRequest.decode(data, v)
        assert [t.name for t in got.topics] == ["orders"]
        assert got.allow_auto_topic_creation is (v < 4)  # absent before v4: default True


def test_their_produce_request_decodes_in_ours() -> None:
    from kafka.protocol.producer import ProduceRequest

    batch = b"\x00" * 61 + b"payload"
    for v in (3, 7, 9, 11):
        req = ProduceRequest(
            version=v,
            transactional_id=None,
            acks=-1,
            timeout_ms=1500,
            topic_data=[
                ProduceRequest.TopicProduceData(
                    name="t",
                    partition_data=[
                        ProduceRequest.TopicProduceData.PartitionProduceData(index=2, records=batch)
                    ],
                )
            ],
        )
        got = ours.ProduceRequest.decode(req.encode(version=v), v)
        assert (got.acks, got.timeout_ms, got.transactional_id) == (-1, 1500, None)
        p = got.topic_data[0].partition_data[0]
        assert (got.topic_data[0].name, p.index, bytes(p.records)) == ("t", 2, batch)
        assert isinstance(p.records, memoryview)


def test_our_fetch_response_decodes_in_theirs() -> None:
    from kafka.protocol.consumer import FetchResponse

    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    P = ours.FetchResponse.Responses.Partitions
    for v in (4, 11, 13, 16):
        msg = ours.FetchResponse(
            throttle_time_ms=7,
            responses=[
                ours.FetchResponse.Responses(
                    topic="t",
                    topic_id=tid,
                    partitions=[P(partition_index=3, high_watermark=42, records=b"abc")],
                )
            ],
        )
        got = _kp_decode(FetchResponse, msg.encode(v), v)
        part = got.responses[0].partitions[0]
        assert got.throttle_time_ms == 7
        assert (part.partition_index, part.high_watermark, bytes(part.records)) == (3, 42, b"abc")
        assert part.last_stable_offset == -1 and part.log_start_offset == -1
        if v >= 13:
            assert got.responses[0].topic_id == tid
        else:
            assert got.responses[0].topic == "t"
