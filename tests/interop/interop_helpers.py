"""Shared helpers for the interop tests: topic creation, record sets, exact comparison.

Every test drives a real broker process (``gregor.testing.BrokerProcess``) with a real
third-party client. Records are described client-neutrally as ``Rec`` (partition, key, value,
headers, timestamp) so the same expected set can be produced by one client and checked against
what another client consumed.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from gregor.protocol.connection import ClientConnection
from gregor.protocol.messages.api_versions import ApiVersionsRequest
from gregor.protocol.messages.list_offsets import ListOffsetsRequest
from gregor.protocol.messages.metadata import MetadataRequest

CREATE_TOPICS_KEY = 19
BASE_TS = 1_700_000_000_000


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_records(
    n: int,
    partitions: int,
    *,
    null_header_values: bool = True,
    both_null: bool = True,
    text: bool = False,
    value_size: int = 40,
) -> list[Rec]:
    """A deterministic mix: null keys (every 7th), null values (every 11th), 0-3 headers.

    ``both_null=False`` gives a key to records that would have neither key nor value and
    ``null_header_values=False`` avoids null header values (kafka-python refuses both).
    ``text`` keeps keys, values and headers printable without ``|`` or newlines (for kcat).
    Timestamps increase by 3 ms per record from a fixed base so they are all distinct.
    """
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{i % 997}".encode()
        if i % 11 == 5:
            value = None
        elif text:
            value = f"value-{i}-".encode() + b"x" * (i % value_size)
        else:
            value = i.to_bytes(4, "big") + bytes((i * 31 + j) & 0xFF for j in range(i % value_size))
        if key is None and value is None and not both_null:
            key = b"k"
        headers: list[tuple[str, bytes | None]] = []
        for h in range(i % 4):
            hv: bytes | None = f"h{h}-{i}".encode()
            if null_header_values and h == 2 and i % 8 == 3:
                hv = None
            headers.append((f"hdr{h}", hv))
        out.append(Rec(i % partitions, key, value, tuple(headers), BASE_TS + 3 * i))
    return out


def by_partition(recs: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in recs:
        out[r.partition].append(r)
    return dict(out)


def assert_same_per_partition(expected: list[Rec], got: list[tuple[int, Rec]]) -> None:
    """``got`` is (offset, Rec) in consumption order; checks contents, order and offsets."""
    exp = by_partition(expected)
    got_by: dict[int, list[tuple[int, Rec]]] = defaultdict(list)
    for off, r in got:
        got_by[r.partition].append((off, r))
    assert sorted(got_by) == sorted(exp)
    for p, recs in exp.items():
        g = got_by[p]
        assert [o for o, _ in g] == list(range(len(recs))), f"partition {p}: offsets"
        assert len(g) == len(recs), f"partition {p}: count"
        for i, ((_, a), b) in enumerate(zip(g, recs, strict=True)):
            assert a == b, f"partition {p} offset {i}: got {a!r}, want {b!r}"


# --- a tiny synchronous client on our own sans-IO codec, for raw-socket tests ---


class RawClient:
    """A blocking socket speaking the Kafka protocol through ``ClientConnection``."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.conn = ClientConnection(client_id="interop-raw")

    def request(self, message, version: int):  # noqa: ANN001, ANN201
        _, data = self.conn.send_request(message, version)
        self.sock.sendall(data)
        if not self.conn.expects_response(message):
            return None
        while True:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            done = self.conn.receive_data(chunk)
            if done:
                return done[0].response

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_frame(self) -> bytes | None:
        """One size-prefixed frame, or None when the broker closes the connection."""
        head = self._recv_exact(4)
        if head is None:
            return None
        (n,) = struct.unpack(">i", head)
        return self._recv_exact(n)

    def _recv_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def supports_api(bootstrap: str, api_key: int) -> bool:
    with RawClient(bootstrap) as c:
        resp = c.request(
            ApiVersionsRequest(client_software_name="interop", client_software_version="1"), 3
        )
    return any(k.api_key == api_key for k in resp.api_keys)


def create_topic(
    bootstrap: str, name: str, partitions: int, configs: dict[str, str] | None = None
) -> None:
    """Create ``name`` with ``partitions`` partitions and wait until metadata shows them.

    Uses CreateTopics when the broker has it; otherwise auto-creation through Metadata, in
    which case the broker's ``num.partitions`` must already be ``partitions``.
    """
    if supports_api(bootstrap, CREATE_TOPICS_KEY):
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        fut = admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name]
        fut.result()
    else:
        assert not configs, "topic configs need CreateTopics"
    while True:
        with RawClient(bootstrap) as c:
            md = c.request(
                MetadataRequest(
                    topics=[MetadataRequest.Topics(name=name)], allow_auto_topic_creation=True
                ),
                8,
            )
        t = md.topics[0]
        if t.error_code == 0 and len(t.partitions) >= 1:
            assert len(t.partitions) == partitions, (
                f"{name} has {len(t.partitions)} partitions, wanted {partitions}"
            )
            break
        time.sleep(0.05)
    # Kafka's broker may show a new topic in its metadata a moment before it leads the
    # partitions (NOT_LEADER_OR_FOLLOWER until then); Gregor leads them before it answers.
    while not _partitions_answer(bootstrap, name, partitions):
        time.sleep(0.05)


def _partitions_answer(bootstrap: str, name: str, partitions: int) -> bool:
    """True when ListOffsets answers every partition of ``name`` without an error."""
    req = ListOffsetsRequest(
        replica_id=-1,
        topics=[
            ListOffsetsRequest.Topics(
                name=name,
                partitions=[
                    ListOffsetsRequest.Topics.Partitions(partition_index=p, timestamp=-1)
                    for p in range(partitions)
                ],
            )
        ],
    )
    with RawClient(bootstrap) as c:
        resp = c.request(req, 1)
    return all(p.error_code == 0 for t in resp.topics for p in t.partitions)


def chunks(it: Iterable, n: int) -> Iterable[list]:
    it = iter(it)
    while chunk := list(itertools.islice(it, n)):
        yield chunk


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_codecs(data_dir, topic: str, partition: int, min_records: int = 8) -> list[int]:  # noqa: ANN001
    """The compression codec of every batch (of at least ``min_records`` records) in a
    partition's log files, read from disk. Clients (librdkafka, kafka-python, aiokafka) send a
    batch uncompressed when compressing would not make it smaller, as can happen to a batch of
    one or two short records, so small batches say nothing about the codec path."""
    from pathlib import Path

    from gregor.protocol.records.header import iter_batches

    out = []
    pdir = Path(data_dir) / "logs" / f"{topic}-{partition}"
    for seg in sorted(pdir.glob("*.log")):
        for _, h in iter_batches(seg.read_bytes()):
            if h.records_count >= min_records:
                out.append(h.attributes & 0x7)
    return out
