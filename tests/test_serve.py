"""`eventckpt serve` over HTTP: every route and its JSON twin on a real store (a file, and a PostgreSQL
database) served by a real server, stored strings rendered as text, 404s and 400s, static files that cannot escape their folder,
no route that writes, other hosts refused, and the file unchanged (bytes and directory) after a run."""

from __future__ import annotations

import hashlib
import http.client
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import orjson
import pytest
from click.testing import CliRunner

import eventckpt
from eventckpt.cli import main
from eventckpt.serve import serving

from .engines import ENGINES, TARGETS

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(2)>'
EVIL = f"evil{SCRIPT}{IMG}"  # a stream name, checkpoint name, metadata value and message all at once
KEY = "<img src=x onerror=alert(3)>"  # a top-level key (keys cannot hold quotes)


def _build(path: Path) -> None:
    result = CliRunner().invoke(main, ["demo", str(path)])
    assert result.exit_code == 0, result.output
    with eventckpt.open(path) as store:
        evil = store.stream(EVIL)
        evil.save({"messages": [{"role": "user", "content": SCRIPT + IMG}], KEY: IMG, "n": 0},
                  {"input_tokens": 3}, name=EVIL, metadata={"node": EVIL, KEY: 1})
        for i in range(1, 4):
            with evil.transaction(name=EVIL if i == 2 else None, metadata={"node": EVIL}) as tx:
                tx.append("messages", {"role": "tool", "content": f"{IMG} {i}"})
                tx.set("n", i)
        evil.fork(at=2, task_id=EVIL + "~fork").save({"n": SCRIPT})
        long = store.stream("long")
        long.save({"items": [], "meta": {}})
        for i in range(300):
            with long.transaction(auto=True) as tx:
                tx.append("items", {"i": i, "text": f"item {i}"})


@pytest.fixture(scope="module", params=ENGINES)
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    """The viewer of a store holding the demo, a stream of hostile strings with a fork, and a long list,
    on each engine (on SQLite in a file whose name holds markup too); yields (base URL, store)."""
    if request.param == "postgresql":
        path: Any = TARGETS.take("postgresql")
    else:
        path = tmp_path_factory.mktemp("serve") / "a<i>b.db"
    _build(path)
    try:
        with serving(str(path)) as server:
            yield server.url, path
    finally:
        if request.param == "postgresql":
            TARGETS.give_back(path)


