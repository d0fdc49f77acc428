"""The exactly-once stream writer: Kafka transactions per task, committed by the driver per batch.

Spark's Kafka sink is at-least-once: a micro-batch replayed after a failure writes its records
again. This writer makes each batch's records visible exactly once to ``read_committed``
consumers, using only Kafka's transaction protocol, so it works with any broker that has
transactions.

Theory of operation. A write task of batch ``B`` (Spark's ``streaming.sql.batchId`` local
property) of query ``Q`` (``sql.streaming.queryId``, stable across restarts from one
checkpoint), partition ``P``, owns the transactional id ``<prefix>-<Q>-<P>``. It

1. looks up the query's *decision* (below); if batch ``B`` is already decided, it is a replay of
   a batch whose records are written: the task commits its own decided transaction (rolling
   forward a commit the driver may not have finished) and writes nothing;
2. otherwise calls InitProducerId for its id, which fences any earlier holder of the id and
   aborts whatever transaction it left open (an attempt killed mid-write, a batch whose driver
   died before deciding), begins a transaction, sends its rows, flushes, and returns the
   transaction's handle (id, producer id, epoch) to the driver **without committing**.

The driver's ``commit(messages, B)``:

1. if ``B`` is already decided (a replay), commits the decided handles again (EndTxn is
   idempotent for a completed commit with the same epoch) and stops;
2. otherwise appends a decision record ``{query, batch, txns: [[id, pid, epoch], ...]}`` to the
   commit topic (``gregor.sinkCommitTopic``, compacted) at offset ``o``, then commits the
   consumer-group offset ``o + 1`` with metadata ``B`` for group ``<prefix>-<Q>`` on that
   partition. That offset commit is the decision: one atomic write. Then it sends EndTxn
   (commit) for every handle.

A crash before the decision leaves open transactions that the replayed tasks' InitProducerId
aborts; a crash after it leaves a decision that the replay (tasks and driver) rolls forward.
Either way each row of the batch becomes visible once. ``abort`` ends the handles it got.

Limits. Transactions stay open from the write to the driver's commit, so
``kafka.transaction.timeout.ms`` (default here 15 minutes, the broker's usual maximum) must
cover a batch plus a driver restart; a decided transaction the broker aborted on timeout is
reported as an error, not silently lost. Speculative execution must stay off (Spark's default):
two attempts of one task fence each other. A partition's rows must be the same when a batch is
replayed (deterministic queries, as every exactly-once sink of Spark assumes).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from gregor.client import (
    AdminClient,
    KafkaError,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from gregor.client.bulk import RangeReader, shared_client
from gregor.spark.options import OptionError
from gregor.spark.sink_options import SinkOptions
from gregor.spark.writer import send_batches

log = logging.getLogger("gregor.spark")

TXN_TIMEOUT_MS = "900000"
_ADMIN_KEYS = ("bootstrap.servers", "client.id", "request.timeout.ms", "security.protocol")


@dataclass
class TxnCommitMessage(WriterCommitMessage):
    """What a task tells the driver: its transaction's handle, or that the batch was decided."""

    query_id: str
    batch_id: int
    partition: int
    transactional_id: str
    producer_id: int = -1
    producer_epoch: int = -1
    records: int = 0
    replayed: bool = False


@dataclass(frozen=True)
class Decision:
    batch_id: int
    txns: list[tuple[str, int, int]] = field(default_factory=list)


# --- the decision: a record in the commit topic, and a group offset pointing at it ---

_ADMINS: dict[tuple[tuple[str, str], ...], AdminClient] = {}
_ENSURED: set[tuple[str, str]] = set()
_LOCK = threading.Lock()


def _admin(settings: dict[str, str]) -> AdminClient:
    key = tuple(sorted(settings.items()))
    with _LOCK:
        a = _ADMINS.get(key)
        if a is None:
            a = _ADMINS[key] = AdminClient({k: v for k, v in settings.items() if k in _ADMIN_KEYS})
        return a


def group_id(options: SinkOptions, query_id: str) -> str:
    return f"{options.transactional_id_prefix}-{query_id}"


def ensure_commit_topic(options: SinkOptions) -> None:
    """Create the compacted one-partition commit topic if it is missing (once per process)."""
    key = (options.client["bootstrap.servers"], options.commit_topic)
    if key in _ENSURED:
        return
    admin = _admin(options.client)
    if options.commit_topic not in admin.list_topics():
        res = admin.create_topics(
            [NewTopic(options.commit_topic, 1, -1, {"cleanup.policy": "compact"})]
        )
        err = res.get(options.commit_topic)
        if err is not None and err.name != "TOPIC_ALREADY_EXISTS":
            raise err
    _ENSURED.add(key)


