"""A TCP proxy in front of a broker that watches group heartbeats go by (no tests here).

Theory of operation. ``KafkaTap`` listens on 127.0.0.1 on a port of its own and forwards every
connection to the broker's port, byte for byte, one thread per direction. Start the broker with
``advertised.listeners`` naming the tap's port, so clients reach the broker only through it,
also after a restart (the broker keeps its port). On the way it splits both directions into
frames with the protocol's ``FrameDecoder``: a Heartbeat (classic groups) or
ConsumerGroupHeartbeat (KIP-848) request is remembered by correlation id, and when its response
comes back with no error the member id it carried is counted as *answered* for its group.

That count is what a test waits on instead of sleeping: "every member has had a heartbeat
answered since the restart" proves the restarted coordinator knows each member, where a fixed
sleep only hopes enough time has passed. Other requests are forwarded untouched and their
bodies are never decoded.

While the broker is down the tap refuses connections too, as the broker's own port would:
when a broker connection ends and the broker's port no longer accepts, the tap closes its
listening socket before it passes the hang-up on to the client, and opens it again on the same
port once the broker accepts connections again. (Accepting a client and then dropping it is
not the same to a client: kafka-python 3.0.12's consumer dies of a connection dropped during
its ApiVersions handshake, where it retries a refused one.)
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from typing import Any

from gregor.protocol.framing import (
    FrameDecoder,
    decode_request_header,
    decode_response_header,
    peek_correlation_id,
)
from gregor.protocol.messages import API_KEYS, response_header_version
from gregor.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from gregor.protocol.messages.heartbeat import HeartbeatRequest

_WATCHED = {HeartbeatRequest.API_KEY, ConsumerGroupHeartbeatRequest.API_KEY}
_MAX_FRAME = 1 << 30


class KafkaTap:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listener: socket.socket | None = self._listen(0)
        self.port: int = self._listener.getsockname()[1]
        self.upstream_port: int | None = None
        self._answered: Counter[tuple[str, str]] = Counter()  # (group, member id) -> count
        self._sockets: set[socket.socket] = set()
        self._listening = threading.Event()
        self._listening.set()
        self._closed = False
        threading.Thread(target=self._accept, name="kafka-tap", daemon=True).start()

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    # --- what tests read ---

    def answered(self, group: str) -> Counter[str]:
        """Heartbeats answered without error so far, by member id, for ``group``."""
        with self._lock:
            return Counter({m: n for (g, m), n in self._answered.items() if g == group})

    # --- the listening socket follows the broker's ---

    @staticmethod
    def _listen(port: int) -> socket.socket:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(128)
        return s

    def _upstream(self) -> socket.socket | None:
        assert self.upstream_port is not None
        try:
            return socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            return None

    def _broker_gone(self) -> None:
        """A broker connection ended: if the broker no longer accepts, stop accepting too
        until it does again."""
        probe = self._upstream()
        if probe is not None:
            probe.close()
            return
        with self._lock:
            listener, self._listener = self._listener, None
            if listener is None or self._closed:
                return
            self._listening.clear()
        _close(listener)
        threading.Thread(target=self._reopen, name="kafka-tap-reopen", daemon=True).start()

    def _reopen(self) -> None:
        while not self._closed:
            probe = self._upstream()
            if probe is not None:
                probe.close()
                break
            time.sleep(0.02)
        with self._lock:
            if not self._closed:
                self._listener = self._listen(self.port)
            self._listening.set()

    # --- forwarding ---

    def _accept(self) -> None:
        while not self._closed:
            self._listening.wait()
            with self._lock:
                listener = self._listener
            if listener is None:
                continue
            try:
                client, _ = listener.accept()
            except OSError:
                continue  # closed: the broker went away, or close()
            server = self._upstream() if self.upstream_port is not None else None
            if server is None:
                client.close()
                if self.upstream_port is not None:
                    self._broker_gone()
                continue
            pending: dict[int, tuple[int, int, str, str]] = {}
            with self._lock:
                if self._closed:
                    client.close()
                    server.close()
                    return
                self._sockets.update((client, server))
            threading.Thread(
                target=self._pump, args=(client, server, pending, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, pending, False), daemon=True
            ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, pending: dict[int, Any], requests: bool
    ) -> None:
        decoder = FrameDecoder(_MAX_FRAME)
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                for frame in decoder.feed(data):
                    if requests:
                        self._saw_request(frame, pending)
                    else:
                        self._saw_response(frame, pending)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            if not requests and not self._closed:
                self._broker_gone()  # before the client hears of it and reconnects
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @staticmethod
    def _saw_request(frame: Any, pending: dict[int, Any]) -> None:
        header, pos = decode_request_header(frame)
        if header.api_key not in _WATCHED:
            return
        body = API_KEYS[header.api_key].request.decode(memoryview(frame)[pos:], header.api_version)
        pending[header.correlation_id] = (
            header.api_key,
            header.api_version,
            body.group_id,
            body.member_id,
        )

    def _saw_response(self, frame: Any, pending: dict[int, Any]) -> None:
        hit = pending.pop(peek_correlation_id(frame), None)
        if hit is None:
            return
        api_key, version, group, member = hit
        _, _, pos = decode_response_header(frame, response_header_version(api_key, version))
        resp = API_KEYS[api_key].response.decode(memoryview(frame)[pos:], version)
        member = getattr(resp, "member_id", None) or member  # KIP-848: the broker may name it
        if resp.error_code == 0 and member:
            with self._lock:
                self._answered[(group, member)] += 1

    def close(self) -> None:
        with self._lock:
            self._closed = True
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, set()
            self._listening.set()
        for s in (listener, *sockets):
            if s is not None:
                _close(s)

    def __enter__(self) -> KafkaTap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _close(s: socket.socket) -> None:
    """shutdown() wakes a thread blocked in accept() or recv() on ``s``; close() alone would not."""
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
