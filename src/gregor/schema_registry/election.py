"""The writer election: every registry of a cluster joins one Kafka group, whose assignment names
the one registry per ``_schemas`` topic that allocates ids and appends; the others forward.

Theory of operation (Confluent's Schema Registry elects its leader the same way). Each registry
is a member of the group ``schema.registry.group.id`` (default ``schema-registry``, protocol
type ``sr``, one protocol ``v0``) at the cluster's own group coordinator, through
JoinGroup / SyncGroup / Heartbeat / LeaveGroup sent with the client's request layer (the
consumer's membership class speaks only the ``consumer`` protocol type). Its member metadata
is the JSON ``Identity``: the URL other registries reach it at (scheme, host, port), the topic
it stores schemas in, whether it may be the writer (Confluent's ``leader.eligibility``), and
whether it was the writer of the generation before.

The member the coordinator names group leader computes every member's ``Assignment``
(``assign``): per topic, the writer is the eligible member that was the writer before (so a
registry joining does not move the writer), else the eligible member with the lowest member
id; no eligible member, no writer. Two members of one topic advertising the same URL would
forward to each other, so that topic gets no writer and the error ``DUPLICATE_URLS`` (as
Confluent). Metadata that does not decode (a foreign member) is never eligible. Every member
learns the writer's identity from its SyncGroup answer.

Only a settled member may write. ``settled`` is cleared the moment a rebalance starts (a
heartbeat answers REBALANCE_IN_PROGRESS, the member is unknown or of an old generation) and set
once an assignment is in force; a member named writer first runs ``on_elected`` (the store's
NOOP written and read back: everything the previous writer wrote is applied before the first
id is allocated). A writer also holds a lease: the send time of its last answered SyncGroup or
Heartbeat plus the session timeout. The coordinator cannot have expelled it (and let another
be elected) before that, so a writer cut off from the coordinator stops writing in time
(``may_write``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gregor.client.core.client import KafkaClient
from gregor.client.core.config import COMMON, Config
from gregor.client.core.conn import expect
from gregor.client.core.errors import KafkaConnectionError, error_for_code
from gregor.protocol import messages
from gregor.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger("gregor.schema_registry")

PROTOCOL_TYPE = "sr"
PROTOCOL_NAME = "v0"
DEFAULT_GROUP_ID = "schema-registry"
NO_ERROR, DUPLICATE_URLS = 0, 1
MAX_METADATA_BYTES = 4096

R = TypeVar("R", bound=messages.Message)


@dataclass(frozen=True)
class Identity:
    """A member's metadata: where it serves, which topic, whether it may write."""

    scheme: str
    host: str
    port: int
    topic: str
    eligible: bool = True
    was_writer: bool = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "scheme": self.scheme,
            "host": self.host,
            "port": self.port,
            "topic": self.topic,
            "leader_eligibility": self.eligible,
            "was_writer": self.was_writer,
        }

    @classmethod
    def from_json(cls, d: Any) -> Identity | None:
        """The identity in ``d``, or None when anything in it is not as ``to_json`` writes it."""
        if not isinstance(d, dict):
            return None
        scheme, host, port, topic = d.get("scheme"), d.get("host"), d.get("port"), d.get("topic")
        eligible, was = d.get("leader_eligibility"), d.get("was_writer", False)
        if (
            scheme not in ("http", "https")
            or not isinstance(host, str)
            or not 0 < len(host) <= 255
            or any(c in host for c in "/?#@ ")
            or not isinstance(port, int)
            or isinstance(port, bool)
            or not 0 < port < 65536
            or not isinstance(topic, str)
            or not isinstance(eligible, bool)
            or not isinstance(was, bool)
        ):
            return None
        return cls(scheme, host, port, topic, eligible, was)


def decode_identity(raw: bytes | None) -> Identity | None:
    if not raw or len(raw) > MAX_METADATA_BYTES:
        return None
    try:
        return Identity.from_json(json.loads(raw))
    except (ValueError, RecursionError):
        return None


