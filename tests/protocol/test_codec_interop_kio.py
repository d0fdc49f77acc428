"""Cross-check against kio (an independent implementation generated from Kafka's own schemas).

For every API and version both know: values we generate and encode are decoded by kio, kio's
re-encoding is byte-identical to ours, and our decode of kio's bytes equals the original.
"""

from __future__ import annotations

import io

import pytest
from codec_strategies import Options, all_messages, message_def, message_strategy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.messages import API_BY_NAME

kio_index = pytest.importorskip("kio.schema.index")
from kio.serial import entity_reader, entity_writer  # noqa: E402
from kio.static.constants import EntityType  # noqa: E402

# Cross-checks against another implementation: in the full suite, not the fast run.
pytestmark = pytest.mark.interop

SETTINGS = settings(
    max_examples=examples(4),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# kio is generated from a newer Kafka; only compare where it describes the same version.
INTEROP = Options(null_arrays=False, unknown_tags=False, small_ints=True)

# Versions whose layout changed in Kafka after the guide was written (early-access APIs that
# were reshaped without a version bump), so kio's schema is not the guide's.
DIVERGENT = {
    # kio's v0 partitions carry leader_epoch between state_epoch and start_offset.
    ("ReadShareGroupStateSummary", "response", 0),
}


def _snake(name: str) -> str:
    import re

    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _kio_class(api: str, kind: str, version: int):
    from pkgutil import resolve_name

    versions = kio_index.schema_name_map.get(_snake(api))
    if not versions or version not in versions:
        return None
    return resolve_name(versions[version][EntityType[kind]])


def _shared() -> list[tuple[str, str]]:
    out = []
    for api, kind in all_messages():
        m = message_def(api, kind)
        if any(
            _kio_class(api, kind, v) is not None and (api, kind, v) not in DIVERGENT
            for v in m.versions
        ):
            out.append((api, kind))
    return out


SHARED = _shared()


def test_kio_covers_the_core_apis() -> None:
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
    assert len(names) >= 60


@pytest.mark.parametrize("api,kind", SHARED)
@SETTINGS
@given(data=st.data())
def test_kio_agrees(api: str, kind: str, data: st.DataObject) -> None:
    m = message_def(api, kind)
    info = API_BY_NAME[api]
    cls = info.request if kind == "request" else info.response
    checked = 0
    for v in m.versions:
        kcls = _kio_class(api, kind, v)
        if kcls is None or (api, kind, v) in DIVERGENT:
            continue
        obj = data.draw(message_strategy(m, v, INTEROP), label=f"v{v}")
        ours = obj.encode(v)
        theirs_obj, size = entity_reader(kcls)(ours, 0)
        assert size == len(ours), f"v{v}: kio consumed {size} of {len(ours)} bytes"
        buf = io.BytesIO()
        entity_writer(kcls)(buf, theirs_obj)
        theirs = buf.getvalue()
        assert theirs == ours, f"v{v}: kio re-encodes differently"
        assert cls.decode(theirs, v) == obj, f"v{v}"
        checked += 1
    assert checked
