"""AlterReplicaLogDirs: moving a hosted partition's log to another of the broker's log
directories while the partition keeps serving.

Theory of operation. ``LogManager.begin_move`` makes a future log in the target directory; its
segments are copied in an executor thread while the partition keeps taking writes, then
``finish_move`` catches it up and swaps it in on the event loop with no write in between, and
the partition (if this broker still hosts the same one) reads and writes the new log from then
on (Kafka's ``ReplicaAlterLogDirsManager``, with a copy instead of a fetcher). A failed copy
leaves the log where it was. The copies under way are held here so they are not collected.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from gregor.broker.common.errors import code_of
from gregor.broker.replication.partition import Partition
from gregor.protocol.errors import ErrorCode, KafkaError
from gregor.storage.log_move import LogCopy, copy_all
from gregor.storage.manager import LogManager

log = logging.getLogger("gregor.broker.replica_manager")


class LogDirMoves:
    def __init__(self, logs: LogManager, hosted: Mapping[tuple[str, int], Partition]) -> None:
        self.logs = logs
        self.hosted = hosted  # the replica manager's partitions, by (topic, index)
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, partition: Partition, log_dir: str) -> ErrorCode:
        """Start moving ``partition``'s log to ``log_dir``: REPLICA_NOT_AVAILABLE when its log
        is not this broker's, LOG_DIR_NOT_FOUND for a directory that is not one of its log
        directories; NONE once the move is under way (or there is nothing to move)."""
        topic, index = partition.topic, partition.index
        try:
            job = self.logs.begin_move(topic, index, log_dir)
        except KeyError:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        except KafkaError as e:
            return code_of(e)
        if job is not None:
            task = asyncio.create_task(self._move(partition, job), name=f"move-{topic}-{index}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return ErrorCode.NONE

    async def _move(self, partition: Partition, job: LogCopy) -> None:
        topic, index = partition.topic, partition.index
        try:
            await asyncio.get_running_loop().run_in_executor(None, copy_all, job)
            new = self.logs.finish_move(topic, index, job)
        except Exception:  # noqa: BLE001 - the log stays where it was; say why
            log.exception("moving the log of %s-%d failed", topic, index)
            self.logs.abort_move(topic, index, job)
            return
        if new is not None and self.hosted.get((topic, index)) is partition:
            partition.log = new
