"""``gregor dump-log`` on the files of a real broker's log directory (written through
confluent-kafka), and on copies damaged the ways a crash or a bad disk damages them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from confluent_kafka import Producer

from gregor.cli.main import main
from gregor.testing import BrokerProcess

pytestmark = pytest.mark.interop


def dump(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, ["dump-log", *args])
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def segment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of a partition directory: 5 one-record batches (key kN, value value-N, header h),
    then one gzip batch of 3 records; an index entry every 100 bytes."""
    with BrokerProcess(config={"log.index.interval.bytes": 100}) as b:
        p = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 0})
        for i in range(5):
            p.produce("dumped", key=b"k%d" % i, value=b"value-%d" % i, headers=[("h", b"x")])
            assert p.flush(30) == 0
        # nothing leaves before flush() (a minute's linger), so the three are one batch however
        # slowly this loop runs on a busy machine
        z = Producer(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "linger.ms": 60000,
                "compression.type": "gzip",
            }
        )
        for i in range(5, 8):
            z.produce("dumped", value=b"value-%d" % i + b"." * 500)  # compressible
        assert z.flush(30) == 0
        b.stop()
        copy = tmp_path_factory.mktemp("dump") / "dumped-0"
        shutil.copytree(b.data_dir / "logs" / "dumped-0", copy)
    return copy


def test_a_segment_batch_by_batch_and_record_by_record(segment: Path) -> None:
    log = str(segment / "00000000000000000000.log")
    code, out, _ = dump("--files", log)
    lines = out.splitlines()
    assert code == 0 and lines[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [ln for ln in lines if ln.startswith("baseOffset:")]
    assert [ln.split()[1] for ln in batches] == ["0", "1", "2", "3", "4", "5"]
    assert batches[-1].split()[3] == "7" and "compresscodec: gzip" in batches[-1]  # lastOffset 7
    assert all("crcValid: true" in ln for ln in batches)
    code, out, _ = dump("--files", log, "--print-data-log")
    records = [ln for ln in out.splitlines() if ln.startswith("| offset:")]
    assert len(records) == 8
    assert records[0].endswith(
        "keySize: 2 valueSize: 7 sequence: -1 headerKeys: [h] key: k0 payload: value-0"
    )
    assert records[7].endswith("payload: value-7" + "." * 500)
    code, out, _ = dump("--files", log, "--deep-iteration", "--output", "json")
    doc = json.loads(out)
    assert [r["offset"] for b in doc["batches"] for r in b["records"]] == list(range(8))
    assert doc["invalid_bytes"] == 0


def test_indexes_are_listed_and_checked_against_the_log(segment: Path) -> None:
    index, timeindex = (
        str(segment / "00000000000000000000.index"),
        str(segment / "00000000000000000000.timeindex"),
    )
    code, out, _ = dump("--files", f"{index},{timeindex}")
    assert code == 0
    entries = [ln for ln in out.splitlines() if ln.startswith("offset:")]
    assert entries and all(ln.split()[2] == "position:" for ln in entries)
    assert any(ln.startswith("timestamp:") for ln in out.splitlines())
    assert dump("--files", index, "--verify-index-only") == (0, f"Dumping {index}\n", "")


def test_damage_is_reported(segment: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(segment, broken)
    log = broken / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF  # inside the second batch's records: its CRC no longer holds
    log.write_bytes(bytes(data) + b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00")  # and a torn tail
    code, out, _ = dump("--files", str(log))
    assert code == 0
    crc = [ln.split("crcValid: ")[1] for ln in out.splitlines() if ln.startswith("baseOffset:")]
    assert crc == ["true", "false", "true", "true", "true", "true"]
    assert out.splitlines()[-1] == "Found 10 invalid bytes at the end of 00000000000000000000.log"
    # an index entry that points into the middle of a batch
    index = broken / "00000000000000000000.index"
    raw = bytearray(index.read_bytes())
    raw[4:8] = (7).to_bytes(4, "big")
    index.write_bytes(bytes(raw))
    code, out, _ = dump("--files", str(index), "--verify-index-only")
    assert code == 1 and "is not the start of a batch" in out
    # files that are not segments or indexes, and files that are not there
    code, _, err = dump("--files", str(broken / "leader-epoch-checkpoint"))
    assert code == 0 and "Ignoring unknown file" in err
    code, _, err = dump("--files", str(broken / "00000000000000000099.log"))
    assert code == 1 and "cannot read" in err
