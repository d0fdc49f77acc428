"""Hold-and-release scenarios: a request from an earlier attempt delivered late, on purpose.

Kafka's transaction protocol before KIP-890's transaction version 2 lets a delayed EndTxn or
Produce from one transaction land in a later one of the same producer (same producer id and
epoch): Jepsen's Bufstream analysis showed write loss, aborted reads and torn transactions from
it. Each scenario here drives one transactional producer through the cluster's proxies, holds
the request back at the broker's proxy while the client retries and moves on, releases it at a
chosen moment, then reads everything back; the history goes through the same checker as a run.

``hold-endtxn``: T1 sends v1 and commits; its first EndTxn is held (the client's retry commits
T1). T2 begins and sends v2; the held EndTxn(commit) of T1 is released now, while T2 is open.
An observer polls (read_committed) before T2 ends, then T2 is aborted on purpose. If the late
EndTxn committed T2, the observer saw v2 before T2's commit was asked (precommitted-read) and v2
stays readable although T2 aborted (aborted-read).

``hold-endtxn-zombie``: as above, but T1's producer never gets its EndTxn through: it is cut off
and replaced by a new producer with the same transactional id (a new epoch, fencing the old);
the old epoch's EndTxn is released into the new producer's open transaction. A correct
coordinator answers PRODUCER_FENCED.

``hold-produce``: T1's first Produce of v1 is held; the client retries it, T1 is aborted on
purpose; T2 begins and sends v2 to the same key; T1's held Produce is released into T2's open
transaction, then T2 commits. If the late batch joins T2, v1, aborted, becomes readable.

``stale-leader-marker`` (seed 109's torn transaction): T1 sends v1 to a key led by broker L
(neither the transaction coordinator C nor the controller X). L is then cut off from etcd, the
controller and its followers, while C can still reach it (a stale leader, as in a partition
or a SIGSTOP); T1 is aborted on purpose, so C sends its ABORT marker to L. Once the controller
has elected another leader of the key, the network heals (L learns it follows now and
truncates what it appended alone); the same producer (same epoch: an abort without error does
not bump it in transaction version 1) then commits T2 with v2 on the same key. Kafka appends a
marker with ``requiredAcks = -1`` (``KafkaApis.handleWriteTxnMarkersRequest``): the answer waits
for the high watermark, so a stale leader answers NOT_LEADER_OR_FOLLOWER (or times out) and
the coordinator writes the marker again to the new leader. If L answers after its local append,
C completes T1's abort, the new leader never gets the marker, and T2's COMMIT marker covers v1
too: the aborted v1 becomes readable (aborted-read) while T1's other partitions stay aborted.

``stale-coordinator`` (seed 109's committed-offset regression): a group commits offset 5 of a
key through its coordinator O (the leader of the group's ``__consumer_offsets`` partition, not
the controller). O is then cut off from etcd and the other brokers, but not from clients. Once
another broker's image shows the partition led by a new coordinator N, the group commits 7
through N; then an OffsetFetch is sent straight to O. Answering 5 from O's cache would be a
committed-offset regression (7 was acknowledged first); O must answer NOT_COORDINATOR (or
COORDINATOR_NOT_AVAILABLE), as a broker whose metadata session has lapsed
(``MetadataStore.session_confirmed``). After the heal the cluster reads 7.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

from gregor.chaos.checker import Report, check
from gregor.chaos.clients import ClientAdapter, make_client
from gregor.chaos.cluster import ChaosCluster
from gregor.chaos.history import HistoryWriter
from gregor.chaos.nemesis import END_TXN, PRODUCE, java_partition
from gregor.chaos.workload import topic_partition

__all__ = ["SCENARIOS", "run_scenario"]

SCENARIOS = (
    "hold-endtxn",
    "hold-endtxn-zombie",
    "hold-produce",
    "stale-leader-marker",
    "stale-coordinator",
)
KEYS = 8


class _Recorder:
    def __init__(self, history: HistoryWriter, client: str) -> None:
        self.h = history
        self.client = client

    def invoke(self, process: Any, f: str, value: Any, **extra: Any) -> None:
        self.h.append(
            {
                "type": "invoke",
                "process": process,
                "f": f,
                "value": value,
                "client": self.client,
                **extra,
            }
        )

    def done(self, process: Any, f: str, type_: str, value: Any, **extra: Any) -> None:
        self.h.append(
            {
                "type": type_,
                "process": process,
                "f": f,
                "value": value,
                "client": self.client,
                **extra,
            }
        )


def _coordinator(cluster: ChaosCluster, transactional_id: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 4})
    deadline = time.monotonic() + 60
    while True:
        md = admin.list_topics("__transaction_state", timeout=10)
        t = md.topics.get("__transaction_state")
        if t is not None and t.error is None and t.partitions:
            leader = t.partitions[java_partition(transactional_id, len(t.partitions))].leader
            if leader in cluster.brokers:
                return int(leader)
        if time.monotonic() > deadline:
            raise RuntimeError("no transaction coordinator found")
        time.sleep(0.5)


def _leader(cluster: ChaosCluster, key: int) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 4})
    t, p = topic_partition(key)
    return int(admin.list_topics(t, timeout=10).topics[t].partitions[p].leader)


def _client(
    cluster: ChaosCluster, name: str, txn_id: str | None, group: str, client_id: str
) -> ClientAdapter:
    c = make_client(
        name, cluster.bootstrap_servers, txn_id=txn_id, group=group, keys=KEYS, client_id=client_id
    )
    c.open()
    return c


def _until(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


def run_scenario(
    cluster: ChaosCluster, name: str, history: HistoryWriter, client: str = "confluent"
) -> dict[str, Any]:
    """Run one scenario on a started cluster (topics created); returns what happened, with
    the checker's report over the scenario's history."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}: one of {', '.join(SCENARIOS)}")
    rec = _Recorder(history, client)
    if name == "stale-leader-marker":
        return _stale_leader_marker(cluster, rec, history, client)
    if name == "stale-coordinator":
        return _stale_coordinator(cluster, rec)
    tid = f"chaos-scenario-{uuid.uuid4().hex[:8]}"
    key_a, key_b = 0, 1
    out: dict[str, Any] = {"scenario": name, "client": client}
    t1_id = "chaos-zombie" if name.endswith("zombie") else "chaos-s1"
    t2_id = "chaos-s2" if name.endswith("zombie") else "chaos-s1"
    producer = _client(cluster, client, tid, "chaos-scenario", t1_id)
    observer = _client(
        cluster, "confluent", None, f"chaos-observer-{uuid.uuid4().hex[:6]}", "chaos-observer"
    )
    observer.assign([key_a, key_b])
    v1, v2, v3 = 1_000_001, 1_000_002, 1_000_003
    try:
        if name == "hold-produce":
            proxy = cluster.client_proxy[_leader(cluster, key_a)]
            rec.invoke(1, "txn", [["send", key_a, v1, None]], abort=True, client_id=t1_id)
            producer.begin()
            proxy.hold([PRODUCE], count=1, close_after=0.5)
            o1 = producer.send(key_a, v1)
            out["held"] = len(proxy.held)
            producer.abort_txn()
            rec.done(1, "txn", "fail", [["send", key_a, v1, o1]], error="aborted on purpose")
        else:
            proxy = cluster.client_proxy[_coordinator(cluster, tid)]
            rec.invoke(1, "txn", [["send", key_a, v1, None]], client_id=t1_id)
            producer.begin()
            o1 = producer.send(key_a, v1)
            zombie = name.endswith("zombie")
            proxy.hold([END_TXN], count=1, close_after=3600.0 if zombie else 0.5)
            result: list[Any] = []
            commit_start = round(history.now(), 6)
            t = threading.Thread(
                target=lambda: result.append(_try(producer.commit_txn)), daemon=True
            )
            t.start()
            _until(lambda: proxy.held, 30)
            out["held"] = len(proxy.held)
            if zombie:
                proxy.block_client_ids(("chaos-zombie",))  # the old producer is cut off for good
                rec.done(
                    1,
                    "txn",
                    "info",
                    [["send", key_a, v1, o1]],
                    error="producer cut off",
                    commit_start=commit_start,
                )
                producer = _client(
                    cluster, client, tid, "chaos-scenario", t2_id
                )  # fences the old epoch
            else:
                t.join(60)
                err = result[0] if result else "commit did not return"
                rec.done(
                    1,
                    "txn",
                    "ok" if err is None else "info",
                    [["send", key_a, v1, o1]],
                    error=err,
                    commit_start=commit_start,
                )
                out["t1_commit"] = err or "ok"
        # T2: begin, send, release the held request into it, let an observer poll, end it.
        t2: list[list[Any]] = [["send", key_b if name != "hold-produce" else key_a, v2, None]]
        rec.invoke(2, "txn", [list(m) for m in t2], abort=name != "hold-produce", client_id=t2_id)
        producer.begin()
        t2[0][3] = producer.send(t2[0][1], v2)
        released = proxy.release()
        out["released"] = [h.released for h in released]
        proxy.heal()
        rec.h.append(
            {"type": "info", "process": "nemesis", "f": "release", "value": out["released"]}
        )
        time.sleep(1.0)  # let markers a late request caused reach the partitions
        rec.invoke("observer", "poll", [["poll", []]])
        seen: list[tuple[int, int, int]] = []

        def observe() -> bool:
            seen.extend(observer.poll())
            return any(v == v2 for _k, _o, v in seen)

        _until(observe, 5)
        rec.done("observer", "poll", "ok", [["poll", [list(r) for r in seen], 0]])
        out["observer_saw_v2_before_t2_ended"] = any(v == v2 for _k, _o, v in seen)
        if name == "hold-produce":
            t2.append(["send", key_a, v3, None])
            t2[1][3] = producer.send(key_a, v3)
            commit_start = round(history.now(), 6)
            err = _try(producer.commit_txn)
            rec.done(
                2, "txn", "ok" if err is None else "info", t2, error=err, commit_start=commit_start
            )
            out["t2_end"] = err or "committed"
        else:
            err = _try(producer.abort_txn)
            rec.done(
                2, "txn", "fail" if err is None else "info", t2, error=err or "aborted on purpose"
            )
            out["t2_end"] = err or "aborted"
    finally:
        for c in (producer, observer):
            _try(c.close)
    out["final"] = _final_read(cluster, history, [key_a, key_b], {v1, v2, v3})
    report: Report = check(history.entries)
    out["anomalies"] = {k: len(v) for k, v in report.anomalies.items()}
    out["report"] = report
    return out


