"""The viewer as a function from a request (method, target) to a response: routes, the JSON twin of
every page, error pages, and the static files shipped in the package. No socket here (see server.py),
so tests and the benchmark can call it directly.

Routes (each page also answers as JSON when its last segment ends in `.json`):
    /, /streams                     streams, newest first, and the fork graph of each tree
    /s/NAME                         a stream's timeline (?before=V&n=N or ?after=V&n=N)
    /s/NAME/v/V                     a version (?pin=PATH&events_start=I)
    /s/NAME/v/V/state               one node of that version's state (?path=PATH&start=I; &inner=KEYS goes
                                    on into its stored form: a JSON list of keys and indices)
    /s/NAME/history                 a path's history (?path=PATH&until=V&n=N)
    /diff                           two versions compared (?a=NAME@V&b=NAME@V&start=I)
    /search                         checkpoints by name and metadata (?name=...&meta=KEY=VALUE)
    /static/FILE                    the viewer's script, styles and icon
Stream names are one URL-encoded segment ('/' and '.' encoded too; the names '.' and '..' as '!%2E' and
'!%2E%2E', since a browser resolves '%2E' and '%2E%2E' away as dot segments).
"""

from __future__ import annotations

import os
import time
import traceback
from importlib import resources
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

import jinja2
import orjson

from ..checks import whole_number
from ..errors import EventCkptError, InvalidArgumentError, PathError, StreamNotFoundError, VersionNotFoundError
from ..store import Store
from . import pages, shapes

TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
HEADERS = {
    # Nothing but our own script and styles ever runs or loads: a stored string that slipped through as
    # markup could not execute, and the page reaches no other origin.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
                               " connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class Response(NamedTuple):
    status: int
    content_type: str
    body: bytes
    seconds: float = 0.0  # time spent answering (the Server-Timing header)


class NotFound(Exception):
    """No such route or file (answered 404)."""


class Viewer:
    """Answers requests about one open store (open it read-only). Thread-safe: the store serializes
    its own calls."""

    def __init__(self, store: Store, label: str | None = None, *, verbose: bool = False) -> None:
        self.store = store
        self.verbose = verbose  # log each request on stderr
        self.label = label or os.path.basename(store.path)  # how commands name the store file
        self.env = jinja2.Environment(loader=jinja2.PackageLoader("eventckpt.serve", "templates"),
                                      autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                                      lstrip_blocks=True)
        self.env.globals.update(json_url=pages.json_url, stream_url=pages.stream_url, version_url=pages.version_url,
                                history_url=pages.history_url, node_url=pages.node_url, diff_url=pages.diff_url,
                                store_name=os.path.basename(store.path))
        folder = resources.files("eventckpt.serve") / "static"
        # Files are served by exact name from this listing: no request can name a path outside it.
        self.static = {entry.name: entry.read_bytes() for entry in folder.iterdir() if entry.is_file()}

    def respond(self, method: str, target: str) -> Response:
        started = time.perf_counter()
        if method not in ("GET", "HEAD"):
            response = self._error(405, "This viewer only reads: use GET.", False)
        else:
            try:
                response = self._answer(target)
            except Exception:  # noqa: BLE001 - a bug: still an answer, and the traceback for whoever runs it
                traceback.print_exc()
                response = self._error(500, "The viewer failed on this page (the traceback is on its console).", False)
        return response._replace(seconds=time.perf_counter() - started)

    def refuse_host(self, host: str) -> Response:
        """The answer to a request that names another host (a page elsewhere rebinding its name here)."""
        return self._error(421, f"This viewer answers requests for 127.0.0.1 or localhost, not {host!r}.", False)

    def _answer(self, target: str) -> Response:
        parts = urlsplit(target)
        raw = [s for s in parts.path.split("/") if s]
        as_json = bool(raw) and raw[0] != "static" and raw[-1].endswith(".json")
        if as_json:
            raw[-1] = raw[-1][: -len(".json")]
        segments = [pages.segment_text(s) for s in raw]
        query = parse_qs(parts.query, keep_blank_values=True)
        try:
            if segments[:1] == ["static"] and len(segments) == 2:
                return self._static(segments[1])
            page = self._route(segments, query)
        except (NotFound, StreamNotFoundError, VersionNotFoundError) as exc:
            return self._error(404, _message(exc), as_json)
        except (pages.BadRequest, InvalidArgumentError, PathError) as exc:
            return self._error(400, _message(exc), as_json)
        except EventCkptError as exc:
            return self._error(500, f"{type(exc).__name__}: {exc}", as_json)
        if as_json:
            return Response(200, "application/json", shapes.page_json(page.data))
        return self._html(200, page.template, title=page.title, data=page.data,
                          json_href=pages.json_url(target if "?" in target else parts.path))

    def _route(self, segments: list[str], query: Any) -> pages.Page:
        store = self.store
        match segments:
            case [] | ["streams"]:
                return pages.streams(store, query)
            case ["s", name]:
                return pages.timeline(store, name, query)
            case ["s", name, "history"]:
                return pages.history(store, name, query)
            case ["s", name, "v", number] if whole_number(number):
                return pages.version(store, name, int(number), query, self.label)
            case ["s", name, "v", number, "state"] if whole_number(number):
                return pages.node(store, name, int(number), query)
            case ["diff"]:
                return pages.diff(store, query)
            case ["search"]:
                return pages.search(store, query)
        raise NotFound("No page here. Start from the list of streams.")

    def _static(self, name: str) -> Response:
        body = self.static.get(name)
        if body is None:
            raise NotFound(f"No static file named {name!r}.")
        return Response(200, TYPES.get(os.path.splitext(name)[1], "application/octet-stream"), body)

    def _html(self, status: int, template: str, **context: Any) -> Response:
        html = self.env.get_template(template).render(**context)
        return Response(status, "text/html; charset=utf-8", html.encode())

    def _error(self, status: int, message: str, as_json: bool) -> Response:
        if as_json:
            return Response(status, "application/json", orjson.dumps({"error": message, "status": status}))
        title = {404: "Not found", 400: "Bad request", 405: "Method not allowed", 421: "Wrong host"}.get(status, "Error")
        return self._html(status, "error.html", title=title, data={"status": status, "message": message},
                          json_href=None)


def _message(exc: BaseException) -> str:
    if isinstance(exc, StreamNotFoundError):
        return f"There is no stream named {exc.task_id!r} in this store."
    if isinstance(exc, VersionNotFoundError):
        return f"Stream {exc.task_id!r} has no version {exc.version} (its head is {exc.head})."
    return str(exc.args[0]) if isinstance(exc, (NotFound, pages.BadRequest)) and exc.args else str(exc)

