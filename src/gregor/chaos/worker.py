"""The worker process: one client library, one operation at a time, told over a pipe.

The controller (``runner``) starts one worker process per slot (``multiprocessing``, spawn)
and sends it ``{"cmd": "open", ...}`` (build the clients: a new logical process), then
operations ``{"cmd": "op", "f": ..., "value": ...}``; the worker answers each with a completion:
``{"type": "ok" | "fail" | "info", "value": ..., ...}``.

Outcomes are judged conservatively: a send or poll that raised is ``info`` (it may have
happened); a transaction is ``fail`` only when it was aborted before its commit was asked for
and the abort itself succeeded (on purpose, or after an error), and ``info`` when anything went
wrong from the commit on. A consumer commits what each plain poll read (``commit``: the next
offsets); a commit that raised is reported as ``commit_info`` (it may land). After a failed
transaction that had read, the controller sends ``committed``: the worker fetches the group's
committed offsets for those keys and seeks back to them, as an exactly-once application does.
"""

from __future__ import annotations

import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from gregor.chaos.clients import ClientAdapter, make_client
from gregor.chaos.observations import ABORTED_ON_PURPOSE

__all__ = ["serve"]


def serve(conn: Connection) -> None:
    client: ClientAdapter | None = None
    t0 = 0.0
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        cmd = msg["cmd"]
        if cmd == "stop":
            if client is not None:
                _close(client)
            conn.send({"type": "ok"})
            return
        if cmd == "open":
            if client is not None:
                _close(client)
                client = None
            t0 = msg["t0"]
            try:
                client = make_client(
                    msg["client"],
                    msg["bootstrap"],
                    txn_id=msg["txn_id"],
                    group=msg["group"],
                    keys=msg["keys"],
                    client_id=f"chaos-p{msg['process']}",
                )
                client.open()
                conn.send({"type": "ok"})
            except Exception as e:
                conn.send({"type": "info", "error": _err(e)})
            continue
        assert client is not None
        conn.send(run(client, msg, t0))


def _close(client: ClientAdapter) -> None:
    try:
        client.close()
    except Exception:
        pass


def _err(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:300]


def run(client: ClientAdapter, op: dict[str, Any], t0: float) -> dict[str, Any]:
    f = op["f"]
    try:
        if f == "assign":
            client.assign(op["value"])
            return {"type": "ok", "epoch": client.epoch}
        if f == "subscribe":
            client.subscribe(op["value"])
            return {"type": "ok", "epoch": client.epoch}
        if f == "send":
            return _send(client, op)
        if f == "poll":
            return _poll(client, op)
        if f == "txn":
            return _txn(client, op, t0)
        if f == "committed":
            got = client.committed(op["value"])
            client.seek(got)
            return {
                "type": "ok",
                "value": [[k, o] for k, o in sorted(got.items())],
                "epoch": client.epoch,
            }
        return {"type": "info", "error": f"unknown operation {f}"}
    except Exception as e:
        return {"type": "info", "error": _err(e), "trace": traceback.format_exc(limit=3)[-600:]}


def _send(client: ClientAdapter, op: dict[str, Any]) -> dict[str, Any]:
    out = []
    for _, k, v, _o in op["value"]:
        try:
            out.append(["send", k, v, client.send(k, v)])
        except Exception as e:
            out.append(["send", k, v, None])
            return {"type": "info", "value": out, "error": _err(e)}
    return {"type": "ok", "value": out}


def _next_offsets(reads: list[tuple[int, int, int]]) -> dict[int, int]:
    nxt: dict[int, int] = {}
    for k, o, _v in reads:
        nxt[k] = max(nxt.get(k, 0), o + 1)
    return nxt


def _poll(client: ClientAdapter, op: dict[str, Any]) -> dict[str, Any]:
    del op
    reads = client.poll()
    done: dict[str, Any] = {
        "type": "ok",
        "value": [["poll", [list(r) for r in reads], client.epoch]],
        "epoch": client.epoch,
        "group": client.group,
    }
    offsets = _next_offsets(reads)
    if offsets:
        try:
            client.commit(offsets)
            done["commit"] = [[k, o] for k, o in sorted(offsets.items())]
        except Exception as e:
            done["commit_info"] = [[k, o] for k, o in sorted(offsets.items())]
            done["commit_error"] = _err(e)
    return done


def _txn(client: ClientAdapter, op: dict[str, Any], t0: float) -> dict[str, Any]:
    out: list[list[Any]] = []
    reads: list[tuple[int, int, int]] = []
    base = {"epoch": client.epoch, "group": client.group}
    client.begin()  # raising here: info (nothing was sent)
    try:
        for mop in op["value"]:
            if mop[0] == "send":
                _, k, v, _o = mop
                out.append(["send", k, v, None])
                out[-1][3] = client.send(k, v)
            else:
                got = client.poll()
                reads += got
                out.append(["poll", [list(r) for r in got], client.epoch])
        offsets = _next_offsets(reads)
        if offsets:
            client.send_offsets(offsets)
        commit = [[k, o] for k, o in sorted(offsets.items())]
        if op.get("abort"):
            client.abort_txn()
            return {
                "type": "fail",
                "value": _fill(out, op),
                "commit": commit,
                "error": ABORTED_ON_PURPOSE,
                **base,
                "epoch": client.epoch,
            }
    except Exception as e:
        err = _err(e)
        try:
            client.abort_txn()
        except Exception as e2:
            return {
                "type": "info",
                "value": _fill(out, op),
                "error": f"{err}; abort: {_err(e2)}",
                **base,
            }
        return {
            "type": "fail",
            "value": _fill(out, op),
            "commit": [[k, o] for k, o in sorted(_next_offsets(reads).items())],
            "error": err,
            **base,
        }
    commit_start = round(time.monotonic() - t0, 6)
    try:
        client.commit_txn()
    except Exception as e:
        return {
            "type": "info",
            "value": _fill(out, op),
            "error": _err(e),
            "commit_start": commit_start,
            **base,
        }
    return {"type": "ok", "value": out, "commit": commit, "commit_start": commit_start, **base}


def _fill(out: list[list[Any]], op: dict[str, Any]) -> list[list[Any]]:
    """The micro-operations done so far, then those never begun (their sends unacknowledged)."""
    rest = [list(m) for m in op["value"][len(out) :]]
    return out + rest
