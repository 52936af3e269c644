"""The caller's own SQL on PostgreSQL (`Store.sql`, `eventckpt sql`): one statement that returns rows, run
so that nothing changes, on the server or on the pooled connection the store goes on using.

A READ ONLY transaction alone does not promise that: COPY TO PROGRAM, ANALYZE, CHECKPOINT, NOTIFY, DO,
PREPARE, pg_reload_conf(), lo_import(), pg_terminate_backend() and session advisory locks all pass it,
and a superuser's SET ROLE can be undone by the statement itself (set_config('role', 'none', true)). So,
outermost first:

1. The server says what the statement is: it is parsed and described, nothing runs, and only a statement
   that returns rows (a query, EXPLAIN, SHOW; DML with RETURNING, which step 2 refuses) goes on. Every
   command that returns none (COPY, ANALYZE, SET, DO, NOTIFY, PREPARE, LISTEN, COMMIT, DDL, ...) is
   refused before it runs, and a second statement after `;` does not parse. No string matching.
2. It runs in a READ ONLY transaction, inside a savepoint that is always rolled back: no row, sequence,
   setting or notification it touches survives.
3. It runs inside eventckpt.read_only_sql (schema/postgresql/005): SECURITY DEFINER, owned by the
   predefined role pg_read_all_data when a superuser created the store, so it may read every table and
   nothing more (the superuser's COPY TO PROGRAM, pg_read_file, lo_import, pg_reload_conf, ... are
   refused), and inside it the server refuses SET ROLE and SET SESSION AUTHORIZATION, so the statement
   cannot take the session's privileges back. The function is not granted to PUBLIC: a user who may not
   run it runs the statement with their own privileges (never a superuser: refused instead).
4. A session advisory lock is the one thing a query can leave that no rollback undoes: a statement that
   took one is refused and the lock released.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import errors as pg
from psycopg import pq, sql

from ... import errors
from .engine import Engine, lost, said

# Whether the session may run the statement through eventckpt.read_only_sql (owned by a role that is not a
# superuser), whether it is a superuser itself, and the statement's column types as SQL type names.
_PLAN = ("SELECT (SELECT has_function_privilege(p.oid, 'EXECUTE') AND NOT r.rolsuper FROM pg_proc AS p"
         " JOIN pg_roles AS r ON r.oid = p.proowner WHERE p.oid = to_regprocedure('eventckpt.read_only_sql(text)')),"
         " (SELECT rolsuper FROM pg_roles WHERE rolname = current_user),"
         " array(SELECT format_type(x.t, x.m) FROM unnest(%s::oid[], %s::int[]) WITH ORDINALITY AS x(t, m, i)"
         " ORDER BY x.i)")
_ADVISORY = ("SELECT classid, objid, objsubid, mode = 'ShareLock' FROM pg_locks"
             " WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
# Release every hold of one session advisory lock (a session lock counts its acquisitions): the recursive
# term calls the unlock again until it answers false. A lock's key as pg_locks shows it: objsubid 1 is one
# bigint key (classid its high half, objid its low half), 2 is two int keys.
_UNLOCK = {(sub, shared): "WITH RECURSIVE r(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM r WHERE {f}({k}))"
           " SELECT max(n) FROM r".format(f="pg_advisory_unlock_shared" if shared else "pg_advisory_unlock",
                                          k="%s::bigint" if sub == 1 else "%s::int, %s::int")
           for sub in (1, 2) for shared in (False, True)}


_VOID = 2278  # the pseudo-type void's oid


def _signed(value: int, bits: int) -> int:
    """Unsigned bits (an oid, or two of them) as the signed integer a lock key was given as."""
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


class CallerSQL(Engine):
    """`query`: the caller's read-only SQL."""

    def query(self, text: str, args: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self.read():
            conn = self.conn  # taken inside read(): its BEGIN replaces a connection found dropped
            if args:  # the driver's own quoting: the server describes the very text it then runs
                text = psycopg.ClientCursor(conn).mogrify(text, args)
            held = set(self._rows(_ADVISORY))
            try:
                with conn.transaction():  # always rolled back: nothing the statement did stays
                    conn.execute("SET LOCAL search_path TO eventckpt, public")
                    result = self._statement(text)
                    raise psycopg.Rollback
            except BaseException as exc:
                if not (conn.closed or conn.broken):
                    self._release(held)  # and report the statement's own error
                raise self._refusal(exc, text) from None
            if self._release(held):
                raise errors.ReadOnlyStoreError(f"{self.path}: the statement took an advisory lock, which would"
                                                " outlive it (it was released): read-only SQL cannot lock")
        return result

    def _statement(self, text: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        names, types, mods = self._describe(text)
        if not names:
            raise errors.ReadOnlyStoreError(
                f"{self.path}: read-only SQL runs one statement that returns rows (SELECT, VALUES, WITH, TABLE,"
                " EXPLAIN, SHOW); this one returns none (a write, DDL, COPY, SET, ...): it was not run")
        if _VOID in types:  # a function returning nothing (pg_sleep, ...): no column type can carry it
            raise errors.InvalidArgumentError("sql", text, f"column {names[types.index(_VOID)]!r} is void:"
                                              " cast it (::text) to read it")
        reader, superuser, type_names = self._one(_PLAN, (types, mods))
        if reader:  # the column types come from the server's catalog (format_type quotes them), never the caller
            columns = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(f"c{i}"), sql.SQL(name))
                                         for i, name in enumerate(type_names))
            cur = self.conn.execute(
                sql.SQL("SELECT * FROM eventckpt.read_only_sql(%s) AS r({})").format(columns), (text,))
        elif superuser:
            raise errors.ReadOnlyStoreError(
                f"{self.path}: a superuser's SQL runs only inside eventckpt.read_only_sql owned by"
                " pg_read_all_data, which this store lacks (a superuser's open creates it on PostgreSQL 14+)")
        else:
            cur = self.conn.execute(text, prepare=True)  # prepared: one statement, the one just described
        return names, [tuple(r) for r in cur.fetchall()]

    def _describe(self, text: str) -> tuple[list[str], list[int], list[int]]:
        """The statement's result columns (names, type oids, type modifiers), from the server's parse of
        it as the unnamed prepared statement: nothing runs. A statement that does not parse is the
        caller's mistake."""
        conn = self.conn
        encoding = conn.info.encoding
        with conn.lock:
            found = conn.pgconn.prepare(b"", text.encode(encoding))
            if found.status == pq.ExecStatus.COMMAND_OK:
                found = conn.pgconn.describe_prepared(b"")
        if found.status != pq.ExecStatus.COMMAND_OK:
            exc = psycopg.errors.error_from_result(found, encoding=encoding)
            if lost(exc) or conn.broken:
                raise exc
            at = exc.diag.statement_position
            raise errors.InvalidArgumentError("sql", text, said(exc) + (f" (at character {at})" if at else ""))
        count = found.nfields
        return ([(found.fname(i) or b"").decode(encoding) for i in range(count)],
                [found.ftype(i) for i in range(count)], [found.fmod(i) for i in range(count)])

    def _refusal(self, exc: BaseException, text: str) -> BaseException:
        """What the statement's failure means to the caller: the server refusing a write or a privilege is
        a refusal of read-only SQL; a result the function cannot return as described (a domain's column:
        the description names its base type) is the caller's to cast. Others are translated as usual."""
        if isinstance(exc, (pg.ReadOnlySqlTransaction, pg.InsufficientPrivilege)):
            return errors.ReadOnlyStoreError(f"{self.path}: read-only SQL refused the statement ({said(exc)})",
                                             code=exc.sqlstate)
        if isinstance(exc, pg.DatatypeMismatch):
            detail = exc.diag.message_detail or ""
            return errors.InvalidArgumentError("sql", text, f"{said(exc)}: {detail} Cast the column to that type.")
        return exc

    def _release(self, held: set[tuple[Any, ...]]) -> bool:
        """Release every session advisory lock taken since `held` was read; whether there was one. (One
        taken for the transaction went with the savepoint.)"""
        leaked = set(self._rows(_ADVISORY)) - held
        for classid, objid, sub, shared in leaked:
            keys = (_signed(classid << 32 | objid, 64),) if sub == 1 else (_signed(classid, 32), _signed(objid, 32))
            self._one(_UNLOCK[(sub, shared)], keys)
        return bool(leaked)
