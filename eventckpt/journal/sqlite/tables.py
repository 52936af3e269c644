"""Streams, versions, snapshots, events, checkpoint ids and tool calls: what saving and restoring read and
write, and retention's rewrites of committed history."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import apsw

from ... import errors
from ...paths import to_text
from ..rows import (CheckpointIdTaken, Commit, EventRow, HistoryRewritten, Segment, StreamRef, StreamRow, VersionRow,
                    VersionTaken)
from .columns import INSERT_STREAM, INSERT_VERSION, STREAM_COLS, VERSION_COLS, json_list
from .engine import Engine


class Tables(Engine):
    """Streams, versions, snapshots, events, checkpoint ids, tool calls and retention's rewrites."""

    # -- streams ----------------------------------------------------------------------------------

    def stream(self, name: str) -> StreamRow | None:
        row = self._one(f"SELECT {STREAM_COLS} FROM streams WHERE name = ?", (name,))
        return StreamRow(*row) if row else None

    def stream_and_head(self, name: str) -> tuple[StreamRow, int] | None:
        """The stream and its head version (its fork version while it has none of its own)."""
        row = self._one(
            f"SELECT {STREAM_COLS}, coalesce((SELECT max(version) FROM versions WHERE stream_id = streams.id),"
            " fork_version, 0) FROM streams WHERE name = ?",
            (name,),
        )
        return (StreamRow(*row[:6]), row[6]) if row else None

    def stream_names(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM streams ORDER BY id")]

    def children(self, stream: StreamRef) -> list[StreamRow]:
        return [StreamRow(*r) for r in self._rows(f"SELECT {STREAM_COLS} FROM streams WHERE parent_id = ?",
                                                  (stream.stream_id,))]

    def lineage(self, stream: StreamRef) -> list[StreamRow]:
        """The stream and its ancestors, root first."""
        rows = self._rows(
            f"""WITH RECURSIVE chain({STREAM_COLS}, depth) AS (
                  SELECT {STREAM_COLS}, 0 FROM streams WHERE id = ?
                  UNION ALL
                  SELECT s.id, s.name, s.parent_id, s.fork_version, s.root_id, s.created_at, c.depth + 1
                  FROM streams AS s JOIN chain AS c ON s.id = c.parent_id)
                SELECT {STREAM_COLS} FROM chain ORDER BY depth DESC""",
            (stream.stream_id,),
        )
        return [StreamRow(*r) for r in rows]

    def create_stream(self, name: str, created_at: str, parent: StreamRow | None = None, fork_version: int | None = None) -> StreamRow:
        try:
            row = self.conn.execute(
                INSERT_STREAM,
                (name, parent.id if parent else None, fork_version, parent.tree_id if parent else None, created_at),
            ).fetchall()[0]
        except apsw.ConstraintError:
            raise errors.StreamExistsError(name) from None
        except apsw.Error as exc:
            self._fail(exc, "INSERT INTO streams")
        return StreamRow(*row)

    def delete_stream(self, stream: StreamRef) -> None:
        for table in ("checkpoint_ids", "snapshots", "events", "versions"):
            self._run(f"DELETE FROM {table} WHERE stream_id = ?", (stream.stream_id,))
        self._run("DELETE FROM streams WHERE id = ?", (stream.stream_id,))

    def reclaim(self, pages: int | None = None) -> None:
        """Give free pages back to the file system (incremental vacuum)."""
        self._rows("PRAGMA incremental_vacuum" + (f"({int(pages)})" if pages else ""))

    # -- versions ---------------------------------------------------------------------------------

    def version_row(self, owner: StreamRef, version: int) -> VersionRow | None:
        row = self._one(f"SELECT {VERSION_COLS} FROM versions WHERE stream_id = ? AND version = ?",
                        (owner.stream_id, version))
        return VersionRow(*row) if row else None

    def version_rows(self, segments: Sequence[Segment]) -> list[VersionRow]:
        out: list[VersionRow] = []
        for seg in segments:
            rows = self._rows(
                f"SELECT {VERSION_COLS} FROM versions WHERE stream_id = ? AND version BETWEEN ? AND ? ORDER BY version",
                (seg.stream_id, seg.lo, seg.hi),
            )
            out.extend(VersionRow(*r) for r in rows)
        return out

    def version_numbers(self, segments: Sequence[Segment]) -> list[int]:
        out: list[int] = []
        for seg in segments:
            out.extend(
                r[0]
                for r in self._rows(
                    "SELECT version FROM versions WHERE stream_id = ? AND version BETWEEN ? AND ? ORDER BY version",
                    (seg.stream_id, seg.lo, seg.hi),
                )
            )
        return out

    def count_versions(self, segments: Sequence[Segment]) -> int:
        return sum(
            self._one(
                "SELECT count(*) FROM versions WHERE stream_id = ? AND version BETWEEN ? AND ?",
                (seg.stream_id, seg.lo, seg.hi),
            )[0]
            for seg in segments
        )

    def append(self, commit: Commit) -> None:
        if self.in_transaction and not self.batching:  # inside the caller's write(): part of it
            self._insert(commit)
            return
        self.begin()  # its own BEGIN IMMEDIATE transaction, or a savepoint of a batch (write(), inlined)
        try:
            if self.rewritten_since(commit.stream, commit.generation):
                raise HistoryRewritten()
            self._insert(commit)
        except BaseException:
            self.rollback()
            raise
        self.commit()

    def _insert(self, commit: Commit) -> None:
        row, sid = commit.row, commit.stream.id
        try:
            self.conn.execute(INSERT_VERSION, (sid, row.version, row.created_at, row.name, row.auto, row.metadata,
                                               row.usage, row.event_count, row.event_bytes, row.checksum))
        except apsw.ConstraintError:  # the primary key (another writer was first) or the stream is gone
            raise VersionTaken() from None
        except apsw.Error as exc:
            self._fail(exc, "INSERT INTO versions")
        # Values are JSON as UTF-8 bytes, stored as TEXT (never as BLOB: sqlite3's JSON functions read them).
        self._many("INSERT INTO events (stream_id, version, seq, op, path, value) VALUES (?, ?, ?, ?, ?, ?)",
                   [(sid, row.version, seq, op, path, value.decode() if value is not None else None)
                    for seq, (op, path, value) in enumerate(commit.events)])
        if commit.checkpoint_id is not None:
            try:
                self.conn.execute("INSERT INTO checkpoint_ids (tree_id, checkpoint_id, stream_id, version)"
                                  " VALUES (?, ?, ?, ?)", (commit.stream.tree_id, commit.checkpoint_id, sid, row.version))
            except apsw.ConstraintError:
                raise CheckpointIdTaken() from None
            except apsw.Error as exc:
                self._fail(exc, "INSERT INTO checkpoint_ids")
        if commit.tool_rows:
            self._insert_tool_calls(sid, row.version, commit.tool_rows)
        if commit.snapshot is not None:
            self.insert_snapshot(commit.stream, row.version, *commit.snapshot)

    # -- snapshots --------------------------------------------------------------------------------

    def insert_snapshot(self, owner: StreamRef, version: int, state: str, manifest: str) -> None:
        self._run(
            "INSERT OR REPLACE INTO snapshots (stream_id, version, state, manifest) VALUES (?, ?, ?, ?)",
            (owner.stream_id, version, state, manifest),
        )

    def latest_snapshot(self, segments: Sequence[Segment]) -> tuple[int, str, str] | None:
        """(version, state, manifest) of the newest snapshot within the segments."""
        for seg in reversed(segments):
            row = self._one(
                "SELECT version, state, manifest FROM snapshots WHERE stream_id = ? AND version BETWEEN ? AND ?"
                " ORDER BY version DESC LIMIT 1",
                (seg.stream_id, seg.lo, seg.hi),
            )
            if row:
                return row
        return None

    def snapshot_value(self, owner: StreamRef, version: int, key: str) -> str | None:
        row = self._one("SELECT state -> ? FROM snapshots WHERE stream_id = ? AND version = ?",
                        (to_text((key,)), owner.stream_id, version))
        return row[0] if row else None

    # -- events -----------------------------------------------------------------------------------

    def tail(self, segments: Sequence[Segment], after: int) -> list[EventRow]:
        """Every event of the lineage with version > after, in order."""
        out: list[EventRow] = []
        for seg in segments:
            if seg.hi <= after:
                continue
            out.extend(
                self._rows(
                    "SELECT version, seq, op, path, value FROM events"
                    " WHERE stream_id = ? AND version > ? AND version <= ? ORDER BY version, seq",
                    (seg.stream_id, max(after, seg.lo - 1), seg.hi),
                )
            )
        return out

    def key_values(self, segments: Sequence[Segment], path: str, start: tuple[int, int], upto: int) -> list[tuple[str, str]]:
        """(op, value) of the events at exactly `path` from event `start` (version, seq) through version
        `upto`, in order: the bulk part of rebuilding a shared key."""
        out: list[tuple[str, str]] = []
        for seg in segments:
            lo, hi = max(start[0], seg.lo), min(upto, seg.hi)
            if lo <= hi:
                out.extend(
                    self._rows(
                        "SELECT op, value FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path = ?"
                        " AND version BETWEEN ? AND ? AND (version > ? OR seq >= ?) ORDER BY version, seq",
                        (seg.stream_id, path, lo, hi, start[0], start[1]),
                    )
                )
        return out

    def key_events(self, segments: Sequence[Segment], path: str, children: Iterable[tuple[str, str]], after: int) -> list[EventRow]:
        """Every event at `path` or below it with version > after, in order: the path index for `path`,
        the version range for the paths below it (`after` is a snapshot's version: the range is short)."""
        out: list[EventRow] = []
        for seg in segments:
            if seg.hi <= after:
                continue
            lo = max(after + 1, seg.lo)
            rows = self._rows(
                "SELECT version, seq, op, path, value FROM events INDEXED BY events_by_path"
                " WHERE stream_id = ? AND path = ? AND version BETWEEN ? AND ? ORDER BY version, seq",
                (seg.stream_id, path, lo, seg.hi),
            )
            below: list[EventRow] = []
            for start, stop in children:
                # The events after a snapshot (callers pass after = its version) are few, however long the
                # history below the path: the primary key's version range, not the path index's range of
                # every child path ever written (1 s for a dict of 20 keys changed 200k times).
                below.extend(
                    self._rows(
                        "SELECT version, seq, op, path, value FROM events NOT INDEXED"
                        " WHERE stream_id = ? AND version >= ? AND version <= ? AND path >= ? AND path < ?",
                        (seg.stream_id, lo, seg.hi, start, stop),
                    )
                )
            if below:
                rows.extend(below)
                rows.sort(key=lambda r: (r[0], r[1]))
            out.extend(rows)
        return out

    # -- checkpoint ids ---------------------------------------------------------------------------

    def find_checkpoint_id(self, tree_id: int, checkpoint_id: str) -> tuple[int, int] | None:
        return self._one(
            "SELECT stream_id, version FROM checkpoint_ids WHERE tree_id = ? AND checkpoint_id = ?",
            (tree_id, checkpoint_id),
        )

    def checkpoint_id_of(self, owner: StreamRef, version: int) -> str | None:
        row = self._one("SELECT checkpoint_id FROM checkpoint_ids WHERE stream_id = ? AND version = ?",
                        (owner.stream_id, version))
        return row[0] if row else None

    # -- tool calls (schema 003) ------------------------------------------------------------------

    _TOOL_COLS = "call_id, name, arguments, result, error, undoes"

    def _insert_tool_calls(self, stream_id: int, version: int, rows: Sequence[Sequence[Any]]) -> None:
        """Insert a version's tool calls: (call_id, name, arguments, result, error, undoes) in order."""
        self._many(
            f"INSERT INTO tool_calls (stream_id, version, seq, {self._TOOL_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(stream_id, version, seq, *row) for seq, row in enumerate(rows)],
        )

    def tool_calls(self, segments: Sequence[Segment], after: int = 0) -> list[tuple[Any, ...]]:
        """(version, call_id, name, arguments, result, error, undoes) of the lineage's calls in versions
        > after, oldest first."""
        out: list[tuple[Any, ...]] = []
        for seg in segments:
            if seg.hi > after:
                out.extend(self._rows(
                    f"SELECT version, {self._TOOL_COLS} FROM tool_calls WHERE stream_id = ? AND version > ?"
                    " AND version <= ? ORDER BY version, seq",
                    (seg.stream_id, max(after, seg.lo - 1), seg.hi),
                ))
        return out

    def undone_call_ids(self, tree_id: int, call_ids: Sequence[str]) -> set[str]:
        """The ids among `call_ids` that a successful undo record anywhere in the stream tree names."""
        rows = self._rows(
            "SELECT DISTINCT t.undoes FROM tool_calls AS t JOIN streams AS s ON s.id = t.stream_id"
            " WHERE t.undoes IN (SELECT value FROM json_each(?)) AND t.error IS NULL"
            " AND coalesce(s.root_id, s.id) = ?",
            (json_list(call_ids), tree_id),
        )
        return {r[0] for r in rows}

    # -- retention (rewriting committed history) --------------------------------------------------

    def generation(self, stream: StreamRef) -> int:
        # One number for the whole file: BEGIN IMMEDIATE already serializes rewrites with every writer.
        generation = self._one("SELECT generation FROM history_generation WHERE id = 1")[0]
        self._saw_generation(generation)
        return generation

    def rewritten_since(self, stream: StreamRef, generation: int) -> bool:
        # SQLite's data version (a file-control call, no SQL) moves when another connection commits; the
        # pager refreshes it only when a transaction begins, so outside one it proves nothing.
        seen = self._generation_seen
        if seen is not None and self.in_transaction and seen == (generation, self.conn.data_version()):
            return False
        return self.generation(stream) != generation

    def _saw_generation(self, generation: int) -> None:
        self._generation_seen = (generation, self.conn.data_version()) if self.in_transaction else None

    def hold_tree(self, tree_id: int) -> None:
        """BEGIN IMMEDIATE already holds the file's write lock."""

    def lock_tree(self, tree_id: int) -> None:
        """BEGIN IMMEDIATE already holds the file's write lock."""

    def bump_generation(self, tree_id: int) -> int:
        generation = self._one("UPDATE history_generation SET generation = generation + 1 WHERE id = 1 RETURNING generation")[0]
        self._saw_generation(generation)  # rollback() forgets it: then the next check reads the file again
        return generation

    def snapshots_in(self, owner: StreamRef, lo: int, hi: int) -> list[tuple[int, str, str]]:
        """(version, state, manifest) of one stream's snapshots with lo <= version <= hi, in order."""
        return self._rows(
            "SELECT version, state, manifest FROM snapshots WHERE stream_id = ? AND version BETWEEN ? AND ? ORDER BY version",
            (owner.stream_id, lo, hi),
        )

    def events_of(self, owner: StreamRef, version: int) -> list[tuple[str, str, str | None]]:
        """(op, path, value) of one version's events, in order."""
        return self._rows("SELECT op, path, value FROM events WHERE stream_id = ? AND version = ? ORDER BY seq",
                          (owner.stream_id, version))

    def event_paths(self, owner: StreamRef, version: int, before: int) -> list[tuple[str, str]]:
        return self._rows("SELECT op, path FROM events WHERE stream_id = ? AND version = ? AND seq < ? ORDER BY seq",
                          (owner.stream_id, version, before))

    def tool_rows_of(self, owner: StreamRef, version: int) -> list[tuple[Any, ...]]:
        return self._rows(f"SELECT {self._TOOL_COLS} FROM tool_calls WHERE stream_id = ? AND version = ? ORDER BY seq",
                          (owner.stream_id, version))

    def remove_versions(self, owner: StreamRef, versions: Sequence[int]) -> None:
        """Delete versions with everything that belongs to them (their tool calls cascade)."""
        doomed = json_list(list(versions))
        for table in ("checkpoint_ids", "snapshots", "events", "versions"):
            self._run(f"DELETE FROM {table} WHERE stream_id = ? AND version IN (SELECT value FROM json_each(?))",
                      (owner.stream_id, doomed))

    def rewrite_version(self, owner: StreamRef, version: int, events: Sequence[tuple[str, str, str | None]],
                        tools: Sequence[Sequence[Any]], event_bytes: int) -> None:
        stream_id = owner.stream_id
        self._run("DELETE FROM events WHERE stream_id = ? AND version = ?", (stream_id, version))
        self._run("DELETE FROM tool_calls WHERE stream_id = ? AND version = ?", (stream_id, version))
        self._many("INSERT INTO events (stream_id, version, seq, op, path, value) VALUES (?, ?, ?, ?, ?, ?)",
                   [(stream_id, version, seq, *event) for seq, event in enumerate(events)])
        self._insert_tool_calls(stream_id, version, tools)
        self._run("UPDATE versions SET event_count = ?, event_bytes = ? WHERE stream_id = ? AND version = ?",
                  (len(events), event_bytes, stream_id, version))

    def removed_head(self, stream: StreamRef) -> int:
        return self._one("SELECT coalesce(removed_head, 0) FROM streams WHERE id = ?", (stream.stream_id,))[0]

    def set_removed_head(self, stream: StreamRef, version: int) -> None:
        self._run("UPDATE streams SET removed_head = max(coalesce(removed_head, 0), ?) WHERE id = ?",
                  (version, stream.stream_id))

    def set_checksum(self, owner: StreamRef, version: int, checksum: bytes) -> None:
        self._run("UPDATE versions SET checksum = ? WHERE stream_id = ? AND version = ?",
                  (checksum, owner.stream_id, version))


