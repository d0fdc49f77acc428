"""A tiny fake Kafka broker that records the Produce requests a real client sends.

It exists to capture real librdkafka (confluent-kafka) record batches without a broker: it
answers ApiVersions and Metadata by hand and keeps the records of every Produce request. The
advertised API versions decide which message format librdkafka writes:

    profile "v2": Produce 0-7, Fetch 0-10  -> RecordBatch v2 (zstd allowed)
    profile "v1": Produce 0-2, Fetch 0-2   -> message set v1
    profile "v0": Produce 0-1, Fetch 0-1   -> message set v0 (lz4 with Kafka's old header checksum)

FindCoordinator v0 is advertised too: librdkafka takes it as the sign of lz4 support.

Requests are framed (int32 size) with a v1 request header (api_key, api_version,
correlation_id, client_id); ApiVersions v3 uses header v2, whose tagged fields we never need to
read. An ApiVersions request newer than v0 gets UNSUPPORTED_VERSION with the version list in
the v0 layout, after which clients retry with v0 (KIP-511). Responses use header v0.

Regenerate the committed fixtures with
    .venv/bin/python tools/capture/fake_broker.py tests/protocol/records/fixtures
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

API_PRODUCE = 0
API_FETCH = 1
API_METADATA = 3
API_FIND_COORDINATOR = 10
API_VERSIONS = 18
UNSUPPORTED_VERSION = 35

PROFILES: dict[str, dict[int, tuple[int, int]]] = {
    "v2": {API_PRODUCE: (0, 7), API_FETCH: (0, 10), API_METADATA: (0, 1)},
    "v1": {API_PRODUCE: (0, 2), API_FETCH: (0, 2), API_METADATA: (0, 1)},
    "v0": {API_PRODUCE: (0, 1), API_FETCH: (0, 1), API_METADATA: (0, 0)},
}
for _apis in PROFILES.values():
    _apis[API_VERSIONS] = (0, 0)
    _apis[API_FIND_COORDINATOR] = (0, 0)

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

NODE_ID = 1


class CapturedProduce(NamedTuple):
    api_version: int
    acks: int
    topic: str
    partition: int
    records: bytes | None


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return values

    def string(self) -> str | None:
        (n,) = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def bytes_(self) -> bytes | None:
        (n,) = self.take(">i")
        if n < 0:
            return None
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b


class FakeBroker:
    """Listens on 127.0.0.1 (any free port); one thread per connection."""

    def __init__(self, topic: str = "captured", profile: str = "v2") -> None:
        self.topic = topic
        self.apis = PROFILES[profile]
        self.produced: list[CapturedProduce] = []
        self.requests: list[tuple[int, int]] = []  # (api_key, api_version) seen
        self._cond = threading.Condition()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self.port = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._closed = False
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> FakeBroker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        self._sock.close()
        for c in self._conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def wait_for_produce(self, count: int = 1, timeout: float = 30.0) -> list[CapturedProduce]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.produced) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no Produce request within {timeout}s: {self.requests}")
                self._cond.wait(left)
            return list(self.produced)

    # --- serving ---

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                head = _recv_exact(conn, 4)
                if head is None:
                    return
                (size,) = struct.unpack(">i", head)
                frame = _recv_exact(conn, size)
                if frame is None:
                    return
                response = self._handle(frame)
                if response is not None:
                    conn.sendall(struct.pack(">i", len(response)) + response)
        except OSError:
            return

    def _handle(self, frame: bytes) -> bytes | None:
        r = _Reader(frame)
        api_key, version, correlation_id = r.take(">hhi")
        r.string()  # client_id
        with self._cond:
            self.requests.append((api_key, version))
        header = struct.pack(">i", correlation_id)
        if api_key == API_VERSIONS:
            return header + self._api_versions(0 if version == 0 else UNSUPPORTED_VERSION)
        if api_key == API_METADATA:
            return header + self._metadata(version)
        if api_key == API_PRODUCE:
            return self._produce(r, version, header)
        return None  # not advertised: let the client time out

    def _api_versions(self, error_code: int) -> bytes:
        body = struct.pack(">hi", error_code, len(self.apis))
        for key, (lo, hi) in sorted(self.apis.items()):
            body += struct.pack(">hhh", key, lo, hi)
        return body

    def _metadata(self, version: int) -> bytes:
        broker = struct.pack(">i", NODE_ID) + _string("127.0.0.1") + struct.pack(">i", self.port)
        if version >= 1:
            broker += _string(None)  # rack
        body = struct.pack(">i", 1) + broker
        if version >= 1:
            body += struct.pack(">i", NODE_ID)  # controller_id
        topic = struct.pack(">h", 0) + _string(self.topic)
        if version >= 1:
            topic += b"\x00"  # is_internal
        partition = struct.pack(">hii", 0, 0, NODE_ID) + struct.pack(">ii", 1, NODE_ID) * 2
        topic += struct.pack(">i", 1) + partition
        return body + struct.pack(">i", 1) + topic

    def _produce(self, r: _Reader, version: int, header: bytes) -> bytes | None:
        if version >= 3:
            r.string()  # transactional_id
        acks, _timeout = r.take(">hi")
        results = []
        (n_topics,) = r.take(">i")
        captured = []
        for _ in range(n_topics):
            name = r.string() or ""
            (n_parts,) = r.take(">i")
            for _ in range(n_parts):
                (index,) = r.take(">i")
                captured.append(CapturedProduce(version, acks, name, index, r.bytes_()))
                results.append((name, index))
        with self._cond:
            self.produced.extend(captured)
            self._cond.notify_all()
        if acks == 0:
            return None
        body = struct.pack(">i", len(results))
        for name, index in results:
            body += _string(name) + struct.pack(">i", 1) + struct.pack(">ihq", index, 0, 0)
            if version >= 2:
                body += struct.pack(">q", -1)  # log_append_time
            if version >= 5:
                body += struct.pack(">q", 0)  # log_start_offset
        if version >= 1:
            body += struct.pack(">i", 0)  # throttle_time_ms
        return header + body


def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = conn.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


# --- capturing librdkafka's batches ---

BASE_TIMESTAMP = 1_700_000_000_000


def sample_messages(with_headers: bool) -> list[dict]:
    """What the capture produces, in order: keys/values with nulls, timestamps going back."""
    out = []
    for i in range(12):
        msg: dict = {
            "key": None if i % 4 == 0 else b"key-%d" % i,
            "value": None if i == 5 else b"librdkafka value %d " % i * (i + 1),
            "timestamp": BASE_TIMESTAMP + i * 10 - (25 if i == 7 else 0),
        }
        if with_headers and i % 3 == 1:
            msg["headers"] = [("h", b"x%d" % i), ("empty", None)]
        out.append(msg)
    return out


def capture_librdkafka(profile: str, codec: str, timeout: float = 30.0) -> CapturedProduce:
    """Run a confluent-kafka producer against a FakeBroker and return its Produce request."""
    from confluent_kafka import Producer

    with FakeBroker(profile=profile) as broker:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": 0,
                "compression.type": codec,
                "linger.ms": 200,
                "enable.idempotence": False,
                "socket.timeout.ms": 10000,
                "message.timeout.ms": int(timeout * 1000),
                "topic.metadata.refresh.interval.ms": -1,
            }
        )
        for m in sample_messages(with_headers=profile == "v2"):
            producer.produce(
                broker.topic,
                value=m["value"],
                key=m["key"],
                timestamp=m["timestamp"],
                headers=m.get("headers"),
                partition=0,
            )
        left = producer.flush(timeout)
        if left:
            raise TimeoutError(f"{left} messages not sent")
        captured = broker.wait_for_produce(1, timeout)
        del producer
    if len(captured) != 1:
        raise RuntimeError(f"expected one Produce request, got {len(captured)}")
    return captured[0]


def fixture_name(profile: str, codec: str) -> str:
    return f"librdkafka-{profile}-{codec}.bin"


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for profile in ("v2", "v1", "v0"):
        for codec in CODECS:
            if codec == "zstd" and profile != "v2":
                continue
            got = capture_librdkafka(profile, codec)
            assert got.records is not None
            (out / fixture_name(profile, codec)).write_bytes(got.records)
            print(f"{profile} {codec}: Produce v{got.api_version}, {len(got.records)} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/protocol/records/fixtures")