def last_decision(options: SinkOptions, query_id: str) -> Decision | None:
    """The query's latest decided batch and its transactions, or None."""
    tp = TopicPartition(options.commit_topic, 0)
    got = (
        _admin(options.client)
        .list_consumer_group_offsets(group_id(options, query_id), [tp])
        .get(tp)
    )
    if got is None or got.offset <= 0 or not (got.metadata or "").startswith("batch="):
        return None
    reader = RangeReader(
        shared_client(options.client), options.commit_topic, 0, got.offset - 1, got.offset
    )
    for batch in reader:
        for value in batch.column(batch.schema.names.index("value")).to_pylist():
            d = json.loads(value)
            if d.get("query") == query_id:
                return Decision(int(d["batch"]), [(t, int(p), int(e)) for t, p, e in d["txns"]])
    raise OptionError(
        f"the decision record of query {query_id} at offset {got.offset - 1} of {options.commit_topic} is missing"
    )


def decide(
    options: SinkOptions, query_id: str, batch_id: int, txns: list[tuple[str, int, int]]
) -> None:
    """Write the decision record, then the group offset that makes it the decision."""
    record = json.dumps(
        {"query": query_id, "batch": batch_id, "txns": [list(t) for t in txns]}
    ).encode()
    with Producer({**options.client, "acks": "all", "enable.idempotence": True}) as p:
        meta = p.send(options.commit_topic, record, query_id.encode(), partition=0).result(60)
    tp = TopicPartition(options.commit_topic, 0)
    _admin(options.client).alter_consumer_group_offsets(
        group_id(options, query_id), {tp: OffsetAndMetadata(meta.offset + 1, f"batch={batch_id}")}
    )


# --- ending transactions from another process than the one that wrote them ---


def end_transactions(
    settings: dict[str, str], txns: list[tuple[str, int, int]], commit: bool, timeout: float = 120.0
) -> None:
    """Commit (or abort) transactions by id, producer id and epoch, all at once."""
    if not txns:
        return
    got = _admin(settings).end_transactions(txns, commit, timeout=timeout)
    errors = [(h, e) for h, e in got.items() if e is not None]
    if errors:
        (tid, _p, _e), err = errors[0]
        raise OptionError(
            f"could not {'commit' if commit else 'abort'} the transaction of {tid} ({len(errors)} of {len(txns)} "
            f"failed): {err!r}. A decided transaction the broker aborted (transaction.timeout.ms passed) "
            "has lost its records."
        ) from err


# --- the writer ---


def _task() -> tuple[str, int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    query = ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None
    batch = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
    if ctx is None or query is None or batch is None:
        raise OptionError("the exactly-once Kafka sink runs only in micro-batch streaming queries")
    return query, int(batch), ctx.partitionId()


class TransactionalStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        ensure_commit_topic(options)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:  # type: ignore[override]
        query_id, batch_id, partition = _task()
        o = self.options
        tid = f"{o.transactional_id_prefix}-{query_id}-{partition}"
        msg = TxnCommitMessage(query_id, batch_id, partition, tid)
        decided = last_decision(o, query_id)
        if decided is not None and decided.batch_id >= batch_id:
            for _ in iterator:  # a replay of a decided batch: its rows are written already
                pass
            mine = [t for t in decided.txns if t[0] == tid]
            if decided.batch_id == batch_id:
                end_transactions(o.client, mine, True)
            msg.replayed = True
            return msg
        settings = {"transaction.timeout.ms": TXN_TIMEOUT_MS, **o.client, "transactional.id": tid}
        producer = Producer(settings)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            if o.columns:
                from gregor.spark.sink_encode import encode_batches

                iterator = encode_batches(iterator, o.columns)
            msg.records = send_batches(producer, o.topic, iterator)
            _tid, msg.producer_id, msg.producer_epoch = producer.transaction_handle()
        except BaseException:
            try:
                producer.abort_transaction()
            except (KafkaError, OSError, RuntimeError):  # fenced or gone: InitProducerId cleans up
                pass
            raise
        finally:
            producer.close()
        return msg

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        msgs = [m for m in messages if isinstance(m, TxnCommitMessage)]
        if not msgs:
            return
        query_id = msgs[0].query_id
        written = [
            (m.transactional_id, m.producer_id, m.producer_epoch)
            for m in msgs
            if not m.replayed and m.records
        ]
        decided = last_decision(self.options, query_id)
        if decided is not None and decided.batch_id >= batchId:
            end_transactions(
                self.options.client, [t for t in written if t not in decided.txns], False
            )
            if decided.batch_id == batchId:
                end_transactions(self.options.client, decided.txns, True)
            return
        decide(self.options, query_id, batchId, written)
        end_transactions(self.options.client, written, True)
        log.info(
            "batch %d of query %s: %d transactions, %d records committed",
            batchId,
            query_id,
            len(written),
            sum(m.records for m in msgs),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        written = [
            (m.transactional_id, m.producer_id, m.producer_epoch)
            for m in messages
            if isinstance(m, TxnCommitMessage) and not m.replayed and m.records
        ]
        try:
            end_transactions(self.options.client, written, False)
        except OptionError as e:  # the next InitProducerId of each id aborts them anyway
            log.warning("aborting batch %d: %s", batchId, e)


__all__ = [
    "Decision",
    "TransactionalStreamWriter",
    "TxnCommitMessage",
    "decide",
    "end_transactions",
    "ensure_commit_topic",
    "last_decision",
]
