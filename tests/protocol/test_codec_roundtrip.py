"""Every (API, version, request|response): decode(encode(x)) == x and re-encoding is identical."""

from __future__ import annotations

import pytest
from codec_strategies import all_messages, message_def, message_strategy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from gregor.protocol.messages import API_BY_NAME

SETTINGS = settings(
    max_examples=examples(5),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("api,kind", all_messages())
@SETTINGS
@given(data=st.data())
def test_roundtrip_every_version(api: str, kind: str, data: st.DataObject) -> None:
    m = message_def(api, kind)
    info = API_BY_NAME[api]
    cls = info.request if kind == "request" else info.response
    for v in m.versions:
        obj = data.draw(message_strategy(m, v), label=f"v{v}")
        encoded = obj.encode(v)
        decoded = cls.decode(encoded, v)
        assert decoded == obj, f"v{v}"
        assert decoded.encode(v) == encoded, f"v{v}"
        # decode_from at an offset inside a larger buffer gives the same object and end.
        framed = b"\xaa" * 3 + encoded + b"\xbb"
        again, end = cls.decode_from(framed, 3, v)
        assert again == obj and end == 3 + len(encoded)


def test_every_message_covered() -> None:
    assert len(all_messages()) == 2 * len(API_BY_NAME)
