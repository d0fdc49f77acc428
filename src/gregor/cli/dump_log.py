"""``gregor dump-log``: decode a log directory's files offline, as ``kafka-dump-log.sh`` does.

``--files a.log,b.index,c.timeindex`` (one or more, comma-separated or repeated). A ``.log``
segment prints one line per record batch (offsets, producer, epoch, position, timestamp type,
size, codec and whether its CRC holds); ``--deep-iteration`` adds a line per record, and
``--print-data-log`` (which implies it) adds each record's key and value. A ``.index`` prints
``offset: O position: P`` per entry and a ``.timeindex`` ``timestamp: T offset: O``; with the
segment beside it, each entry is checked against the log (``--verify-index-only`` prints only
the mismatches). Bytes at the end of a segment that do not make a whole batch are reported, as
a crashed broker may leave them. Files are read, never written; they may belong to a running
broker. ``--output json`` prints the same as one JSON document per file.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import click

from gregor.protocol.exceptions import ProtocolError
from gregor.protocol.records import decode_batch, read_header
from gregor.protocol.records.header import HEADER_SIZE, crc_ok

_CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


def _base_offset(path: str) -> int:
    stem = os.path.basename(path).split(".", 1)[0]
    if not stem.isdigit():
        raise click.BadParameter(
            f"{path}: a segment file is named by its base offset (00000000000000000042.log)",
            param_hint="--files",
        )
    return int(stem)


def _batches(data: bytes) -> tuple[list[tuple[int, Any]], int]:
    """(position, header) of each whole batch, and the count of trailing bytes that are not."""
    out, pos = [], 0
    while pos < len(data):
        if len(data) - pos < HEADER_SIZE:
            break
        try:
            h = read_header(data, pos)
        except ProtocolError:
            break
        if h.batch_length <= 0 or pos + h.size > len(data):
            break
        out.append((pos, h))
        pos += h.size
    return out, len(data) - pos


def _safe(b: bytes | None) -> str:
    if b is None:
        return ""
    return b.decode("utf-8", errors="backslashreplace")


def dump_segment(path: str, data: bytes, deep: bool, print_data: bool) -> dict[str, Any]:
    batches, invalid = _batches(data)
    doc: dict[str, Any] = {
        "file": path,
        "log_starting_offset": _base_offset(path),
        "batches": [],
        "invalid_bytes": invalid,
    }
    for pos, h in batches:
        entry: dict[str, Any] = {
            "baseOffset": h.base_offset,
            "lastOffset": h.last_offset,
            "count": h.records_count,
            "baseSequence": h.base_sequence,
            "lastSequence": h.last_sequence,
            "producerId": h.producer_id,
            "producerEpoch": h.producer_epoch,
            "partitionLeaderEpoch": h.partition_leader_epoch,
            "isTransactional": h.is_transactional,
            "isControl": h.is_control,
            "position": pos,
            "timestampType": "LogAppendTime" if h.timestamp_type else "CreateTime",
            "timestamp": h.max_timestamp,
            "size": h.size,
            "magic": h.magic,
            "compresscodec": _CODECS.get(h.compression, str(h.compression)),
            "crcValid": crc_ok(data, pos, h),
        }
        if deep and h.magic == 2:
            try:
                batch = decode_batch(data, pos, verify_crc=False)
                entry["records"] = [
                    {
                        "offset": r.offset,
                        "timestamp": r.timestamp,
                        "keySize": -1 if r.key is None else len(r.key),
                        "valueSize": -1 if r.value is None else len(r.value),
                        "sequence": -1
                        if h.base_sequence < 0
                        else h.base_sequence + (r.offset - h.base_offset),
                        "headerKeys": [k for k, _ in r.headers],
                        **({"key": _safe(r.key), "payload": _safe(r.value)} if print_data else {}),
                    }
                    for r in batch.records
                ]
            except ProtocolError as e:
                entry["recordsError"] = str(e)
        doc["batches"].append(entry)
    return doc


def _entries(data: bytes, entry: struct.Struct) -> list[tuple[int, int]]:
    """Index entries up to the first all-zero one after the first (a preallocated index's
    unused tail)."""
    out = []
    for i in range(len(data) // entry.size):
        a, b = entry.unpack_from(data, i * entry.size)
        if i > 0 and a == 0 and b == 0:
            break
        out.append((a, b))
    return out


def dump_index(path: str, data: bytes, time_index: bool, verify_only: bool) -> dict[str, Any]:
    base = _base_offset(path)
    log_path = path.rsplit(".", 1)[0] + ".log"
    log_data = None
    if os.path.exists(log_path):
        with open(log_path, "rb") as f:
            log_data = f.read()
    by_position: dict[int, Any] = {}
    last_offsets: list[tuple[int, int]] = []
    if log_data is not None:
        batches, _ = _batches(log_data)
        by_position = dict(batches)
        last_offsets = [(h.last_offset, h.max_timestamp) for _, h in batches]
    doc: dict[str, Any] = {"file": path, "entries": [], "mismatches": []}
    if time_index:
        for ts, rel in _entries(data, _TIME_ENTRY):
            offset = base + rel
            doc["entries"].append({"timestamp": ts, "offset": offset})
            if log_data is not None and not any(o >= offset and t >= ts for o, t in last_offsets):
                doc["mismatches"].append(
                    f"Found timestamp mismatch: index timestamp {ts} offset {offset} "
                    "is not in the log"
                )
    else:
        for rel, position in _entries(data, _OFFSET_ENTRY):
            offset = base + rel
            doc["entries"].append({"offset": offset, "position": position})
            if log_data is not None:
                h = by_position.get(position)
                if h is None:
                    doc["mismatches"].append(
                        f"Index position {position} (offset {offset}) is not the start of a batch"
                    )
                elif not h.base_offset <= offset <= h.last_offset:
                    doc["mismatches"].append(
                        f"Index offset: {offset}, log offsets: {h.base_offset}-{h.last_offset} at position {position}"
                    )
    if verify_only:
        doc["entries"] = []
    return doc


def _print_segment(doc: dict[str, Any]) -> None:
    click.echo(f"Log starting offset: {doc['log_starting_offset']}")
    for b in doc["batches"]:
        click.echo(
            f"baseOffset: {b['baseOffset']} lastOffset: {b['lastOffset']} count: {b['count']} "
            f"baseSequence: {b['baseSequence']} lastSequence: {b['lastSequence']} producerId: {b['producerId']} "
            f"producerEpoch: {b['producerEpoch']} partitionLeaderEpoch: {b['partitionLeaderEpoch']} "
            f"isTransactional: {str(b['isTransactional']).lower()} isControl: {str(b['isControl']).lower()} "
            f"position: {b['position']} {b['timestampType']}: {b['timestamp']} size: {b['size']} "
            f"magic: {b['magic']} compresscodec: {b['compresscodec']} crcValid: {str(b['crcValid']).lower()}"
        )
        if "recordsError" in b:
            click.echo(f"| cannot decode the records: {b['recordsError']}")
        for r in b.get("records", []):
            line = (
                f"| offset: {r['offset']} {b['timestampType']}: {r['timestamp']} keySize: {r['keySize']} "
                f"valueSize: {r['valueSize']} sequence: {r['sequence']} headerKeys: [{','.join(r['headerKeys'])}]"
            )
            if "payload" in r:
                line += f" key: {r['key']} payload: {r['payload']}"
            click.echo(line)
    if doc["invalid_bytes"]:
        click.echo(
            f"Found {doc['invalid_bytes']} invalid bytes at the end of {os.path.basename(doc['file'])}"
        )


@click.command(
    "dump-log",
    epilog="""