def _try(fn: Any) -> str | None:
    try:
        fn()
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"[:200]


def _final_read(
    cluster: ChaosCluster, history: HistoryWriter, keys: list[int], values: set[int]
) -> list[int]:
    reader = _client(
        cluster, "confluent", None, f"chaos-final-{uuid.uuid4().hex[:6]}", "chaos-final"
    )
    history.append(
        {"type": "invoke", "process": "final", "f": "final-poll", "value": [["poll", []]]}
    )
    reads: list[tuple[int, int, int]] = []
    try:
        reader.assign(keys)  # a fresh group: from the earliest offset
        quiet = 0
        while quiet < 3:
            got = reader.poll()
            reads += got
            quiet = 0 if got else quiet + 1
    finally:
        _try(reader.close)
    history.append(
        {
            "type": "ok",
            "process": "final",
            "f": "final-poll",
            "value": [["poll", [list(r) for r in reads], 0]],
            "complete": keys,
        }
    )
    return sorted(v for _k, _o, v in reads if v in values)


def _metadata(cluster: ChaosCluster, via: int) -> Any:
    """Cluster metadata as broker ``via`` sees it (a client that knows only that broker)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.client_proxy[via].address, "log_level": 4})
    return admin.list_topics(timeout=10)


def _stale_leader_marker(
    cluster: ChaosCluster, rec: _Recorder, history: HistoryWriter, client: str
) -> dict[str, Any]:
    out: dict[str, Any] = {"scenario": "stale-leader-marker", "client": client}
    # Roles: the coordinator C of a transactional id that is not the controller X; a key led by
    # the third broker L. The first producer creates __transaction_state.
    producer = _client(cluster, client, f"chaos-scenario-{uuid.uuid4().hex[:8]}", "s", "chaos-s0")
    _try(producer.close)
    md = _metadata(cluster, min(cluster.brokers))
    controller = int(md.controller_id)
    states = md.topics["__transaction_state"].partitions
    tid = next(
        t
        for t in (f"chaos-scenario-{uuid.uuid4().hex[:8]}" for _ in range(1000))
        if states[java_partition(t, len(states))].leader not in (controller, -1)
    )
    coordinator = int(states[java_partition(tid, len(states))].leader)
    key = next(k for k in range(KEYS) if _leader(cluster, k) not in (controller, coordinator))
    leader = _leader(cluster, key)
    others = [n for n in cluster.brokers if n != leader]
    other_key = next(k for k in range(KEYS) if _leader(cluster, k) != leader)
    out.update(controller=controller, coordinator=coordinator, leader=leader, key=key)
    producer = _client(cluster, client, tid, "chaos-scenario", "chaos-s1")
    v1, v1b, v2 = 1_000_001, 1_000_002, 1_000_003
    try:
        rec.invoke(
            1,
            "txn",
            [["send", key, v1, None], ["send", other_key, v1b, None]],
            abort=True,
            client_id="chaos-s1",
        )
        producer.begin()
        o1 = producer.send(key, v1)
        o1b = producer.send(other_key, v1b)
        # L goes stale: no etcd, no controller either way, no followers, no clients; only C's
        # requests reach it (and L still follows the partitions it does not lead, so that the
        # coordinator's own writes keep their in-sync replicas).
        for p in cluster.etcd_proxy[leader]:
            p.cut()
        cluster.client_proxy[leader].cut()
        cluster.repl_proxy[leader].block_client_ids(
            (f"broker-{controller}", *(f"fetcher-{n}" for n in others))
        )
        for n in others:
            cluster.repl_proxy[n].block_client_ids((f"broker-{leader}",))
        err = _try(producer.abort_txn)  # EndTxn answers once PrepareAbort is written
        rec.done(
            1,
            "txn",
            "fail" if err is None else "info",
            [["send", key, v1, o1], ["send", other_key, v1b, o1b]],
            error=err or "aborted on purpose",
        )
        out["t1_end"] = err or "aborted"

        def moved() -> bool:
            tm = _metadata(cluster, coordinator).topics.get(topic_partition(key)[0])
            return tm is not None and tm.partitions[topic_partition(key)[1]].leader in others

        out["leader_moved"] = _until(moved, 60)
        cluster.heal_network()
        # T2, the same producer id and epoch: commit v2 on the same key.
        rec.invoke(2, "txn", [["send", key, v2, None]], client_id="chaos-s1")
        producer.begin()
        o2 = producer.send(key, v2)
        commit_start = round(history.now(), 6)
        err = _try(producer.commit_txn)
        rec.done(
            2,
            "txn",
            "ok" if err is None else "info",
            [["send", key, v2, o2]],
            error=err,
            commit_start=commit_start,
        )
        out["t2_end"] = err or "committed"
    finally:
        _try(producer.close)
    out["final"] = _final_read(cluster, history, sorted({key, other_key}), {v1, v1b, v2})
    report: Report = check(history.entries)
    out["anomalies"] = {k: len(v) for k, v in report.anomalies.items()}
    out["report"] = report
    return out


OFFSETS_TOPIC = "__consumer_offsets"


def _commit(bootstrap: str, group: str, key: int, offset: int) -> str | None:
    """Commit ``offset`` of ``key`` for ``group`` (a member-less commit, as a simple consumer
    makes) until the coordinator acknowledges it; None, or the last error after 60 s."""
    from confluent_kafka import Consumer, TopicPartition

    t, p = topic_partition(key)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "log_level": 4,
        }
    )
    errors: list[str | None] = []

    def commit() -> bool:
        errors.append(
            _try(lambda: c.commit(offsets=[TopicPartition(t, p, offset)], asynchronous=False))
        )
        return errors[-1] is None

    try:
        _until(commit, 60)
    finally:
        c.close()
    return errors[-1] if errors else "never tried"


def _committed(bootstrap: str, group: str, key: int) -> int | None:
    """The offset of ``key`` committed for ``group``, read through ``bootstrap``."""
    from confluent_kafka import Consumer, TopicPartition

    t, p = topic_partition(key)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 4})
    got: list[int] = []
    try:

        def read() -> bool:
            try:
                tp = c.committed([TopicPartition(t, p)], timeout=10)[0]
            except Exception:  # noqa: BLE001 - a moving coordinator: ask again
                return False
            if tp.error is not None:
                return False
            got.append(int(tp.offset))
            return True

        _until(read, 60)
    finally:
        c.close()
    return got[-1] if got else None


def _offset_fetch_at(address: str, group: str, key: int) -> tuple[int, int, int]:
    """OffsetFetch (v7) sent straight to the broker behind ``address``, whatever the cluster
    says its coordinator is: (group error, partition error, committed offset)."""
    from gregor.client.conn import BrokerConnection
    from gregor.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

    t, p = topic_partition(key)
    host, port = address.rsplit(":", 1)

    async def fetch() -> OffsetFetchResponse:
        conn = await BrokerConnection(host, int(port)).connect()
        try:
            req = OffsetFetchRequest(
                group_id=group,
                topics=[OffsetFetchRequest.Topics(name=t, partition_indexes=[p])],
            )
            response: OffsetFetchResponse = await conn.request(req, 7, timeout=30)
            return response
        finally:
            conn.close()

    r = asyncio.run(fetch())
    parts = [q for topic in r.topics if topic.name == t for q in topic.partitions]
    if not parts:
        return r.error_code, -1, -1
    return r.error_code, parts[0].error_code, parts[0].committed_offset


def _offsets_leader(cluster: ChaosCluster, via: int, group: str) -> int:
    """The leader of ``group``'s partition of ``__consumer_offsets`` in broker ``via``'s image."""
    t = _metadata(cluster, via).topics.get(OFFSETS_TOPIC)
    if t is None or t.error is not None or not t.partitions:
        return -1
    return int(t.partitions[java_partition(group, len(t.partitions))].leader)


def _stale_coordinator(cluster: ChaosCluster, rec: _Recorder) -> dict[str, Any]:
    out: dict[str, Any] = {"scenario": "stale-coordinator", "client": rec.client}
    key = 0
    # The first commit creates __consumer_offsets; then a group coordinated by a broker that is
    # not the controller (cutting the controller off would also move the controller).
    err = _commit(cluster.bootstrap_servers, f"chaos-first-{uuid.uuid4().hex[:6]}", key, 1)
    if err is not None:
        raise RuntimeError(f"the first offset commit failed: {err}")
    md = _metadata(cluster, min(cluster.brokers))
    controller = int(md.controller_id)
    parts = md.topics[OFFSETS_TOPIC].partitions
    group = next(
        g
        for g in (f"chaos-stale-coordinator-{uuid.uuid4().hex[:8]}" for _ in range(1000))
        if parts[java_partition(g, len(parts))].leader not in (controller, -1)
    )
    old = int(parts[java_partition(group, len(parts))].leader)
    others = [n for n in cluster.brokers if n != old]
    out.update(controller=controller, old_coordinator=old, group=group)

    def commit(process: int, bootstrap: str, offset: int) -> str | None:
        """A commit, in the history as a consumer's (empty) poll that committed ``offset``."""
        rec.invoke(process, "poll", [["poll", []]], group=group)
        error = _commit(bootstrap, group, key, offset)
        done = {"commit": [[key, offset]]} if error is None else {"commit_info": [[key, offset]]}
        rec.done(
            process,
            "poll",
            "ok" if error is None else "info",
            [["poll", [], 0]],
            **done,
            group=group,
            error=error,
        )
        return error

    def fetch_at(process: str, broker: int) -> tuple[int, int, int]:
        """OffsetFetch straight to ``broker``, in the history as a ``committed`` read."""
        rec.invoke(process, "committed", [key], group=group)
        got = _offset_fetch_at(cluster.client_proxy[broker].address, group, key)
        if got[0] or got[1]:
            rec.done(process, "committed", "fail", [key], group=group, error=got[:2], broker=broker)
        else:
            rec.done(process, "committed", "ok", [[key, got[2]]], group=group, broker=broker)
        return got

    out["first_commit"] = commit(1, cluster.bootstrap_servers, 5)
    out["before"] = fetch_at("before", old)
    # O goes stale: no etcd, no other broker either way; clients still reach it.
    cluster.isolate(old)
    rec.h.append({"type": "info", "process": "nemesis", "f": "isolate", "value": [old]})

    def moved() -> bool:
        return _offsets_leader(cluster, others[0], group) in others

    out["coordinator_moved"] = _until(moved, 90)
    out["new_coordinator"] = _offsets_leader(cluster, others[0], group)
    out["second_commit"] = commit(2, ",".join(cluster.client_proxy[n].address for n in others), 7)
    out["stale_answer"] = fetch_at("stale", old)
    cluster.heal_network()
    rec.h.append({"type": "info", "process": "nemesis", "f": "heal", "value": [old]})
    rec.invoke("after", "committed", [key], group=group)
    after = _committed(cluster.bootstrap_servers, group, key)
    if after is None:
        rec.done("after", "committed", "info", [key], group=group, error="no answer")
    else:
        rec.done("after", "committed", "ok", [[key, after]], group=group)
    out["after_heal"] = after
    report: Report = check(rec.h.entries)
    out["anomalies"] = {k: len(v) for k, v in report.anomalies.items()}
    out["report"] = report
    return out
