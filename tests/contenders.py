"""Child processes of tests/test_many_processes.py (one role each), run as

    python -m tests.contenders ROLE DB STREAM WRITER COUNT

Roles:
  save      COUNT read-modify-write saves with expected_version, retried on ConflictError
  tx        the same with transactions (incr, append, usage)
  plain     COUNT saves to a stream no one else writes (no expected_version)
  reader    reads versions of STREAM until the file DB.stop exists, checking each is whole
Every version a writer makes holds {"n": v, "log": ["writer:seq", ...]} with usage {"saves": v}, and
metadata {"writer", "seq"} naming its own log entry, so a reader can tell a whole version from a torn
one. A role prints one JSON line of counts; any other outcome is an exception (non-zero exit).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import orjson

import eventckpt


def check_whole(cp: eventckpt.Checkpoint) -> None:
    """The version's state, usage and metadata all say the same version."""
    v = cp.version
    state = cp.values
    assert state["n"] == v and len(state["log"]) == v, f"version {v} holds n={state['n']}, {len(state['log'])} entries"
    assert cp.token_usage == {"saves": v}, f"version {v} has usage {cp.token_usage}"
    assert state["log"][-1] == entry(cp.metadata["writer"], cp.metadata["seq"]), f"version {v}: metadata and log disagree"


def entry(writer: int, seq: int) -> str:
    return f"{writer}:{seq}"


def write(store: eventckpt.Store, role: str, stream: str, writer: int, count: int) -> dict[str, Any]:
    task = store.stream(stream)
    conflicts = 0
    seq = 0
    while seq < count:
        head = task.version
        meta = {"writer": writer, "seq": seq}
        try:
            if role == "tx":
                with task.transaction(metadata=meta, expected_version=head) as tx:
                    tx.incr("n")
                    tx.append("log", entry(writer, seq))
                    tx.add_usage(saves=1)
            else:
                state = task.state(head) if head else {"n": 0, "log": []}
                state["n"] += 1
                state["log"].append(entry(writer, seq))
                task.save(state, {"saves": state["n"]}, metadata=meta,
                          expected_version=head if role == "save" else None)
        except eventckpt.ConflictError:
            assert role != "plain"
            conflicts += 1
            continue
        seq += 1
    return {"saves": count, "conflicts": conflicts}


def read(store: eventckpt.Store, stream: str, stop: str) -> dict[str, Any]:
    task = store.stream(stream)
    reads = 0
    while not os.path.exists(stop):
        head = task.version
        if head:
            check_whole(task.get(head))
            latest = task.latest
            assert latest is not None and latest.version >= head
            check_whole(latest)
            older = task.get(max(1, head // 2))
            time.sleep(0.005)  # writers move on before the lazy values load: they must still be this version's
            check_whole(older)
            reads += 3
        time.sleep(0.005)  # two cores are shared with the writers
    return {"reads": reads}


def main(argv: list[str]) -> None:
    role, db, stream, writer, count = argv
    with eventckpt.open(db) as store:
        if role == "reader":
            result = read(store, stream, db + ".stop")
        else:
            result = write(store, role, stream, int(writer), int(count))
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
