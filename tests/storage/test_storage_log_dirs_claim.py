"""``gregor.storage.log_dirs``: the ``.lock`` and ``meta.properties`` of a broker's log
directories (issue 42: two brokers could share one directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gregor.storage.log_dirs import (
    LOCK_FILE,
    META_PROPERTIES,
    LogDirectoryError,
    MetaProperties,
    open_log_dirs,
    read_meta_properties,
)


def props_of(path: Path) -> dict[str, str]:
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return dict(ln.split("=", 1) for ln in lines)


def test_a_directory_is_locked_until_released(tmp_path: Path) -> None:
    first = open_log_dirs([tmp_path / "a", tmp_path / "b"], 1)
    for d in ("a", "b"):
        with pytest.raises(LogDirectoryError) as e:
            open_log_dirs([tmp_path / d], 1)  # another descriptor of this process: refused too
        assert str(e.value) == (
            f"failed to acquire lock on file {LOCK_FILE} in {tmp_path / d}: a broker in another "
            "process or thread is using this directory"
        )
    # a failed claim holds nothing: the directory it did lock first is free again
    with pytest.raises(LogDirectoryError):
        open_log_dirs([tmp_path / "c", tmp_path / "a"], 1)
    open_log_dirs([tmp_path / "c"], 1).release()
    first.release()
    open_log_dirs([tmp_path / "a", tmp_path / "b"], 1).release()


def test_meta_properties_in_kafkas_format_on_first_claim(tmp_path: Path) -> None:
    dirs = open_log_dirs([tmp_path / "a", tmp_path / "b"], 3)
    written = dirs.claim("k1uster-id-0000000000w")
    dirs.release()
    ids = set()
    for d in ("a", "b"):
        props = props_of(tmp_path / d / META_PROPERTIES)
        assert set(props) == {"version", "node.id", "cluster.id", "directory.id"}
        assert (props["version"], props["node.id"], props["cluster.id"]) == (
            "1",
            "3",
            "k1uster-id-0000000000w",
        )
        assert len(props["directory.id"]) == 22  # a Uuid in Kafka's base64 form
        ids.add(props["directory.id"])
        assert read_meta_properties(tmp_path / d) == written[str(tmp_path / d)]
    assert len(ids) == 2
    # the next start finds the same files and keeps them
    again = open_log_dirs([tmp_path / "a", tmp_path / "b"], 3)
    assert again.claim("k1uster-id-0000000000w") == written
    again.release()


def test_another_nodes_directory_is_refused(tmp_path: Path) -> None:
    d = open_log_dirs([tmp_path / "a"], 1)
    d.claim("c1")
    d.release()
    with pytest.raises(LogDirectoryError) as e:
        open_log_dirs([tmp_path / "a"], 2)
    assert str(e.value) == (
        f"{tmp_path / 'a' / META_PROPERTIES} says node.id=1, but this broker is node.id=2: the directory belongs to "
        "another broker (if you moved the data, set node.id=1; a new broker needs empty log directories)"
    )
    # the refused start left the lock free
    open_log_dirs([tmp_path / "a"], 1).release()


def test_another_clusters_directory_is_refused(tmp_path: Path) -> None:
    d = open_log_dirs([tmp_path / "a"], 1)
    d.claim("cluster-one")
    d.release()
    d = open_log_dirs([tmp_path / "a"], 1)
    with pytest.raises(LogDirectoryError) as e:
        d.claim("cluster-two")
    d.release()
    assert str(e.value) == (
        f"{tmp_path / 'a' / META_PROPERTIES} says cluster.id=cluster-one, but this broker's "
        "cluster is cluster-two: the directory belongs to another cluster"
    )


def test_directories_from_before_meta_properties_get_it(tmp_path: Path) -> None:
    # a log directory as older brokers left it: partitions, checkpoints, no meta.properties
    (tmp_path / "a" / "events-0").mkdir(parents=True)
    (tmp_path / "a" / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    d = open_log_dirs([tmp_path / "a"], 5)
    d.claim(None)  # a store that keeps no cluster id (metadata.store=memory): none is written
    d.release()
    assert props_of(tmp_path / "a" / META_PROPERTIES).keys() == {
        "version",
        "node.id",
        "directory.id",
    }
    d = open_log_dirs([tmp_path / "a"], 5)
    d.claim("later-cluster")  # and one that does fills it in
    d.release()
    assert props_of(tmp_path / "a" / META_PROPERTIES)["cluster.id"] == "later-cluster"
    assert (tmp_path / "a" / "events-0").is_dir()


def test_a_kafka_v0_file_is_read_and_rewritten_as_v1(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / META_PROPERTIES).write_text(
        "#Tue Nov 24 10:00:00 UTC 2026\nversion=0\nbroker.id=4\n"
    )
    assert read_meta_properties(tmp_path / "a") == MetaProperties(4, "", None, 0)
    d = open_log_dirs([tmp_path / "a"], 4)
    d.claim("c")
    d.release()
    props = props_of(tmp_path / "a" / META_PROPERTIES)
    assert (props["version"], props["node.id"], props["cluster.id"]) == ("1", "4", "c")


def test_unusable_directories_are_one_line_errors(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LogDirectoryError) as e:
        open_log_dirs([blocker / "logs"], 1)
    assert str(e.value) == f"log directory {blocker / 'logs'} cannot be created: Not a directory"
    with pytest.raises(LogDirectoryError) as e:
        open_log_dirs([blocker], 1)
    assert str(e.value) == f"log directory {blocker} cannot be created: a file is in the way"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / META_PROPERTIES).write_text("version=1\ncluster.id=x\n")
    with pytest.raises(LogDirectoryError) as e:
        open_log_dirs([tmp_path / "bad"], 1)
    assert str(e.value) == f"node.id was not specified in {tmp_path / 'bad' / META_PROPERTIES}"