@dataclass(frozen=True)
class Assignment:
    """What SyncGroup tells a member: its topic's writer (member id and identity), or none."""

    error: int = NO_ERROR
    writer: str | None = None
    identity: Identity | None = None

    def encode(self) -> bytes:
        return json.dumps(
            {
                "version": 1,
                "error": self.error,
                "writer": self.writer,
                "writer_identity": self.identity.to_json() if self.identity else None,
            }
        ).encode()

    @classmethod
    def decode(cls, raw: bytes | None) -> Assignment:
        try:
            d = json.loads(raw) if raw else None
        except (ValueError, RecursionError):
            d = None
        if not isinstance(d, dict):
            return cls()
        error, writer = d.get("error"), d.get("writer")
        identity = Identity.from_json(d.get("writer_identity"))
        if not isinstance(error, int) or not isinstance(writer, str) or identity is None:
            return cls(error if isinstance(error, int) else NO_ERROR)
        return cls(error, writer, identity)


def assign(members: dict[str, Identity | None]) -> dict[str, Assignment]:
    """Every member's assignment (the group leader's work; see the module's docstring)."""
    by_topic: dict[str, list[tuple[str, Identity]]] = {}
    for member_id, identity in members.items():
        if identity is not None:
            by_topic.setdefault(identity.topic, []).append((member_id, identity))
    out = {member_id: Assignment() for member_id in members}
    for group in by_topic.values():
        urls = [identity.url for _, identity in group]
        if len(set(urls)) != len(urls):
            for member_id, _ in group:
                out[member_id] = Assignment(DUPLICATE_URLS)
            continue
        eligible = sorted((not i.was_writer, m) for m, i in group if i.eligible)
        if not eligible:
            continue
        writer = eligible[0][1]
        chosen = Assignment(NO_ERROR, writer, members[writer])
        for member_id, _ in group:
            out[member_id] = chosen
    return out