\b
Examples:
  gregor dump-log --files data/events-0/00000000000000000000.log
  gregor dump-log --files data/events-0/00000000000000000000.log --print-data-log
  gregor dump-log --files data/events-0/00000000000000000000.index --verify-index-only
""",
)
@click.option(
    "--files",
    "files",
    multiple=True,
    required=True,
    metavar="PATH[,PATH]",
    help="Segment (.log), offset index (.index) or time index (.timeindex) files.",
)
@click.option("--deep-iteration", is_flag=True, help="A line per record too.")
@click.option(
    "--print-data-log",
    is_flag=True,
    help="Records with their keys and values (implies --deep-iteration).",
)
@click.option(
    "--verify-index-only",
    is_flag=True,
    help="For index files: only the entries that do not match the log.",
)
@click.option("--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def dump_log(
    files: tuple[str, ...],
    deep_iteration: bool,
    print_data_log: bool,
    verify_index_only: bool,
    output: str,
) -> None:
    """Decode segment and index files (like kafka-dump-log)."""
    paths = [p.strip() for item in files for p in item.split(",") if p.strip()]
    failed = False
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise click.ClickException(f"cannot read {path}: {e.strerror}") from None
        if path.endswith(".log"):
            doc = dump_segment(path, data, deep_iteration or print_data_log, print_data_log)
        elif path.endswith(".index") or path.endswith(".timeindex"):
            doc = dump_index(path, data, path.endswith(".timeindex"), verify_index_only)
            failed = failed or bool(doc["mismatches"])
        else:
            click.echo(f"Ignoring unknown file {path}", err=True)
            continue
        if output == "json":
            click.echo(json.dumps(doc))
            continue
        click.echo(f"Dumping {path}")
        if "batches" in doc:
            _print_segment(doc)
        else:
            for item in doc["entries"]:
                click.echo(" ".join(f"{k}: {v}" for k, v in item.items()))
            for m in doc["mismatches"]:
                click.echo(m)
    if failed:
        raise SystemExit(1)
