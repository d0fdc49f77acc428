"""LogManager: directories, checkpoints in Kafka's format, clean shutdown, configs, periodic work."""

from __future__ import annotations

import logging
import os

import pytest
from storage_helpers import T0, batch, check_log, kv, read_records

from gregor.storage import LogConfig, LogManager, delete_files, from_broker_props
from gregor.storage.errors import InvalidConfigError

FAR = {"message.timestamp.after.max.ms": str(1 << 62)}


def manager(dirs, clock, **kw):
    kw.setdefault("default_config", {**FAR, "file.delete.delay.ms": "0"})
    return LogManager(dirs, clock=clock, sync_metadata=False, **kw)


def test_create_get_and_spread_over_dirs(tmp_path, clock):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    m = manager(dirs, clock)
    logs = [m.get_or_create_log("orders", p) for p in range(4)]
    assert m.get_or_create_log("orders", 2) is logs[2]
    assert m.get_log("orders", 9) is None
    placed = sorted(os.path.dirname(log.dir) for log in logs)
    assert placed == sorted(dirs * 2)
    assert os.path.isdir(os.path.join(dirs[0], "orders-0"))
    with pytest.raises(ValueError):
        m.get_or_create_log("../x", 0)


def test_checkpoint_files_and_clean_restart(tmp_path, clock):
    d = str(tmp_path / "data")
    m = manager(d, clock)
    log = m.get_or_create_log("my-topic.v2", 3)
    for _ in range(5):
        log.append(kv(2))
    log.update_high_watermark(8)
    m.get_or_create_log("other", 0).append(kv(1))
    m.close()
    with open(os.path.join(d, "recovery-point-offset-checkpoint")) as f:
        assert f.read() == "0\n2\nmy-topic.v2 3 10\nother 0 1\n"
    with open(os.path.join(d, "replication-offset-checkpoint")) as f:
        assert f.read() == "0\n2\nmy-topic.v2 3 8\nother 0 0\n"
    with open(os.path.join(d, "log-start-offset-checkpoint")) as f:
        assert f.read() == "0\n2\nmy-topic.v2 3 0\nother 0 0\n"
    with open(os.path.join(log.dir, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n1\n0 0\n"
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    m2 = manager(d, clock)
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    again = m2.get_log("my-topic.v2", 3)
    assert (again.log_end_offset, again.high_watermark, again.recovery_point) == (10, 8, 10)
    assert again.append(kv(1)).first_offset == 10


def test_unclean_restart_recovers_from_the_checkpointed_recovery_point(tmp_path, clock, caplog):
    caplog.set_level(logging.INFO, logger="gregor.storage")
    d = str(tmp_path / "data")
    m = manager(d, clock, default_config={**FAR, "segment.bytes": "400"})
    log = m.get_or_create_log("t", 0)
    for _ in range(6):
        log.append(kv(1, value=bytes(100)))
    log.flush()
    m.checkpoint()
    for _ in range(3):
        log.append(kv(1, value=bytes(100)))
    log.close_handles()  # crash
    m2 = manager(d, clock, default_config={**FAR, "segment.bytes": "400"})
    again = m2.get_log("t", 0)
    assert again.log_end_offset == 9
    assert "unclean shutdown, recovering" in caplog.text
    assert "(recovery point 6)" in caplog.text
    check_log(again)


def test_delete_log_renames_then_removes(tmp_path, clock):
    d = str(tmp_path / "data")
    m = manager(d, clock, default_config={**FAR, "file.delete.delay.ms": "1000"})
    log = m.get_or_create_log("gone", 1)
    log.append(kv(1))
    assert m.delete_log("gone", 1)
    assert m.get_log("gone", 1) is None
    names = os.listdir(d)
    assert not any(n == "gone-1" for n in names)
    (renamed,) = [n for n in names if n.startswith("gone-1.")]
    assert renamed.endswith("-delete") and len(renamed) == len("gone-1.") + 32 + len("-delete")
    assert not m.take_due_deletions()
    clock.advance(1000)
    pending = m.take_due_deletions()
    assert pending.directories == [os.path.join(d, renamed)]
    delete_files(pending)
    assert not os.path.exists(os.path.join(d, renamed))
    # a leftover -delete directory is removed at startup
    os.makedirs(os.path.join(d, "old-0.0123456789abcdef0123456789abcdef-delete"))
    manager(d, clock)
    assert not any(n.endswith("-delete") for n in os.listdir(d))


def test_topic_config_overrides(tmp_path, clock):
    m = manager(str(tmp_path / "data"), clock, topic_configs={"c": {"cleanup.policy": "compact"}})
    assert m.config_for("c").compact and not m.config_for("d").compact
    log = m.get_or_create_log("d", 0)
    log.append(batch([(T0, None, b"v")]))
    m.set_topic_config("d", {"cleanup.policy": "compact,delete", "retention.ms": "5"})
    assert log.config.compact and log.config.delete and log.config.retention_ms == 5
    assert m.topic_overrides("d") == {"cleanup.policy": "compact,delete", "retention.ms": "5"}
    with pytest.raises(InvalidConfigError):
        m.set_topic_config("d", {"segment.bytes": "lots"})
    with pytest.raises(InvalidConfigError):
        m.set_topic_config("d", {"cleanup.policy": "shred"})


def test_config_names_and_broker_defaults():
    cfg = LogConfig.from_props({"segment.ms": 100, "min.cleanable.dirty.ratio": "0.1",
                                "min.insync.replicas": "2"})  # fmt: skip
    assert cfg.segment_ms == 100 and cfg.min_cleanable_dirty_ratio == 0.1
    props = cfg.to_props()
    assert props["segment.bytes"] == "1073741824" and props["cleanup.policy"] == "delete"
    assert LogConfig.from_props(props) == cfg
    broker = from_broker_props({"log.retention.hours": "2", "log.segment.bytes": "1000"})
    assert broker.retention_ms == 7_200_000 and broker.segment_bytes == 1000


def test_run_periodic_retention_compaction_expiry(tmp_path, clock):
    d = str(tmp_path / "data")
    m = manager(
        d,
        clock,
        default_config={
            **FAR,
            "segment.bytes": "400",
            "retention.ms": "10000",
            "file.delete.delay.ms": "0",
        },  # fmt: skip
        topic_configs={"c": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"}},
        retention_check_interval_ms=1000,
        cleaner_backoff_ms=1000,
    )
    t = m.get_or_create_log("t", 0)
    c = m.get_or_create_log("c", 0)
    for i in range(8):
        t.append(kv(1, clock.now, value=bytes(100)))
        c.append(batch([(clock.now, b"k%d" % (i % 2), bytes(100))]))
    c.append(batch([(clock.now, b"p", b"v")], producer_id=5, producer_epoch=0, base_sequence=0))
    for log in (t, c):
        log.update_high_watermark(log.log_end_offset)
    clock.advance(20_000)
    m.run_periodic()
    assert t.log_start_offset > 0
    assert [r.key for r in read_records(c)][-1] == b"p"
    assert len(read_records(c)) < 9
    assert m.first_dirty_offset("c", 0) == c.active_segment.base_offset
    clock.advance(24 * 3600 * 1000)
    assert m.remove_expired_producers() == 1
    m.close()
    with open(os.path.join(d, "cleaner-offset-checkpoint")) as f:
        assert f.read().splitlines()[2] == f"c 0 {m.first_dirty_offset('c', 0)}"


def test_checkpoint_prunes_old_producer_snapshots(tmp_path, clock):
    d = str(tmp_path / "data")
    m = manager(d, clock, default_config={**FAR, "segment.bytes": "300"})
    log = m.get_or_create_log("t", 0)
    for _ in range(10):
        log.append(kv(1, value=bytes(150)))
    bases = [s.base_offset for s in log.segments]
    snaps = lambda: sorted(int(n[:20]) for n in os.listdir(log.dir) if n.endswith(".snapshot"))  # noqa: E731
    assert snaps() == bases[1:]  # one per roll
    log.flush(bases[5])
    m.checkpoint()
    # kept: from the segment before the one holding the recovery point (and before the active)
    assert snaps() == [b for b in bases[1:] if b >= bases[4]]
