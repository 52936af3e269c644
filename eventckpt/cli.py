"""The `eventckpt` command line (also `python -m eventckpt`).

Every command takes the store file as its first argument, prints human-readable output by default and
JSON with --json, and reports an error as one line with a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
import orjson

import eventckpt

from .cli_output import (
    change_line,
    checkpoint_json,
    diff_json,
    emit_json,
    history_json,
    history_line,
    log_line,
    parse_meta,
    is_version,
    parse_path,
    parse_ref,
    parse_version,
    sql_columns,
    sql_json,
    sql_text,
    table,
    value_json,
)
from .checkpoint import format_time
from .errors import EventCkptError, InvalidArgumentError
from .journal import is_postgres


class _UsageError(click.ClickException):
    exit_code = 2


class _Group(click.Group):
    """Errors print one clear line and exit non-zero, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except EventCkptError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx else "eventckpt"
            raise _UsageError(f"{exc.format_message()} (see: {where} --help)") from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            sys.stderr.close()  # the reader went away (eventckpt export ... | head): not an error
            raise click.exceptions.Exit(0) from None
        except OSError as exc:
            raise click.ClickException(f"{type(exc).__name__}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a bug: still one line, with the traceback on request
            if os.environ.get("EVENTCKPT_DEBUG"):
                traceback.print_exc()
            raise click.ClickException(
                f"internal error {type(exc).__name__}: {exc} (set EVENTCKPT_DEBUG=1 for the traceback)"
            ) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(eventckpt.__version__, prog_name="eventckpt")
def main() -> None:
    """eventckpt: an event-sourced checkpoint store in one SQLite file (or a PostgreSQL database).

    Every command takes the store first (a file, or a postgresql:// URL); --json prints JSON for scripts.
    """


class StoreTarget(click.ParamType):
    """A store: a file path, or a postgresql:// URL (the same commands work on both). A missing file is
    not click's usage error: opening it raises StoreNotFoundError (exit 1), as README says, or creates it
    (demo, import, copy's target)."""

    name = "store"

    def __init__(self) -> None:
        self.path = click.Path(dir_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if is_postgres(value):
            return value
        return self.path.convert(value, param, ctx)


STORE = click.argument("path", metavar="STORE", type=StoreTarget())
JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


@contextmanager
def _open(path: str, *, create: bool = False, write: bool = False) -> Iterator[eventckpt.Store]:
    """The store at `path`. Only `demo`, `import` and `copy` (its target) create one: every other command
    refuses a missing or empty file (StoreNotFoundError) and leaves it as it was. A command that only
    reads opens the store read-only, so it never writes, not even the schema upgrade a writable open of a
    store from an earlier eventckpt makes (it is refused with OlderSchemaError; `upgrade` does that). NaN
    and infinities are allowed: commands only show and copy what a program stored (with allow_nan=True,
    maybe), never values of their own. The program's classes are never here, so a stored enum or object
    stays an Unregistered that shows its class and is written back as stored (unknown_types="keep")."""
    with eventckpt.open(path, create=create, readonly=not (create or write), allow_nan=True,
                        unknown_types="keep") as store:
        yield store


def _shown(path: str, store: eventckpt.Store) -> str:
    """How output names the store: the path as given, or a PostgreSQL URL without its password (as errors
    name it)."""
    return store.path if is_postgres(path) else path


class _Progress:
    """A click progress bar on stderr, created when the total is first known; nothing when stderr is not
    a terminal (scripts get their output, and errors stay one line)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if not sys.stderr.isatty():
                return
            self.bar = click.progressbar(length=max(total, 1), label=self.label, file=sys.stderr)
            self.bar.__enter__()
        self.bar.update(done - self.bar.pos)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


# -- reading ------------------------------------------------------------------------------------------


@main.command()
@STORE
@JSON
def streams(path: str, as_json: bool) -> None:
    """List the streams: head version, where each fork came from, last commit.

    Example: eventckpt streams agent.db
    """
    with _open(path) as store:
        rows = []
        for name in store.streams():
            task = store.stream(name)
            origin, latest = task.parent, task.latest
            rows.append({"stream": name, "head": task.version, "fork_of": origin.task_id if origin else None,
                         "fork_version": origin.version if origin else None,
                         "updated_at": format_time(latest.created_at) if latest else None})
    if as_json:
        emit_json(rows)
        return
    table(["stream", "head", "fork of", "last commit"],
          [[r["stream"], r["head"], f"{r['fork_of']}@{r['fork_version']}" if r["fork_of"] else "", r["updated_at"] or ""]
           for r in rows])


@main.command()
@STORE
@click.argument("stream")
@click.option("-n", "--limit", type=click.IntRange(min=0), default=None, help="At most this many checkpoints.")
@click.option("--before", type=click.IntRange(min=1), default=None, help="Only versions before this one.")
@click.option("--name", default=None, help="Only checkpoints with this name.")
@click.option("--auto/--manual", "auto", default=None, help="Only automatic (or only manual) checkpoints.")
@click.option("-m", "--meta", multiple=True, metavar="KEY=VALUE",
              help="Only checkpoints whose metadata KEY is VALUE (JSON if it parses: step=3 is a number, node=agent a string).")
@JSON
def log(path: str, stream: str, limit: int | None, before: int | None, name: str | None, auto: bool | None,
        meta: tuple[str, ...], as_json: bool) -> None:
    """Show a stream's checkpoints, newest first, without reading any state.

    Example: eventckpt log agent.db demo -n 20 --meta node=tools
    """
    with _open(path) as store:
        task = store.stream(stream)
        checkpoints = task.log(limit, before=before, name=name, auto=auto, metadata=parse_meta(meta))
        if as_json:
            emit_json([checkpoint_json(store, cp) for cp in checkpoints])
        else:
            for cp in checkpoints:
                click.echo(log_line(cp))


@main.command()
@STORE
@click.option("--name", default=None, help="Checkpoints with this name.")
@click.option("-m", "--meta", multiple=True, metavar="KEY=VALUE", help="Checkpoints whose metadata KEY is VALUE.")
@click.option("-n", "--limit", type=click.IntRange(min=0), default=None, help="At most this many checkpoints.")
@JSON
def search(path: str, name: str | None, meta: tuple[str, ...], limit: int | None, as_json: bool) -> None:
    """Find checkpoints across all streams by name and/or metadata, newest first.

    Example: eventckpt search agent.db --name "before tool call"
    """
    with _open(path) as store:
        found = store.search(name, parse_meta(meta), limit=limit)
        if as_json:
            emit_json([checkpoint_json(store, cp) for cp in found])
        else:
            for cp in found:
                click.echo(log_line(cp, stream=True))


@main.command()
@STORE
@click.argument("ref", metavar="STREAM[@VERSION]")
@JSON
def show(path: str, ref: str, as_json: bool) -> None:
    """Print the state of a stream at a version (the head by default) as JSON.

    Example: eventckpt show agent.db demo@3
    """
    with _open(path) as store:
        stream, version = parse_ref(store, ref)
        task = store.stream(stream)
        cp = task.get(version if version is not None else task.version)
        if as_json:
            emit_json({**checkpoint_json(store, cp), "values": value_json(store, cp.values)})
        else:
            click.echo(cp.summary())
            click.echo(orjson.dumps(orjson.loads(store.codec.encode(cp.values)), option=orjson.OPT_INDENT_2).decode())


@main.command()
@STORE
@click.argument("old", metavar="STREAM@A")
@click.argument("new", metavar="[STREAM@B]", required=False)
@click.option("--width", type=click.IntRange(min=20), default=100, show_default=True, help="Truncate values to this width.")
@JSON
def diff(path: str, old: str, new: str | None, width: int, as_json: bool) -> None:
    """Show what changed from one version to another: added (+), removed (-) and changed (~) paths.

    The second version defaults to the head of the first stream; it may be a bare version of the same
    stream (eventckpt diff agent.db demo@3 7, or v7) or a version of another stream, such as a fork.

    Example: eventckpt diff agent.db demo@3 demo-retry@4
    """
    with _open(path) as store:
        stream, a = parse_ref(store, old)
        b: Any = None
        if new is not None:
            b = parse_version(new) if is_version(new) else parse_ref(store, new)
        task = store.stream(stream)
        result = task.diff(a, b)  # None: the head
        if as_json:
            emit_json(diff_json(store, result))
            return
        counts = {kind: sum(1 for c in result if c.kind == kind) for kind in ("added", "removed", "changed")}
        target = f"{result.new.task_id}@{result.new.version}" if result.new else "live"
        click.echo(f"{result.old.task_id}@{result.old.version} -> {target}: "
                   + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
        for change in result:
            click.echo(change_line(change, width))


@main.command()
@STORE
@click.argument("stream")
@click.argument("key_path", metavar="PATH")
@click.option("--since", type=click.IntRange(min=0), default=None, help="From this version on.")
@click.option("--until", type=click.IntRange(min=0), default=None, help="Up to this version.")
@click.option("-n", "--limit", type=click.IntRange(min=0), default=None, help="At most this many changes.")
@JSON
def history(path: str, stream: str, key_path: str, since: int | None, until: int | None, limit: int | None,
            as_json: bool) -> None:
    """Show every change of one path in a stream, newest first.

    PATH is a key, a dotted path or a SQLite JSON path: step, scratch.k05, messages[3].content, $."a.b".

    Example: eventckpt history agent.db demo scratch.best_fare
    """
    parts = parse_path(key_path)
    with _open(path) as store:
        entries = store.stream(stream).history(parts, since=since, until=until, limit=limit)
        if as_json:
            emit_json([history_json(store, e) for e in entries])
        elif not entries:
            click.echo(f"no changes of {key_path} in {stream}")
        else:
            for entry in entries:
                click.echo(history_line(entry, parts))


# -- writing ------------------------------------------------------------------------------------------


@main.command()
@STORE
@click.argument("ref", metavar="STREAM[@VERSION]")
@click.option("--name", "new_name", default=None, help="The fork's name (default: STREAM~N).")
@JSON
def fork(path: str, ref: str, new_name: str | None, as_json: bool) -> None:
    """Start a new stream that shares a stream's history up to a version (the head by default).

    Nothing is copied. Example: eventckpt fork agent.db demo@3 --name retry
    """
    with _open(path, write=True) as store:
        stream, version = parse_ref(store, ref)
        branch = store.stream(stream).fork(at=version, task_id=new_name)
        origin = branch.parent
        if as_json:
            emit_json({"stream": branch.task_id, "fork_of": origin.task_id, "fork_version": origin.version})
        else:
            click.echo(f"forked {origin.task_id}@{origin.version} into {branch.task_id}")


@main.command()
@STORE
@click.argument("stream")
@click.argument("version", type=click.IntRange(min=1))
@JSON
def rollback(path: str, stream: str, version: int, as_json: bool) -> None:
    """Append a new version whose state equals an earlier one; nothing is deleted.

    Example: eventckpt rollback agent.db demo 3
    """
    with _open(path, write=True) as store:
        cp = store.stream(stream).rollback(version)
        if as_json:
            emit_json({"stream": stream, "version": cp.version, "rollback_to": version})
        else:
            click.echo(f"{stream}: version {cp.version} restores version {version}")


# -- the file ---------------------------------------------------------------------------------------


@main.command()
@STORE
@JSON
def verify(path: str, as_json: bool) -> None:
    """Check the whole file: the checksum chain of every version, every snapshot against a replay of the
    events, and SQLite's integrity check. Exits 1 when anything is wrong.

    Example: eventckpt verify agent.db
    """
    progress = _Progress("verifying")
    try:
        with _open(path) as store:
            report = store.verify(progress)
    finally:
        progress.close()
    if as_json:
        emit_json({"ok": report.ok, "streams": report.streams, "versions": report.versions, "events": report.events,
                   "snapshots": report.snapshots,
                   "problems": [{"kind": p.kind, "stream": p.task_id, "version": p.version, "detail": p.detail}
                                for p in report.problems]})
    else:
        for problem in report.problems:
            click.echo(str(problem))
        click.echo(f"{'ok' if report.ok else f'{len(report.problems)} problems'}: {report.streams} streams, "
                   f"{report.versions} versions, {report.events} events, {report.snapshots} snapshots checked")
    if not report.ok:
        sys.exit(1)


@main.command()
@STORE
@JSON
def stats(path: str, as_json: bool) -> None:
    """Count streams, versions, events and snapshots, their bytes, and the file's size.

    Example: eventckpt stats agent.db
    """
    with _open(path) as store:
        figures = store.stats()
    if as_json:
        emit_json(figures)
        return
    table(["", ""], [[key.replace("_", " "), f"{value:,}"] for key, value in figures.items()])


@main.command()
@STORE
@click.argument("stream")
@click.option("--forks", is_flag=True, help="Also export every fork below the stream.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, allow_dash=True), default="-",
              help="Write to this file (default: stdout).")
def export(path: str, stream: str, forks: bool, output: str) -> None:
    """Write a stream's whole history as JSON Lines (with --forks, its forks too).

    A damaged version (a checksum that does not chain, stored JSON that does not parse) stops the export
    with CorruptStoreError; with -o the file is then left as it was.

    Example: eventckpt export agent.db demo --forks -o demo.jsonl
    """
    with _open(path) as store, _output(output) as out:
        for chunk in store.export(stream, forks=forks):
            out.write(chunk)


@contextmanager
def _output(output: str) -> Iterator[Any]:
    """Where export writes: stdout for -, else a file that appears only when the export is whole. It is
    written under a temporary name beside it and renamed at the end, so an export stopped by damage or an
    error leaves no half backup (nor an old one cut short). A path that is not a regular file (a FIFO,
    /dev/stdout) is written in place: it cannot be renamed over."""
    if output == "-":
        yield click.open_file("-", "wb")
        return
    if os.path.exists(output) and not os.path.isfile(output):
        with open(output, "wb") as out:
            yield out
        return
    folder, name = os.path.split(os.path.abspath(output))
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.part")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as to open()
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
        if os.path.exists(output):
            shutil.copymode(output, temporary)  # a file replaced keeps its permissions
        os.replace(temporary, output)
    except BaseException:
        os.unlink(temporary)
        raise


@main.command(name="import")
@click.argument("path", metavar="STORE", type=StoreTarget())
@click.argument("source", metavar="FILE", type=click.File("rb"))
@JSON
def import_(path: str, source: Any, as_json: bool) -> None:
    """Import streams from a JSON Lines export (FILE, or - for stdin) into STORE (created if missing).

    Nothing is kept if any line fails or the export is not whole. Example: eventckpt import copy.db demo.jsonl
    """
    size = _size(source)
    progress = _Progress("importing")
    done = 0

    def step(n: int) -> None:
        nonlocal done
        done += n
        progress(done, size)

    try:
        with _target(path) as store:
            names = store.import_lines(source, progress=step if size else None)
    finally:
        progress.close()
    if as_json:
        emit_json({"streams": names})
    else:
        click.echo(f"imported {len(names)} streams: {', '.join(names)}")


@main.command()
@click.argument("source", metavar="SRC", type=StoreTarget())
@click.argument("target", metavar="DST", type=StoreTarget())
@JSON
def copy(source: str, target: str, as_json: bool) -> None:
    """Copy every stream of SRC into DST (created if missing), between engines in either direction:
    version numbers, times, checksums, the streams' order and LangGraph threads are kept, and values as
    stored. All or nothing (one transaction of DST): a failed or killed copy leaves DST as it was, so it
    can be run again; streams DST already has are refused before anything is written. SRC and DST are
    files or postgresql:// URLs (eventckpt copy agent.db postgresql://me@db-host/agents).

    Example: eventckpt copy agent.db backup.db
    """
    progress = _Progress("copying")
    try:
        with _open(source) as src, _target(target) as dst:
            copied = eventckpt.copy(src, dst, progress=progress)
    finally:
        progress.close()
    if as_json:
        emit_json({"streams": list(copied.streams), "versions": copied.versions})
    else:
        click.echo(f"copied {len(copied.streams)} streams, {copied.versions} versions")


@contextmanager
def _target(path: str) -> Iterator[eventckpt.Store]:
    """The store at `path`, created if missing, for a command that writes all or nothing (import, copy):
    when the command fails and a file it created holds nothing, the path is left as it was."""
    local = not is_postgres(path)  # a database is one transaction: nothing to undo
    existed = local and os.path.exists(path)
    fresh = local and (not existed or os.path.getsize(path) == 0)
    try:
        with _open(path, create=True) as store:
            try:
                yield store
            except BaseException:
                fresh = fresh and _holds_nothing(store)  # another process may have written meanwhile
                raise
    except BaseException:
        if fresh:  # the store this command created holds nothing: leave the path as it was
            _unmake_store(path, existed)
        raise


def _holds_nothing(store: eventckpt.Store) -> bool:
    try:
        return not store.streams()
    except eventckpt.EventCkptError:
        return False


def _unmake_store(path: str, existed: bool) -> None:
    """Undo the store a failed import or copy created (closed, holding nothing): a path that did not exist is
    removed, an empty file it was given is emptied again. When SQLite left its -wal/-shm files, another
    connection has the file open, and it stays."""
    if any(os.path.exists(path + suffix) for suffix in ("-wal", "-shm", "-journal")):
        return
    try:
        if existed:
            os.truncate(path, 0)
        else:
            os.remove(path)
    except OSError:  # the open failed before it created the file (no such directory), or the clean-up
        pass  # itself failed: either way the error that made the command fail is the one to report


def _size(source: Any) -> int:
    try:
        return os.fstat(source.fileno()).st_size if os.path.isfile(source.name) else 0
    except (OSError, AttributeError, ValueError):
        return 0


@main.command(context_settings={"ignore_unknown_options": True})  # a query may start with a -- comment
@STORE
@click.argument("query")
@JSON
def sql(path: str, query: str, as_json: bool) -> None:
    """Run a read-only SQL query on the store (the views: checkpoints, changes, path_history, lineage,
    stream_heads). Only reads are allowed (SELECT, EXPLAIN, PRAGMAs that read): a statement that would
    write is refused and nothing changes.

    A query may start with a -- comment; put -- before a query that is itself an option's name (--json).

    Example: eventckpt sql agent.db "SELECT stream, head FROM stream_heads"
    """
    if not query.strip():  # it would print nothing and exit 0, like a query that found no rows
        raise InvalidArgumentError("query", query, "is empty: give a query such as \"SELECT stream, head FROM stream_heads\"")
    with _open(path) as store:
        columns, rows = store.sql(query)
    if as_json:
        keys = sql_columns(columns)
        emit_json([{key: sql_json(value) for key, value in zip(keys, row)} for row in rows])
    elif columns:
        table(columns, [[sql_text(value) for value in row] for row in rows], header=True)


# -- the viewer ---------------------------------------------------------------------------------------


@main.command()
@STORE
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (anything but 127.0.0.1/localhost shares the store with your network).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="The port; 0 picks a free one.")
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in your web browser.")
@click.option("-v", "--verbose", is_flag=True, help="Log every request on stderr.")
def serve(path: str, host: str, port: int, open_browser: bool, verbose: bool) -> None:
    """Look at the store in a web browser: every stream and its forks, a stream's timeline, the state at any
    version as a tree, its events and diff, any two versions compared, a path's history, and search.

    The store is opened read-only: nothing the viewer does can change it. Runs until Ctrl-C.

    Example: eventckpt serve agent.db --port 0 --open
    """
    from .serve import run

    try:
        run(path, host, port, open_browser=open_browser, echo=click.echo, verbose=verbose)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise click.ClickException(f"port {port} on {host} is in use: pick another with --port (0: any free one)") from None
        raise


@main.command()
@STORE
@JSON
def upgrade(path: str, as_json: bool) -> None:
    """Upgrade a store written by an earlier eventckpt to this version's schema, in one transaction.

    The commands that only read never upgrade a store: they refuse an older one. Running it again does
    nothing. Example: eventckpt upgrade agent.db
    """
    with _open(path, write=True) as store, store.core.session() as journal:  # a writable open upgrades
        version = journal.schema_version()
        shown = _shown(path, store)
    if as_json:
        emit_json({"store": shown, "schema_version": version})
    else:
        click.echo(f"{shown}: schema version {version}, this eventckpt's")


# -- demo ---------------------------------------------------------------------------------------------


@main.command()
@click.argument("path", metavar="STORE", type=StoreTarget())
@click.option("--steps", default=8, show_default=True, type=click.IntRange(min=3), help="How many agent steps to simulate.")
def demo(path: str, steps: int) -> None:
    """Run a short simulated agent on a store (a file, created if missing, or a postgresql:// URL) and show
    its log, a time-travel restore, a diff and a fork.

    It writes the streams `demo` and `demo-retry`; when the file already has a stream by either name, it
    writes `demo-2` and `demo-2-retry` (or `demo-3`, ...) instead: it never changes or deletes what is there.

    Example: eventckpt demo agent.db
    """
    with _open(path, create=True) as store:
        shown = _shown(path, store)
        name = _demo_name(store)
        task = store.stream(name)
        task.save({"messages": [{"role": "user", "content": "Find the cheapest flight to Lisbon."}],
                   "plan": ["search flights"], "scratch": {"searches": 0}, "step": 0},
                  {"input_tokens": 0, "output_tokens": 0}, name="start", metadata={"node": "input"})
        for step in range(1, steps + 1):
            tool = step % 3 == 0
            with task.transaction(auto=not tool, name="before tool call" if tool else None,
                                  metadata={"node": "tools" if tool else "agent", "step": step}) as tx:
                tx.append("messages", {"role": "assistant", "content": f"Step {step}: "
                                       + ("calling search_flights(LIS)" if tool else "thinking about fares")})
                if tool:
                    tx.incr(("scratch", "searches"))
                    tx.set(("scratch", "best_fare"), 120 - step * 3)
                tx.set("step", step)
                tx.add_usage(input_tokens=120, output_tokens=40)
        task.save({**task.state(), "plan": ["search flights", "book flight"]}, metadata={"node": "planner"})

        click.echo(f"store {shown}: stream {name!r}, {task.version} versions\n")
        click.echo("log (newest first):")
        for cp in task.log():
            click.echo("  " + log_line(cp))
        tools = task.log(metadata={"node": "tools"})
        click.echo(f"\ntool calls (log --meta node=tools): versions {', '.join(str(cp.version) for cp in tools)}")

        back = 3
        then = task.state(back)
        click.echo(f"\ntime travel to v{back}: step={then['step']}, {len(then['messages'])} messages, "
                   f"scratch={orjson.dumps(then['scratch']).decode()}")

        changes = task.diff(back)
        click.echo(f"\ndiff v{back} -> v{task.version}:")
        for change in changes:
            click.echo("  " + change_line(change, 90))

        branch = task.fork(at=back, task_id=f"{name}-retry")
        branch.save({**then, "plan": ["search trains"]}, metadata={"node": "replan"})
        click.echo(f"\nforked {name!r} at v{back} into {branch.task_id!r} (v{branch.version}); "
                   f"{name!r} keeps all {task.version} versions")
        click.echo(f"diff {name}@{task.version} -> {branch.task_id}@{branch.version}:")
        for change in task.diff(task.version, (branch.task_id, branch.version)):
            click.echo("  " + change_line(change, 90))
    query = f"SELECT version, name, input_tokens FROM checkpoints WHERE stream = '{name}'"
    if is_postgres(path):
        click.echo(f"\nstore: {shown}. Try: eventckpt history {shown} {name} scratch.best_fare\n"
                   f"  or: psql {shown} -c \"{query.replace('checkpoints', 'eventckpt.checkpoints')}\"")
    else:
        click.echo(f"\nfile: {path}, {os.path.getsize(path):,} bytes. Try: eventckpt history {path} {name} "
                   f"scratch.best_fare\n  or: sqlite3 {path} \"{query}\"")


def _demo_name(store: eventckpt.Store) -> str:
    """`demo`, or the first of `demo-2`, `demo-3`, ... that is free together with its `-retry` fork."""
    taken = set(store.streams())
    name, n = "demo", 1
    while name in taken or f"{name}-retry" in taken:
        n += 1
        name = f"demo-{n}"
    return name


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
