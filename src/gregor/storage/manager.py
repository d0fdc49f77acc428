"""The log manager: every partition's log across the broker's log directories.

Theory of operation. Each log directory holds one subdirectory per partition
(``<topic>-<partition>``) and Kafka's per-directory files: ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` (high watermarks),
``cleaner-offset-checkpoint`` (compaction's first dirty offsets) and, while the broker is down
after a clean shutdown, ``.kafka_cleanshutdown``. :meth:`LogManager.startup` removes
directories left half-deleted (``<topic>-<partition>.<uuid>-delete``), opens every log with the
checkpointed offsets (recovering it unless the directory was shut down cleanly) and then
removes the marker, so a crash from then on is seen as unclean at the next start. A directory
with no partition in it (a new one) has nothing to recover and is a clean start.

Periodic work, for the broker's background task: :meth:`run_periodic` applies retention,
``flush.ms``, producer-id expiry, compaction and checkpoints at their intervals, and returns
the files whose deletion delay passed; pass them to :func:`delete_files` (plain blocking file
work) in an executor. Every other method touches logs and must run where their owners run
(the broker's event loop), one call at a time, with two exceptions:

* Checkpoints. :meth:`prepare_checkpoint` (on the owner: reads offsets, formats the files, no
  I/O) and :meth:`write_checkpoint` (any thread: writes and fsyncs them, then prunes producer
  snapshots recovery no longer needs). Writes are serialized, and a set prepared earlier is
  never written over a newer one. ``run_periodic(background_checkpoint=True)`` hands the
  checkpoint to :func:`delete_files` instead of writing it on the caller's thread.
* Shutdown. :meth:`close` flushes and closes the logs in a small thread pool (Kafka's
  ``num.recovery.threads.per.data.dir``): each log's work is a few fsyncs (its data, its
  producer snapshot and directory), and the disk serves them better together than one by one.
  Then one checkpoint write per file per directory and the clean-shutdown markers.

Topic configs: ``default_config`` holds the broker's defaults; :meth:`set_topic_config` layers
a topic's overrides (Kafka names) on top and applies them to its existing logs.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from gregor.protocol.errors import LogDirNotFoundError
from gregor.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    CLEANER_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    format_offsets,
    fsync_dir,
    read_offsets,
    write_atomically,
)
from gregor.storage.cleaner import CleanResult, LogCleaner
from gregor.storage.clock import Clock, now_ms
from gregor.storage.config import LogConfig
from gregor.storage.errors import KafkaStorageError
from gregor.storage.files import parse_topic_partition
from gregor.storage.log import Log
from gregor.storage.log_move import FUTURE_DIR_SUFFIX, LogCopy, catch_up
from gregor.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    delete_snapshot_files_below,
)
from gregor.storage.retention import delete_segment_files
from gregor.storage.segment import LogSegment

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
DELETE_DIR_SUFFIX = "-delete"
CLOSE_THREADS = 16  # logs flushed and closed at once by LogManager.close


class CheckpointWriter:
    """Writes :class:`CheckpointFiles`, one set at a time, never a set over a newer one."""

    def __init__(self, *, sync: bool) -> None:
        self._sync = sync
        self._lock = threading.Lock()
        self._written = 0  # sequence of the newest set written

    def write(self, files: CheckpointFiles) -> bool:
        """Write ``files`` (blocking; any thread); False if a newer set was written first."""
        with self._lock:
            if files.sequence <= self._written:
                return False
            for path, data in files.files:
                write_atomically(path, data, sync=self._sync)
            self._written = files.sequence
        for directory, keep_from in files.snapshot_prunes:
            delete_snapshot_files_below(directory, keep_from)
        return True


@dataclass(frozen=True)
class CheckpointFiles:
    """The checkpoint files of every log directory as of one moment (Kafka's recovery point,
    log start, replication and cleaner offset checkpoints), ready to write from any thread
    with :meth:`write`; and the producer snapshots recovery no longer needs after it."""

    sequence: int
    files: tuple[tuple[str, bytes], ...]  # (path, contents)
    snapshot_prunes: tuple[tuple[str, int], ...]  # (partition directory, oldest snapshot kept)
    writer: CheckpointWriter = field(repr=False, compare=False)

    def write(self) -> bool:
        return self.writer.write(self)


@dataclass
class PendingDeletions:
    """File work for a thread off the event loop: detached segments and renamed directories
    whose delay passed, and (``run_periodic(background_checkpoint=True)``) a checkpoint."""

    segments: list[LogSegment] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)
    checkpoint: CheckpointFiles | None = None

    def __bool__(self) -> bool:
        return bool(self.segments or self.directories or self.checkpoint)


def delete_files(pending: PendingDeletions) -> None:
    """Do what :meth:`LogManager.run_periodic` handed out (blocking; any thread): write the
    checkpoint if any, remove the files."""
    if pending.checkpoint is not None:
        pending.checkpoint.write()
    delete_segment_files(pending.segments)
    for path in pending.directories:
        shutil.rmtree(path, ignore_errors=True)


def _run_all(work: Callable[[Log], None], logs: list[Log], threads: int) -> None:
    """``work(log)`` for every log, ``threads`` at a time; re-raises the first failure once
    all are done."""
    if len(logs) <= 1 or threads <= 1:
        for log in logs:
            work(log)
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(logs))) as pool:
        futures = [pool.submit(work, log) for log in logs]
    for f in futures:
        f.result()


def _flush_and_close(log: Log) -> None:
    log.flush()
    log.close()


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[str] | str,
        default_config: LogConfig | Mapping[str, object] | None = None,
        *,
        topic_configs: Mapping[str, Mapping[str, object]] | None = None,
        clock: Clock = now_ms,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        retention_check_interval_ms: int = 5 * 60 * 1000,
        checkpoint_interval_ms: int = 60 * 1000,
        producer_expiration_check_interval_ms: int = 10 * 60 * 1000,
        cleaner_backoff_ms: int = 15 * 1000,
        cleaner: LogCleaner | None = None,
        sync_metadata: bool = True,
        startup: bool = True,
        close_threads: int = CLOSE_THREADS,
    ) -> None:
        if isinstance(log_dirs, str):
            log_dirs = [log_dirs]
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        if isinstance(default_config, Mapping):
            default_config = LogConfig.from_props(default_config)
        self.default_config = default_config or LogConfig()
        self._topic_overrides: dict[str, dict[str, object]] = {
            t: dict(o) for t, o in (topic_configs or {}).items()
        }
        self._clock = clock
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self.producer_expiration_check_interval_ms = producer_expiration_check_interval_ms
        self.cleaner_backoff_ms = cleaner_backoff_ms
        self.cleaner = cleaner or LogCleaner(clock=clock)
        self._sync = sync_metadata
        self.close_threads = close_threads
        self._checkpoints = CheckpointWriter(sync=sync_metadata)
        self._checkpoint_sequence = itertools.count(1)
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._first_dirty: dict[TopicPartition, int] = {}
        self._moving: dict[TopicPartition, tuple[str, LogCopy]] = {}
        self._pending_dirs: list[tuple[int, str, Log]] = []
        now = clock()
        self._last_run = {"retention": now, "checkpoint": now, "producers": now, "clean": now}
        self._started = False
        if startup:
            self.startup()

    # --- configuration ---

    def config_for(self, topic: str) -> LogConfig:
        overrides = self._topic_overrides.get(topic)
        if not overrides:
            return self.default_config
        return self.default_config.with_overrides(overrides)

    def set_topic_config(self, topic: str, overrides: Mapping[str, object]) -> LogConfig:
        """Replace ``topic``'s overrides; existing logs pick the new config up at once."""
        config = self.default_config.with_overrides(overrides)
        self._topic_overrides[topic] = dict(overrides)
        for (t, _), log in self._logs.items():
            if t == topic:
                log.config = config
        return config

    def topic_overrides(self, topic: str) -> dict[str, object]:
        return dict(self._topic_overrides.get(topic, {}))

    # --- loading ---

    def startup(self) -> None:
        if self._started:
            return
        for d in self.log_dirs:
            self._load_dir(d)
        self._started = True

    def _read_checkpoint(self, d: str, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offsets(os.path.join(d, name))
        except CheckpointError as e:
            logger.warning("ignoring an unreadable checkpoint (%s); logs will be recovered", e)
            return {}

    def _load_dir(self, d: str) -> None:
        os.makedirs(d, exist_ok=True)
        marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery_points = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT)
        cleaner_offsets = self._read_checkpoint(d, CLEANER_OFFSET_CHECKPOINT)
        loaded = 0
        for name in sorted(os.listdir(d)):
            path = os.path.join(d, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX) or name.endswith(FUTURE_DIR_SUFFIX):
                logger.info(
                    "removing %s, a log deleted (or a move unfinished) before the last shutdown",
                    path,
                )
                shutil.rmtree(path, ignore_errors=True)
                continue
            tp = parse_topic_partition(name)
            if tp is None:
                continue
            if tp in self._logs:
                raise KafkaStorageError(
                    f"{name} is in two log directories: {self._dir_of[tp]} and {d}"
                )
            log = Log(
                path,
                self.config_for(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                high_watermark=high_watermarks.get(tp),
                had_clean_shutdown=clean,
                clock=self._clock,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                sync_metadata=self._sync,
            )
            self._logs[tp] = log
            self._dir_of[tp] = d
            if tp in cleaner_offsets:
                self._first_dirty[tp] = cleaner_offsets[tp]
            loaded += 1
        if clean:
            os.unlink(marker)
        if clean:
            how = "clean shutdown"
        elif loaded:
            how = "unclean shutdown"
        else:
            how = "no logs: a new log directory, nothing to recover"
        logger.info("loaded %d log(s) from %s (%s)", loaded, d, how)

    # --- logs ---

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int) -> Log:
        tp = (topic, partition)
        log = self._logs.get(tp)
        if log is not None:
            return log
        if not topic or "/" in topic or topic in (".", ".."):
            raise ValueError(f"invalid topic name {topic!r}")
        counts = {d: 0 for d in self.log_dirs}
        for owner in self._dir_of.values():
            counts[owner] += 1
        d = min(self.log_dirs, key=lambda x: (counts[x], self.log_dirs.index(x)))
        log = Log(
            os.path.join(d, f"{topic}-{partition}"),
            self.config_for(topic),
            clock=self._clock,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            sync_metadata=self._sync,
        )
        self._logs[tp] = log
        self._dir_of[tp] = d
        logger.info("created log %s-%d in %s", topic, partition, d)
        return log

    # --- moving a log to another log directory (AlterReplicaLogDirs) ---

    def begin_move(self, topic: str, partition: int, target_dir: str) -> LogCopy | None:
        """Start moving a partition's log to ``target_dir`` (one of ``log_dirs``): the copy job
        for ``log_move.copy_all`` (any thread), then ``finish_move`` on the owner. None when
        there is nothing to do (already there, or already moving). KeyError when this broker
        has no such log; LogDirNotFoundError for a directory that is not a log directory."""
        tp = (topic, partition)
        log = self._logs[tp]
        target = os.path.abspath(target_dir)
        if target not in self.log_dirs:
            raise LogDirNotFoundError(f"{target_dir} is not one of this broker's log directories")
        if self._dir_of[tp] == target or tp in self._moving:
            return None
        future = os.path.join(target, f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}")
        job = LogCopy(log.dir, future)
        self._moving[tp] = (target, job)
        return job

    def moving(self) -> dict[TopicPartition, str]:
        """Partitions being moved, and the log directory each is moving to (the future log)."""
        return {tp: target for tp, (target, _) in self._moving.items()}

    def abort_move(self, topic: str, partition: int, job: LogCopy) -> None:
        if self._moving.get((topic, partition), (None, None))[1] is job:
            del self._moving[(topic, partition)]
        shutil.rmtree(job.future_dir, ignore_errors=True)

    def finish_move(self, topic: str, partition: int, job: LogCopy) -> Log | None:
        """On the owner, after ``copy_all``: catch the copy up with the log, put it in place and
        open it as the partition's log; the old directory is deleted like a deleted log's
        (after ``file.delete.delay.ms``, so reads in flight finish). None (and the copy
        removed) if the log was deleted or replaced meanwhile."""
        tp = (topic, partition)
        target, current = self._moving.get(tp, (None, None))
        old = self._logs.get(tp)
        if current is not job or old is None or old.dir != job.source_dir or target is None:
            self.abort_move(topic, partition, job)
            return None
        try:
            catch_up(job)
            final = os.path.join(target, f"{topic}-{partition}")
            os.replace(job.future_dir, final)
            fsync_dir(target)
            new = Log(
                final,
                old.config,
                recovery_point=old.recovery_point,
                log_start_offset=old.log_start_offset,
                high_watermark=old.high_watermark,
                had_clean_shutdown=False,
                clock=self._clock,
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                sync_metadata=self._sync,
            )
        except BaseException:
            self.abort_move(topic, partition, job)
            raise
        del self._moving[tp]
        retired = os.path.join(
            os.path.dirname(old.dir), f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        )
        os.replace(old.dir, retired)
        fsync_dir(os.path.dirname(old.dir))
        self._pending_dirs.append((self._clock() + old.config.file_delete_delay_ms, retired, old))
        self._logs[tp] = new
        self._dir_of[tp] = target
        logger.info("moved log %s-%d to %s", topic, partition, target)
        return new

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the partition's directory to ``<topic>-<partition>.<uuid>-delete`` (so a
        restart finishes the job) and remove it after ``file.delete.delay.ms``."""
        tp = (topic, partition)
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        self._dir_of.pop(tp)
        self._first_dirty.pop(tp, None)
        target = os.path.join(
            os.path.dirname(log.dir), f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        )
        os.replace(log.dir, target)
        fsync_dir(os.path.dirname(log.dir))
        due = self._clock() + log.config.file_delete_delay_ms
        if log.config.file_delete_delay_ms == 0:
            log.close_handles()
            shutil.rmtree(target, ignore_errors=True)
        else:
            self._pending_dirs.append((due, target, log))
        logger.info("deleted log %s-%d", topic, partition)
        return True

    # --- periodic work ---

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention over every log; returns the number of segments deleted."""
        now = self._clock() if now_ms is None else now_ms
        total = 0
        for log in self._logs.values():
            total += log.delete_old_segments(now)
        return total

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """flush.ms over every log; returns how many were flushed."""
        now = self._clock() if now_ms is None else now_ms
        return sum(1 for log in self._logs.values() if log.maybe_flush_on_time(now))

    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        now = self._clock() if now_ms is None else now_ms
        return sum(len(log.remove_expired_producers(now)) for log in self._logs.values())

    def first_dirty_offset(self, topic: str, partition: int) -> int:
        tp = (topic, partition)
        log = self._logs[tp]
        return max(self._first_dirty.get(tp, 0), log.log_start_offset)

    def clean_logs(self, now_ms: int | None = None, *, force: bool = False) -> list[CleanResult]:
        """Compact every compacted log that is dirty enough (blocking; see LogCleaner for
        running the heavy phase elsewhere)."""
        now = self._clock() if now_ms is None else now_ms
        results = []
        for tp, log in self._logs.items():
            if not log.config.compact:
                continue
            first_dirty = self.first_dirty_offset(*tp)
            if first_dirty > log.log_end_offset:
                first_dirty = log.log_end_offset
            result = self.cleaner.clean(log, first_dirty, now_ms=now, force=force)
            if result is not None:
                if not result.aborted:
                    self._first_dirty[tp] = result.end_offset
                results.append(result)
        return results

    def record_cleaned(self, topic: str, partition: int, end_offset: int) -> None:
        """Note where a cleaning run outside :meth:`clean_logs` stopped."""
        self._first_dirty[(topic, partition)] = end_offset

    def take_due_deletions(self, now_ms: int | None = None) -> PendingDeletions:
        now = self._clock() if now_ms is None else now_ms
        pending = PendingDeletions()
        for log in self._logs.values():
            pending.segments.extend(log.take_due_deletions(now))
        keep = []
        for due, path, log in self._pending_dirs:
            if due <= now:
                log.close_handles()
                pending.directories.append(path)
            else:
                keep.append((due, path, log))
        self._pending_dirs = keep
        return pending

    def run_periodic(
        self, now_ms: int | None = None, *, background_checkpoint: bool = False
    ) -> PendingDeletions:
        """Everything periodic whose interval passed; returns the file work for
        :func:`delete_files` (with the checkpoint, when ``background_checkpoint``, instead of
        writing it here)."""
        now = self._clock() if now_ms is None else now_ms
        last = self._last_run
        if now - last["retention"] >= self.retention_check_interval_ms:
            self.cleanup_logs(now)
            last["retention"] = now
        self.flush_dirty_logs(now)
        if now - last["producers"] >= self.producer_expiration_check_interval_ms:
            self.remove_expired_producers(now)
            last["producers"] = now
        if now - last["clean"] >= self.cleaner_backoff_ms:
            self.clean_logs(now)
            last["clean"] = now
        checkpoint = None
        if now - last["checkpoint"] >= self.checkpoint_interval_ms:
            if background_checkpoint:
                checkpoint = self.prepare_checkpoint()
            else:
                self.checkpoint()
            last["checkpoint"] = now
        pending = self.take_due_deletions(now)
        pending.checkpoint = checkpoint
        return pending

    # --- checkpoints ---

    def _by_dir(self) -> dict[str, list[tuple[TopicPartition, Log]]]:
        out: dict[str, list[tuple[TopicPartition, Log]]] = {d: [] for d in self.log_dirs}
        for tp, log in self._logs.items():
            out[self._dir_of[tp]].append((tp, log))
        return out

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start, high-watermark and cleaner checkpoints, then
        drop producer snapshots older than recovery can need (blocking, on the owner)."""
        self.write_checkpoint(self.prepare_checkpoint())

    def prepare_checkpoint(self) -> CheckpointFiles:
        """The checkpoint as of now, for :meth:`write_checkpoint` (on the logs' owner; reads
        offsets and formats the files, no I/O)."""
        files: list[tuple[str, bytes]] = []
        prunes: list[tuple[str, int]] = []
        for d, entries in self._by_dir().items():
            recovery_points, log_starts, high_watermarks, first_dirty = [], [], [], []
            for (t, p), log in entries:
                recovery_points.append((t, p, log.recovery_point))
                log_starts.append((t, p, log.log_start_offset))
                high_watermarks.append((t, p, log.high_watermark))
                if (t, p) in self._first_dirty:
                    first_dirty.append((t, p, self._first_dirty[(t, p)]))
                if not log.closed:
                    prunes.append((log.dir, log.producer_snapshot_horizon()))
            for name, offsets in (
                (RECOVERY_POINT_CHECKPOINT, recovery_points),
                (LOG_START_OFFSET_CHECKPOINT, log_starts),
                (REPLICATION_OFFSET_CHECKPOINT, high_watermarks),
                (CLEANER_OFFSET_CHECKPOINT, first_dirty),
            ):
                files.append((os.path.join(d, name), format_offsets(offsets)))
        return CheckpointFiles(
            next(self._checkpoint_sequence), tuple(files), tuple(prunes), self._checkpoints
        )

    def write_checkpoint(self, files: CheckpointFiles) -> bool:
        """Write what :meth:`prepare_checkpoint` took (blocking; any thread, also while the
        owner goes on appending). False when a newer checkpoint was written first."""
        return files.write()

    # --- shutdown ---

    def close(self) -> None:
        """Flush and close every log (``close_threads`` at a time), write the checkpoints and
        the clean-shutdown marker (only once everything before is on disk)."""
        started = time.monotonic()
        _run_all(
            _flush_and_close, [log for log in self._logs.values() if not log.closed],
            self.close_threads,
        )  # fmt: skip
        self.checkpoint()
        for _, path, log in self._pending_dirs:
            log.close_handles()
            shutil.rmtree(path, ignore_errors=True)
        self._pending_dirs = []
        for d in self.log_dirs:
            write_atomically(os.path.join(d, CLEAN_SHUTDOWN_FILE), b"", sync=self._sync)
        logger.info(
            "log manager closed cleanly (%d logs in %.2f s)",
            len(self._logs),
            time.monotonic() - started,
        )

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
