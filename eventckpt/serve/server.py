"""The viewer on a socket: the standard library's ThreadingHTTPServer in front of a Viewer, bound to
127.0.0.1 unless told otherwise, with the store opened read-only."""

from __future__ import annotations

import signal
import socket
import sys
import threading
import webbrowser
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..store import Store
from ..store import open as open_store
from .app import HEADERS, Viewer

LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class ViewerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], viewer: Viewer) -> None:
        self.viewer = viewer
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, RequestHandler)
        host = address[0]
        # Only requests that name this server: a web page elsewhere cannot read the store by pointing a
        # hostname of its own at 127.0.0.1 (DNS rebinding). Bound to every interface, any name is fine.
        self.hosts = None if host in ("", "0.0.0.0", "::") else LOOPBACK | {host}

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


class RequestHandler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "eventckpt-serve"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._send(self.command, body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._send("HEAD", body=False)

    def _refuse(self) -> None:
        self._send(self.command, body=True)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse  # answered 405: nothing is written

    def _send(self, method: str, body: bool) -> None:
        viewer = self.server.viewer
        host = _hostname(self.headers.get("Host") or "")
        if self.server.hosts is not None and host not in self.server.hosts:
            response = viewer.refuse_host(host)
        else:
            response = viewer.respond(method, self.path)
        self.send_response(response.status)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Server-Timing", f"app;dur={response.seconds * 1000:.2f}")
        if response.status == 405:
            self.send_header("Allow", "GET, HEAD")
        for name, value in HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(response.body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.server.viewer.verbose:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")


def _hostname(header: str) -> str:
    """The host part of a Host header ("[::1]:8765" -> "[::1]", "localhost:8765" -> "localhost")."""
    if header.startswith("["):
        return header[: header.find("]") + 1]
    return header.rsplit(":", 1)[0]


def shown_target(path: str, store: Store) -> str:
    """How pages and messages name the store: the path as given, or a PostgreSQL URL without its password
    (the store's own description: pages may be served beyond this machine)."""
    return store.path if store.core.backend.kind == "postgresql" else path


@contextmanager
def serving(path: str, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False) -> Iterator[ViewerServer]:
    """A running viewer of the store at `path` (opened read-only) in a background thread; stopped, and
    the store closed, on exit."""
    # It shows what was stored: NaN included, and an enum or object with its class name (the program's
    # classes are never here), not as plain data that compares equal to what it replaced.
    store = open_store(path, readonly=True, allow_nan=True, unknown_types="keep")
    try:
        viewer = Viewer(store, label=shown_target(path, store), verbose=verbose)
        server = ViewerServer((host, port), viewer)
    except BaseException:
        store.close()
        raise
    thread = threading.Thread(target=server.serve_forever, name="eventckpt-serve", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        store.close()


def run(path: str, host: str, port: int, *, open_browser: bool, echo: Callable[[str], None], verbose: bool = False) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM), then close the store."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with serving(path, host, port, verbose=verbose) as server:
            echo(f"eventckpt viewer of {server.viewer.label} (read-only) at {server.url}  (Ctrl-C stops it)")
            if open_browser:
                webbrowser.open(server.url)
            try:
                while not stop.wait(0.5):
                    pass
            except KeyboardInterrupt:
                pass
    finally:
        signal.signal(signal.SIGTERM, previous)