def get(base: str, target: str, *, method: str = "GET", host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One raw request (no client-side normalization of the target)."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest(method, target, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def page(base: str, target: str, status: int = 200) -> str:
    code, headers, body = get(base, target)
    assert code == status, (target, code, body[:300])
    assert headers["content-type"].startswith("text/html")
    return body.decode()


def twin(base: str, target: str, status: int = 200) -> Any:
    code, headers, body = get(base, target)
    assert code == status, (target, code, body[:300])
    assert headers["content-type"] == "application/json"
    return orjson.loads(body)


def s(name: str) -> str:
    return quote(name, safe="").replace(".", "%2E")


def test_streams_page(site: tuple[str, Any]) -> None:
    """The streams page lists every stream with head, fork origin, last commit and tokens, and draws each
    tree's fork graph with links to streams and versions; its twin has the same data."""
    base, _ = site
    html = page(base, "/")
    assert 'href="/s/demo-retry"' in html and 'href="/s/demo/v/3"' in html and "<svg class=\"forks\"" in html
    assert html == page(base, "/streams")
    data = twin(base, "/streams.json")
    rows = {r["stream"]: r for r in data["streams"]}
    assert rows["demo"]["head"] == 10 and rows["demo"]["total_tokens"] == 1280
    assert rows["demo-retry"]["fork_of"] == {"stream": "demo", "version": 3, "href": "/s/demo/v/3"}
    assert rows["demo"]["updated_at"] and rows["long"]["head"] == 301
    demo_tree = next(t for t in data["trees"] if t["root"] == "demo")
    assert [lane["stream"] for lane in demo_tree["lanes"]] == ["demo", "demo-retry"]
    assert demo_tree["lanes"][1]["fork"]["version"] == 3
    older = twin(base, "/streams.json?n=2")
    assert len(older["streams"]) == 2 and older["older"]
    rest = twin(base, older["older"].replace("/streams", "/streams.json"))
    assert {r["stream"] for r in rest["streams"]}.isdisjoint({r["stream"] for r in older["streams"]})


def test_timeline_page(site: tuple[str, Any]) -> None:
    """A stream's timeline lists versions newest first (name, auto/manual, metadata, tokens, events,
    bytes), paged both ways, with SVG plots of tokens and event bytes and the fork graph."""
    base, _ = site
    text = page(base, "/s/demo")
    assert "before tool call" in text and 'class="plot tokens"' in text and 'class="plot bytes"' in text
    assert text.index(">v10<") < text.index(">v9<")
    data = twin(base, "/s/demo.json")
    assert [v["version"] for v in data["versions"]] == list(range(10, 0, -1))
    assert data["versions"][3]["name"] == "before tool call" and data["versions"][3]["auto"] is False
    assert data["versions"][3]["metadata"] == {"node": "tools", "step": 6} and data["versions"][3]["events"] == 4
    assert len(data["plots"]["bars"]) == 10 and data["plots"]["lines"][0]["counter"] == "input_tokens"
    first = twin(base, "/s/long.json?n=100")
    assert [v["version"] for v in first["versions"]][:2] == [301, 300] and first["older"] == "/s/long?before=202&n=100" \
        or first["older"] == "/s/long?before=202"
    second = twin(base, "/s/long.json?before=202")
    assert second["versions"][0]["version"] == 201 and second["newer"] and second["older"]


def test_version_page(site: tuple[str, Any]) -> None:
    """A version shows its checkpoint, the state tree, its events, the diff from the previous version,
    previous/next links and copyable fork/rollback commands; a pinned path shows its value and history."""
    base, path = site
    html = page(base, "/s/demo/v/7")
    assert 'rel="prev"' in html and 'href="/s/demo/v/6"' in html and 'href="/s/demo/v/8"' in html
    assert "best_fare" in html and "<details" in html and "copy" in html
    data = twin(base, "/s/demo/v/7.json")
    assert data["checkpoint"]["name"] == "before tool call" and data["prev_version"] == 6 and data["next_version"] == 8
    assert [(e["op"], e["path"]) for e in data["events"]][1:] == [("incr", "$.scratch.searches"),
                                                                   ("set", "$.scratch.best_fare"), ("set", "$.step")]
    changed = {c["path"]: c for c in data["diff"]["changes"]}
    assert changed["$.scratch.best_fare"] == {"kind": "changed", "path": "$.scratch.best_fare", "old": 111, "new": 102}
    keys = {c["key"]: c for c in data["state"]["children"]}
    assert keys["step"]["value"] == 6 and keys["messages"]["size"] == 7
    assert data["commands"]["rollback"] == f"eventckpt rollback -- {shlex.quote(str(path))} demo 7"
    assert data["commands"]["fork"] == f"eventckpt fork --name=demo-v7 -- {shlex.quote(str(path))} demo@7"
    pinned = twin(base, "/s/demo/v/7.json?pin=scratch.best_fare")["pin"]
    assert pinned["value"] == 102 and [e["version"] for e in pinned["history"]] == [7, 4]
    assert "Pinned" in page(base, "/s/demo/v/7?pin=scratch.best_fare")
    assert twin(base, "/s/demo/v/2.json?pin=scratch.best_fare")["pin"]["value"] is None  # absent then
    assert twin(base, "/s/demo/v/1.json")["prev"] is None and twin(base, "/s/demo/v/10.json")["next"] is None
    fork = twin(base, "/s/demo-retry/v/4.json")
    assert fork["prev_version"] == 3 and {c["key"] for c in fork["state"]["children"]} >= {"plan", "messages"}


def test_long_lists_show_their_ends_and_page_the_rest(site: tuple[str, Any]) -> None:
    """A long list shows its first and last items with a gap linking to its own page, which pages through
    the items (also as JSON)."""
    base, _ = site
    data = twin(base, "/s/long/v/301.json")
    items = next(c for c in data["state"]["children"] if c["key"] == "items")
    shown = [c["key"] for c in items["children"] if c["kind"] != "gap"]
    gap = next(c for c in items["children"] if c["kind"] == "gap")
    assert items["size"] == 300 and shown[:2] == [0, 1] and shown[-1] == 299 and gap["start"] == 5 and gap["stop"] == 275
    node = twin(base, gap["href"].replace("/state", "/state.json"))
    assert node["node"]["window"] == [5, 105] and node["node"]["children"][0]["key"] == 5
    assert node["node"]["children"][0]["children"][1]["value"] == "item 5" and node["next_page"]
    html = page(base, gap["href"])
    assert "item 5" in html and "item 104" in html and "item 105" not in html
    back = twin(base, node["previous_page"].replace("/state", "/state.json"))  # from item 5: the first page
    assert "start=" not in node["previous_page"] and back["node"]["window"] == [0, 100]
    root = twin(base, "/s/long/v/301/state.json")
    assert root["node"]["size"] == 2


def test_history_diff_and_search_pages(site: tuple[str, Any]) -> None:
    """History pages end at whole versions; diff compares any two versions (across forks too) and pages
    its changes; search finds checkpoints by name and by metadata across streams."""
    base, _ = site
    hist = twin(base, "/s/demo/history.json?path=scratch.best_fare")
    assert [(e["version"], e["value"]) for e in hist["entries"]] == [(7, 102), (4, 111)]
    assert "scratch.best_fare" in page(base, "/s/demo/history?path=scratch.best_fare")
    paged = twin(base, "/s/long/history.json?path=items&n=2")
    assert [e["version"] for e in paged["entries"]] == [301, 300] and "until=299" in paged["older"]
    diff = twin(base, "/diff.json?a=demo@3&b=demo-retry@4")
    assert {c["path"]: c["kind"] for c in diff["changes"]} == {"$.plan[0]": "changed"}
    assert diff["counts"] == {"added": 0, "removed": 0, "changed": 1}
    assert twin(base, "/diff.json?a=demo@3")["b"] == "demo@10"
    long = twin(base, "/diff.json?a=long@1&b=long@301")
    assert long["total"] == 300 and len(long["changes"]) == 200 and long["newer"]
    assert "Compare" in page(base, "/diff")
    found = twin(base, "/search.json?name=before+tool+call")
    assert [(r["stream"], r["version"]) for r in found["results"]] == [("demo", 7), ("demo", 4)]
    tools = twin(base, "/search.json?meta=node%3Dtools")
    assert {r["version"] for r in tools["results"]} == {4, 7}
    assert twin(base, "/search.json")["results"] is None and "Search" in page(base, "/search")


PAGES = ["/", "/s/{e}", "/s/{e}/v/1", "/s/{e}/v/3", "/s/{e}/v/2?pin=n", "/s/{e}/v/1/state?path=messages",
         "/s/{e}/history?path=n", "/diff?a={e}@1&b={e}~fork@3", "/search?name={q}", "/s/{e}~fork/v/3",
         "/s/{e}/v/1?pin=messages[0].content", "/s/{e}/v/1/state", "/s/{e}/history?path=<script>",
         "/s/{e}/v/99", "/s/{e}x"]


@pytest.mark.parametrize("target", PAGES)
def test_stored_strings_render_as_text(site: tuple[str, Any], target: str) -> None:
    """Markup in stream names, checkpoint names, metadata keys and values, state keys and values, paths
    and the store's file name reaches the page as text (escaped), never as markup; the JSON twin carries
    the strings exactly."""
    base, _ = site
    url = target.format(e=s(EVIL), q=quote(EVIL))
    code, _, body = get(base, url)
    html = body.decode()
    assert code in (200, 400, 404)
    for raw in ("<script>alert", "<img src=x", "<i>b.db"):
        assert raw not in html, (url, raw)
    assert "&lt;script&gt;" in html or "&lt;img" in html or "a&lt;i&gt;b.db" in html
    if code == 200 and "?" not in url.split("/")[-1]:
        parts = url.split("?")
        data = twin(base, (parts[0].rstrip("/") or "/streams") + ".json" + ("?" + parts[1] if len(parts) > 1 else ""))
        text = orjson.dumps(data).decode()
        assert orjson.dumps(EVIL).decode()[1:-1] in text or "a<i>b.db" in text


def test_escaping_reaches_every_evil_string(site: tuple[str, Any]) -> None:
    """The hostile stream's version page holds each stored string escaped: its name, checkpoint name,
    metadata, a state key and value, and the commands quote them for a shell."""
    base, path = site
    html = page(base, f"/s/{s(EVIL)}/v/1")
    assert html.count("evil&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;img src=x onerror=alert(2)&gt;") >= 3
    assert "&lt;img src=x onerror=alert(3)&gt;" in html  # the state key and the metadata key
    data = twin(base, f"/s/{s(EVIL)}/v/1.json")
    assert data["checkpoint"]["name"] == EVIL and data["checkpoint"]["metadata"] == {"node": EVIL, KEY: 1}
    assert {c["key"] for c in data["state"]["children"]} == {"messages", KEY, "n"}
    assert data["commands"]["rollback"].startswith(f"eventckpt rollback -- {shlex.quote(str(path))} '{EVIL}'")


def test_missing_things_are_404(site: tuple[str, Any]) -> None:
    """Unknown routes, streams and versions are a 404 page saying what is missing (a JSON 404 for .json
    routes), never an empty page."""
    base, _ = site
    for target, words in [("/nope", "No page here"), ("/s/nope", "no stream named 'nope'"),
                          ("/s/demo/v/11", "has no version 11"), ("/s/demo/v/0", "has no version 0"),
                          ("/s/demo/v/x", "No page here"), ("/s/nope/history?path=step", "no stream named"),
                          ("/s/demo/v/42/state", "has no version 42"), ("/diff?a=nope@1", "no stream named"),
                          ("/diff?a=demo@3&b=nope@2", "no stream named"), ("/s/demo/v/3/extra", "No page here")]:
        assert words in unescape(page(base, target, 404)), target
        base_target, _, query = target.partition("?")
        data = twin(base, base_target + ".json" + ("?" + query if query else ""), 404)
        assert data["status"] == 404 and data["error"], target


def test_bad_parameters_are_400(site: tuple[str, Any]) -> None:
    """Parameters that cannot be read are a 400 saying which."""
    base, _ = site
    for target in ("/s/demo?n=abc", "/s/demo?before=-1", "/s/demo/history", "/s/demo/v/3?pin=a[", "/streams?n=0",
                   "/search?meta=novalue", "/s/demo/v/3/state?path=messages&start=x"):
        assert "Bad request" in page(base, target, 400), target
    assert twin(base, "/s/demo.json?n=abc", 400)["status"] == 400


@pytest.mark.parametrize("target", ["/static/../app.py", "/static/%2e%2e/app.py", "/static/%2e%2e%2fapp.py",
                                    "/static/..%2f..%2fpyproject.toml", "/static//etc/passwd", "/static/%2fetc%2fpasswd",
                                    "/static/%2Fetc%2Fhostname", "/static/", "/static/app.js/..", "/static/nope.js",
                                    "/static/..", "/../static/app.js/../../server.py"])
def test_static_files_cannot_escape(site: tuple[str, Any], target: str) -> None:
    """A static route serves only the files shipped in the package's static folder: '..', encoded dots and
    slashes and absolute paths find nothing."""
    base, _ = site
    code, _, body = get(base, target)
    assert code == 404, (target, code)
    assert b"import" not in body and b"root:" not in body


def test_static_files_are_served(site: tuple[str, Any]) -> None:
    """The script, styles and icon are served with their types; pages load nothing from elsewhere."""
    base, _ = site
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css"), ("favicon.svg", "image/svg+xml")):
        code, headers, body = get(base, f"/static/{name}")
        assert code == 200 and headers["content-type"].startswith(kind) and body
    html = page(base, "/s/demo/v/3")
    assert "http://" not in html.replace(base, "") and "https://" not in html and "//cdn" not in html
    assert "default-src 'none'" in get(base, "/")[1]["content-security-policy"]


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_no_route_writes(site: tuple[str, Any], method: str) -> None:
    """Every method but GET and HEAD is refused with 405."""
    base, _ = site
    code, headers, _ = get(base, "/s/demo/v/3", method=method)
    assert code == 405 and headers["allow"] == "GET, HEAD"


def test_head_and_server_timing(site: tuple[str, Any]) -> None:
    """HEAD answers like GET without a body; every answer says its server time."""
    base, _ = site
    code, headers, body = get(base, "/s/demo", method="HEAD")
    assert code == 200 and body == b"" and int(headers["content-length"]) > 1000
    assert headers["server-timing"].startswith("app;dur=")


def test_other_hosts_are_refused(site: tuple[str, Any]) -> None:
    """A request naming another host (a page elsewhere rebinding its name to 127.0.0.1) is refused; the
    loopback names are served."""
    base, _ = site
    port = urlsplit(base).port
    assert get(base, "/streams.json", host=f"evil.example:{port}")[0] == 421
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        assert get(base, "/streams.json", host=host)[0] == 200


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_of_requests_changes_nothing(tmp_path: Path) -> None:
    """After requests to every page the file's bytes are unchanged and no -wal/-shm is left behind."""
    path = tmp_path / "agent.db"
    _build(path)
    before, listing = _digest(path), sorted(os.listdir(tmp_path))
    with serving(str(path)) as server:
        for target in [t.format(e=s(EVIL), q=quote(EVIL)) for t in PAGES] + [
                "/s/demo/v/7?pin=scratch.best_fare", "/s/long/v/301", "/diff?a=long@1&b=long@301", "/s/demo.json"]:
            assert get(server.url, target)[0] in (200, 400, 404)
        assert sorted(os.listdir(tmp_path)) != listing  # SQLite's -wal/-shm while the reader is open
    assert _digest(path) == before and sorted(os.listdir(tmp_path)) == listing


def test_the_serve_command(tmp_path: Path) -> None:
    """`eventckpt serve FILE --port 0 --open` prints its URL, opens the browser there, serves the store,
    and stops on SIGTERM leaving the file as it was."""
    path = tmp_path / "agent.db"
    _build(path)
    before = _digest(path)
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(f"import sys; open({str(opened)!r}, 'w').write(sys.argv[1])\n")
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} %s"}
    proc = subprocess.Popen([sys.executable, "-m", "eventckpt", "serve", str(path), "--port", "0", "--open"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        url = line.split(" at ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:") and "read-only" in line
        assert twin(url, "/streams.json")["streams"]
        deadline = time.monotonic() + 60  # the browser is a new Python process: slow to start on a busy machine
        while not (opened.exists() and opened.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert opened.read_text() == url
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert _digest(path) == before and not os.path.exists(f"{path}-wal")


def test_a_busy_port_is_one_clear_line(tmp_path: Path) -> None:
    """Serving on a port already in use fails with one line naming the port, not a traceback."""
    path = tmp_path / "agent.db"
    _build(path)
    with serving(str(path)) as server:
        port = urlsplit(server.url).port
        done = subprocess.run([sys.executable, "-m", "eventckpt", "serve", str(path), "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and f"port {port}" in done.stderr and "Traceback" not in done.stderr


def test_a_postgresql_password_is_never_shown(pg_target: str) -> None:
    """Served from a URL with a password, the pages and their twins name the store without it (the
    fork and rollback commands too)."""
    with eventckpt.open(pg_target) as store:
        store.stream("a").save({"x": 1})
    with serving(pg_target.replace("eventckpt@", "eventckpt:s3cret@", 1)) as server:
        for target in ("/s/a/v/1", "/s/a/v/1.json", "/", "/s/a"):
            code, _, body = get(server.url, target)
            assert code == 200 and b"s3cret" not in body, target
        commands = twin(server.url, "/s/a/v/1.json")["commands"]
    assert commands["fork"] == f"eventckpt fork --name=a-v1 -- {pg_target} a@1"


def test_a_store_saved_with_nan_is_served(tmp_path: Path) -> None:
    """A version holding NaN (stored with allow_nan=True) is a page, its twin and a pinned path, not a 500."""
    path = tmp_path / "n.db"
    with eventckpt.open(path, allow_nan=True) as store:
        store.stream("n").save({"x": float("nan"), "y": [float("-inf")]})
    with serving(str(path)) as server:
        for target in ("/s/n/v/1", "/s/n/v/1.json", "/s/n/v/1?pin=x", "/s/n/history?path=x", "/s/n/v/1/state?path=y"):
            assert get(server.url, target)[0] == 200, target


def test_numbers_in_other_scripts_are_not_versions(site: tuple[str, Any]) -> None:
    """A version or a parameter written with non-ASCII digits ("²", "٣") is a 404 or a 400, never a 500."""
    base, _ = site
    assert get(base, "/s/demo/v/%C2%B2")[0] == 404 and get(base, "/s/demo/v/%D9%A3/state")[0] == 404
    assert get(base, "/s/demo?n=%C2%B2")[0] == 400


def test_numbers_past_64_bits_are_exact_in_every_twin(tmp_path: Path) -> None:
    """Token totals whose sum passes 64 bits are exact JSON numbers in every twin, not a 500."""
    path = tmp_path / "big.db"
    big, top = 2**70 + 1, 2**63 - 1
    with eventckpt.open(path) as store:
        store.stream("b").save({"x": big}, {"input_tokens": top, "output_tokens": top, "cache_tokens": top},
                               name="big", metadata={"n": big})
    with serving(str(path)) as server:
        for target in ("/streams", "/s/b", "/s/b/v/1", "/search?name=big"):
            assert get(server.url, target)[0] == 200, target
            body = get(server.url, target.replace("?", ".json?") if "?" in target else target + ".json")[2]
            assert str(3 * top).encode() in body, target
        assert f'"n":{{"$bigint":"{big}"}}'.encode() in get(server.url, "/search.json?name=big")[2]  # as stored


def _json(url: str) -> str:
    """The JSON twin of a page link."""
    base, sep, query = url.partition("?")
    return base + ".json" + sep + query


def _reachable_nodes(base: str, start: str) -> list[dict[str, Any]]:
    """Every node (gaps aside) of every page reachable from `start` through gaps and pagers; every gap
    must have a link."""
    nodes: list[dict[str, Any]] = []
    todo, visited = [start], set()

    def walk(node: dict[str, Any]) -> None:
        for child in node.get("children", []):
            if child["kind"] == "gap":
                assert child["href"], child
                todo.append(child["href"])
            else:
                nodes.append(child)
                walk(child)

    while todo:
        url = todo.pop()
        if url not in visited:
            visited.add(url)
            data = twin(base, _json(url))
            walk(data["node"])
            todo += [u for u in (data["next_page"], data["previous_page"]) if u]
    return nodes


def test_gaps_of_a_spent_node_budget_name_the_items_they_hide(tmp_path: Path) -> None:
    """When a page's node budget runs out in a window of a long list or dict, the gap names and links the
    parent's own positions, so every item is on some page."""
    path = tmp_path / "b.db"
    with eventckpt.open(path) as store:
        store.stream("b").save({"messages": [{f"f{j}": j for j in range(20)} for _ in range(300)],
                                "cache": {f"q{i:03}": {f"f{j}": j for j in range(30)} for i in range(350)}})
    with serving(str(path)) as server:
        window = twin(server.url, "/s/b/v/1/state.json?path=messages&start=100")["node"]
        gap = next(c for c in window["children"] if c["kind"] == "gap")
        assert 100 < gap["start"] < gap["stop"] == 200 and "start=%d" % gap["start"] in gap["href"]
        keys = twin(server.url, "/s/b/v/1/state.json?path=cache&start=200")["node"]
        gap = next(c for c in keys["children"] if c["kind"] == "gap")
        assert 200 < gap["start"] < gap["stop"] == 300 and "start=%d" % gap["start"] in gap["href"]
        keys = {n["key"] for n in _reachable_nodes(server.url, "/s/b/v/1/state?path=cache")}
        assert keys >= {f"q{i:03}" for i in range(350)}


def test_every_item_of_a_tagged_value_has_a_page(tmp_path: Path) -> None:
    """The middle of a long set, tuple or dict with int keys (tagged values) and of a list below a key that
    is no path is linked from the version page and paged from the node page, shown as stored."""
    path = tmp_path / "t.db"
    state = {"scores": {step: step * 10 for step in range(100)}, "seen": set(range(100)), "path": tuple(range(100)),
             "odd": {'a"b': list(range(100))}, "nested": {1: [tuple(range(100))]}}
    with eventckpt.open(path) as store:
        store.stream("t").save(state)
    with serving(str(path)) as server:
        version = twin(server.url, "/s/t/v/1.json")["state"]
        seen = next(c for c in version["children"] if c["key"] == "seen")
        gap = seen["children"][0]["children"][5]
        assert gap["kind"] == "gap" and (gap["start"], gap["stop"]) == (5, 75) and gap["href"]
        window = twin(server.url, _json(gap["href"]))
        assert window["node"]["window"] == [5, 100] and window["inner"] == '["$set"]'
        assert [c["key"] for c in window["node"]["children"]] == list(range(5, 100))
        assert "as stored:" in page(server.url, gap["href"])
        for key in state:
            for start in (f"/s/t/v/1/state?path={key}", "/s/t/v/1/state"):
                values = {n.get("value") for n in _reachable_nodes(server.url, start)}
                assert values >= set(range(100)), (key, start)
        assert get(server.url, "/s/t/v/1/state.json?path=seen&inner=%5B%22nope%22%5D")[0] == 400
        assert get(server.url, "/s/t/v/1/state.json?path=seen&inner=nope")[0] == 400


def test_newer_pages_of_a_timeline_follow_the_versions_shown(tmp_path: Path) -> None:
    """"← newer" on a timeline shows the versions just after the newest one shown, also where retention
    left holes in the version numbers, so walking back to the head shows each version once."""
    path = tmp_path / "p.db"
    with eventckpt.open(path) as store:
        task = store.stream("p")
        for i in range(1, 41):
            task.save({"step": i}, auto=i % 4 != 0)
        task.prune(keep_last=10, auto_only=True)
        versions = task.list_versions()
    with serving(str(path)) as server:
        data = twin(server.url, "/s/p.json?n=5&before=9")
        walked = [v["version"] for v in data["versions"]]
        while data["newer"]:
            data = twin(server.url, _json(data["newer"]))
            walked += [v["version"] for v in data["versions"]]
        assert sorted(walked) == versions and len(walked) == len(versions)
        assert get(server.url, "/s/p.json?before=9&after=3")[0] == 400


def test_go_back_commands_run_for_a_stream_named_like_an_option(tmp_path: Path) -> None:
    """The fork and rollback commands of a version page run as shown for a stream whose name starts with "-"."""
    path = tmp_path / "d.db"
    with eventckpt.open(path) as store:
        task = store.stream("-1001234")
        task.save({"n": 1})
        task.save({"n": 2})
    with serving(str(path)) as server:
        commands = twin(server.url, "/s/-1001234/v/1.json")["commands"]
    for command in (commands["fork"], commands["rollback"]):
        words = shlex.split(command)
        assert words[0] == "eventckpt"
        result = CliRunner().invoke(main, words[1:])
        assert result.exit_code == 0, (command, result.output)
    with eventckpt.open(path) as store:
        assert store.stream("-1001234-v1").state() == {"n": 1} and store.stream("-1001234").state() == {"n": 1}


def test_diff_links_keep_spaces_around_stream_names(tmp_path: Path) -> None:
    """The diff links of a stream whose name starts with a space open its diff; a typed ref with stray
    spaces around the name of another stream still finds it."""
    path = tmp_path / "w.db"
    with eventckpt.open(path) as store:
        for name in (" lead", "plain"):
            task = store.stream(name)
            task.save({"a": 1})
            task.save({"a": 2})
    with serving(str(path)) as server:
        version = twin(server.url, f"/s/{s(' lead')}/v/1.json")
        data = twin(server.url, _json(version["compare_href"]))
        assert (data["a"], data["b"], data["total"]) == (" lead@1", " lead@2", 1)
        typed = twin(server.url, "/diff.json?a=%20plain%401%20&b=plain%402")
        assert (typed["a"], typed["total"]) == ("plain@1", 1)


def test_a_version_pages_its_events(tmp_path: Path) -> None:
    """A version with more events than a page shows links to the next and previous pages of its events,
    in its JSON twin too, so every event it wrote can be seen."""
    path = tmp_path / "e.db"
    with eventckpt.open(path) as store:
        task = store.stream("e")
        task.save({"scratch": {}})
        with task.transaction() as tx:
            for i in range(300):
                tx.set(("scratch", f"k{i:03}"), i)
    with serving(str(path)) as server:
        first = twin(server.url, "/s/e/v/2.json")
        assert len(first["events"]) == 200 and first["events_previous"] is None and first["events_next"]
        assert first["events_next"] in unescape(page(server.url, "/s/e/v/2"))
        rest = twin(server.url, _json(first["events_next"]))
        assert [e["seq"] for e in rest["events"]] == list(range(200, 300)) and rest["events_next"] is None
        assert rest["events"][-1]["path"] == "$.scratch.k299" and "events 200–299 of 300" in page(server.url, first["events_next"])
        assert twin(server.url, _json(rest["events_previous"]))["events"] == first["events"]


def test_enums_and_objects_show_their_class(tmp_path: Path) -> None:
    """The viewer never has the program's classes, yet its state tree shows a stored enum or object with its
    class name (escaped), and an enum replaced by its value or an object by its fields is a change."""
    import apsw

    path = tmp_path / "o.db"
    with eventckpt.open(path) as store:
        store.stream("o").save({"e": 0, "p": 0})
        store.stream("o").save({"e": 1, "p": {"x": 1}})
    color, pt = '{"$enum":["tests.gone.Color",1]}', f'{{"$object":["tests.gone.{KEY}",{{"x":1}}]}}'
    conn = apsw.Connection(str(path))  # what a program with these classes stored
    conn.execute("UPDATE events SET value = ? WHERE version = 1 AND path = '$.e'", (color,))
    conn.execute("UPDATE events SET value = ? WHERE version = 1 AND path = '$.p'", (pt,))
    conn.close()
    with serving(str(path)) as server:
        state = {c["key"]: c for c in twin(server.url, "/s/o/v/1.json")["state"]["children"]}
        assert "tests.gone.Color" in orjson.dumps(state["e"]).decode() and KEY in orjson.dumps(state["p"]).decode()
        changes = twin(server.url, "/s/o/v/2.json")["diff"]["changes"]
        assert [(c["path"], c["old"], c["new"]) for c in changes] == [
            ("$.e", orjson.loads(color), 1), ("$.p", orjson.loads(pt), {"x": 1})]
        assert twin(server.url, "/diff.json?a=o@1&b=o@2")["total"] == 2
        html = page(server.url, "/s/o/v/2")
        assert "tests.gone.Color" in html and KEY not in html and "tests.gone.&lt;img" in html