class WriterElection:
    def __init__(
        self,
        client_config: dict[str, Any],
        identity: Identity,
        on_elected: Callable[[], Awaitable[None]],
        *,
        group_id: str = DEFAULT_GROUP_ID,
        session_timeout_ms: int = 10000,
        heartbeat_interval_ms: int = 3000,
        rebalance_timeout_ms: int = 30000,
    ) -> None:
        settings = {k: v for k, v in client_config.items() if k in COMMON}
        self.client = KafkaClient(Config("client", settings))
        self.identity = identity
        self.on_elected = on_elected
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_s = heartbeat_interval_ms / 1000
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.coordinator = -1
        #: The writer of this member's topic as the last assignment named it (None: none).
        self.assignment = Assignment()
        #: Set while an assignment is in force (and, for the writer, ``on_elected`` has run).
        self.settled = asyncio.Event()
        self._lease_until = 0.0
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # --- what the registry asks ---

    @property
    def writer(self) -> Identity | None:
        return self.assignment.identity if self.settled.is_set() else None

    @property
    def is_writer(self) -> bool:
        return self.settled.is_set() and self.assignment.writer == self.member_id != ""

    def may_write(self) -> bool:
        """The writer, within its lease."""
        return self.is_writer and time.monotonic() < self._lease_until

    async def wait_settled(self, timeout_s: float) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                await self.settled.wait()
        except TimeoutError:
            return False
        return True

    # --- lifecycle ---

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="schema-registry-election"
        )

    async def close(self) -> None:
        """Step down and leave the group, so another member takes over at once."""
        self._closed = True
        was_writer = self.is_writer
        self._step_down()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        if self.member_id:
            try:
                await self._send(
                    messages.LeaveGroupRequest(
                        group_id=self.group_id,
                        members=[messages.LeaveGroupRequest.Members(member_id=self.member_id)],
                    ),
                    messages.LeaveGroupResponse,
                    timeout=5,
                )
            except (KafkaError, OSError) as e:
                log.info("schema registry: LeaveGroup %s failed: %s", self.group_id, e)
        if was_writer:
            log.info("schema registry: %s no longer writes %s", self.identity.url, self.topic)
        await self.client.close()

    @property
    def topic(self) -> str:
        return self.identity.topic

    def _step_down(self) -> None:
        self.settled.clear()
        self._lease_until = 0.0

    async def _run(self) -> None:
        backoff = 0.1
        while not self._closed:
            try:
                await self._join_and_sync()
                backoff = 0.1
                await self._heartbeat_until_rebalance()
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the election outlives a broker's bad moment
                self._step_down()
                retriable = isinstance(e, (KafkaError, OSError)) and (
                    not isinstance(e, KafkaError) or e.retriable or _rejoin_error(e)
                )
                (log.debug if retriable else log.warning)(
                    "schema registry: group %s: %s; joining again", self.group_id, e
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def _send(
        self, req: messages.Message, response: type[R], timeout: float | None = None
    ) -> R:
        if self.coordinator < 0:
            self.coordinator = await self.client.find_coordinator(self.group_id, 0)
        try:
            conn = await self.client.connection(self.coordinator)
            got = await conn.send(req, conn.version(req.API_KEY), timeout=timeout)
        except KafkaConnectionError:
            self.coordinator = -1
            raise
        return expect(got, response)

    def _check(self, code: int, what: str) -> None:
        if not code:
            return
        if code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            self.coordinator = -1
        elif code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
            self.member_id = ""
            self.generation = -1
        elif code == ErrorCode.ILLEGAL_GENERATION:
            self.generation = -1
        raise error_for_code(code)(f"{what} {self.group_id}")

    async def _join_and_sync(self) -> None:
        self._step_down()
        was = self.assignment.writer == self.member_id != ""
        identity = dataclasses.replace(self.identity, was_writer=was)
        wait = self.rebalance_timeout_ms / 1000 + 5
        while True:
            resp = await self._send(
                messages.JoinGroupRequest(
                    group_id=self.group_id,
                    session_timeout_ms=self.session_timeout_ms,
                    rebalance_timeout_ms=self.rebalance_timeout_ms,
                    member_id=self.member_id,
                    protocol_type=PROTOCOL_TYPE,
                    protocols=[
                        messages.JoinGroupRequest.Protocols(
                            name=PROTOCOL_NAME, metadata=json.dumps(identity.to_json()).encode()
                        )
                    ],
                ),
                messages.JoinGroupResponse,
                timeout=wait,
            )
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            self._check(resp.error_code, "JoinGroup")
            break
        self.member_id, self.generation = resp.member_id, resp.generation_id
        assignments = []
        if resp.leader == self.member_id and not resp.skip_assignment:
            chosen = assign({m.member_id: decode_identity(m.metadata) for m in resp.members})
            assignments = [
                messages.SyncGroupRequest.Assignments(member_id=m, assignment=a.encode())
                for m, a in chosen.items()
            ]
        sent = time.monotonic()
        sresp = await self._send(
            messages.SyncGroupRequest(
                group_id=self.group_id,
                generation_id=self.generation,
                member_id=self.member_id,
                protocol_type=PROTOCOL_TYPE,
                protocol_name=PROTOCOL_NAME,
                assignments=assignments,
            ),
            messages.SyncGroupResponse,
            timeout=wait,
        )
        self._check(sresp.error_code, "SyncGroup")
        self.assignment = Assignment.decode(sresp.assignment)
        self._lease_until = sent + self.session_timeout_ms / 1000
        if self.assignment.error == DUPLICATE_URLS:
            log.error(
                "schema registry: another member of group %s advertises %s for %s: no writer "
                "until the URLs differ",
                self.group_id,
                self.identity.url,
                self.topic,
            )
        if self.assignment.writer == self.member_id:
            await self.on_elected()  # read to the end before the first id
            log.info(
                "schema registry: %s is the writer of %s (generation %d)",
                self.identity.url,
                self.topic,
                self.generation,
            )
        self.settled.set()

    async def _heartbeat_until_rebalance(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.heartbeat_s)
            sent = time.monotonic()
            try:
                resp = await self._send(
                    messages.HeartbeatRequest(
                        group_id=self.group_id,
                        generation_id=self.generation,
                        member_id=self.member_id,
                    ),
                    messages.HeartbeatResponse,
                    timeout=self.session_timeout_ms / 1000,
                )
            except (KafkaError, OSError) as e:
                log.debug("schema registry: heartbeat failed: %s", e)
                if time.monotonic() >= self._lease_until:
                    return  # the coordinator may have expelled us: join again
                continue
            if resp.error_code:
                self._step_down()
                self._check(resp.error_code, "Heartbeat")
            self._lease_until = sent + self.session_timeout_ms / 1000


def _rejoin_error(e: KafkaError) -> bool:
    return getattr(e, "code", 0) in (
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.ILLEGAL_GENERATION,
    )
