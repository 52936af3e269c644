"""The viewer in a real browser (Debian's Chromium through chromedriver and Selenium): from the streams
to a version, expanding the state tree, pinning a path, moving between versions with the keyboard,
comparing two versions; what is shown, and a console without errors. In CI (CI set) a machine without
the browser fails instead of skipping."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from eventckpt.serve import serving

from .browser import chromium, console_errors, demo_store, missing, screenshots


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """(a Chromium driver, the viewer's URL) on the demo store."""
    lacking = missing()
    if lacking:
        message = f"browser tests need Debian's chromium and chromium-driver and selenium; missing: {', '.join(lacking)}"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI must run them: .ci/run installs them with apt-get)")
        pytest.skip(message + " (apt-get install chromium chromium-driver)")
    folder = tmp_path_factory.mktemp("browser")
    demo_store(folder / "agent.db")
    with serving(str(folder / "agent.db")) as server, chromium(folder / "profile") as driver:
        yield driver, server.url.rstrip("/")


def _by() -> Any:
    from selenium.webdriver.common.by import By

    return By


def _clean(driver: Any) -> None:
    assert console_errors(driver) == []


def _at(driver: Any, part: str) -> str:
    """The URL once the browser got to one holding `part` (navigation by a script or a form is not
    awaited by the click or key that started it)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 15).until(lambda d: part in d.current_url and
                                    d.execute_script("return document.readyState") == "complete")
    return driver.current_url


def _shown(driver: Any) -> str:
    """The first text a watched element showed after it was watched (see the copy button's test)."""
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 15).until(lambda d: d.execute_script("return window.shown[0]"))


def test_from_streams_to_a_version_and_around(viewer: tuple[Any, str]) -> None:
    """Click a stream, then a version; expand the tree; pin a path and see its history; move with j/k and
    the arrow keys (the pin follows); compare two versions picked on the timeline and across a fork."""
    from selenium.webdriver.common.keys import Keys

    driver, base = viewer
    by = _by()
    driver.get(base + "/streams")
    assert driver.title.startswith("Streams")
    lanes = driver.find_elements(by.CSS_SELECTOR, "svg.forks g.lane-top")
    assert [lane.get_attribute("data-stream") for lane in lanes] == ["demo", "demo-retry", "demo-retry-trains", "demo-cheaper"]
    _clean(driver)

    driver.find_element(by.LINK_TEXT, "demo").click()
    assert driver.current_url == base + "/s/demo"
    assert driver.find_element(by.CSS_SELECTOR, "h1").text.endswith("demo")
    assert len(driver.find_elements(by.CSS_SELECTOR, "svg.plot.bytes rect.bar")) == 10
    _clean(driver)

    driver.find_element(by.LINK_TEXT, "v7").click()
    assert driver.current_url == base + "/s/demo/v/7"
    assert "before tool call" in driver.find_element(by.CSS_SELECTOR, "h1").text
    first = driver.find_element(by.CSS_SELECTOR, "li.branch-node details details")
    content = first.find_element(by.XPATH, ".//li[span[@class='key' and text()='content']]/code")
    assert not content.is_displayed()
    first.find_element(by.TAG_NAME, "summary").click()  # expand messages[0]
    assert content.is_displayed() and content.text == '"Find the cheapest flight to Lisbon."'
    driver.find_element(by.CSS_SELECTOR, "button[data-tree='open']").click()
    assert all(d.get_attribute("open") is not None for d in driver.find_elements(by.CSS_SELECTOR, "section.state details"))
    _clean(driver)

    leaf = driver.find_element(by.CSS_SELECTOR, "li.leaf[data-path='$.scratch.best_fare']")
    leaf.find_element(by.CSS_SELECTOR, "a.pin").click()
    _at(driver, "/s/demo/v/7?pin=%24.scratch.best_fare")
    pinned = driver.find_element(by.ID, "pinned")
    assert "$.scratch.best_fare" in pinned.text and "at v7: 102" in pinned.text
    assert [a.text for a in pinned.find_elements(by.CSS_SELECTOR, "td.num a")] == ["v7", "v4"]
    _clean(driver)

    body = driver.find_element(by.TAG_NAME, "body")
    body.send_keys("j")  # previous version; the pin stays
    _at(driver, "/s/demo/v/6?pin=%24.scratch.best_fare")
    assert "at v6: 111" in driver.find_element(by.ID, "pinned").text
    driver.find_element(by.TAG_NAME, "body").send_keys("k")
    _at(driver, "/s/demo/v/7?pin=%24.scratch.best_fare")
    driver.find_element(by.TAG_NAME, "body").send_keys("k")
    _at(driver, "/s/demo/v/8?pin=%24.scratch.best_fare")
    assert "at v8: 102" in driver.find_element(by.ID, "pinned").text
    driver.find_element(by.TAG_NAME, "body").send_keys(Keys.ARROW_LEFT)
    _at(driver, "/s/demo/v/7?pin=%24.scratch.best_fare")
    driver.find_element(by.TAG_NAME, "body").send_keys(Keys.ARROW_RIGHT)
    _at(driver, "/s/demo/v/8?pin=%24.scratch.best_fare")
    _clean(driver)

    driver.get(base + "/s/demo")
    driver.find_element(by.CSS_SELECTOR, "input[name='a'][value='demo@3']").click()
    driver.find_element(by.CSS_SELECTOR, "input[name='b'][value='demo@7']").click()
    driver.find_element(by.CSS_SELECTOR, "form.compare button[type='submit']").click()
    _at(driver, "/diff?")
    assert parse_qs(urlsplit(driver.current_url).query) == {"a": ["demo@3"], "b": ["demo@7"]}
    rows = {r.find_elements(by.TAG_NAME, "td")[1].text: r.get_attribute("class")
            for r in driver.find_elements(by.CSS_SELECTOR, "table.changes tbody tr")}
    assert rows["$.scratch.best_fare"] == "added" and rows["$.scratch.searches"] == "changed" and rows["$.messages[3]"] == "added"
    form_b = driver.find_element(by.CSS_SELECTOR, "form.refs input[name='b']")
    form_b.clear()
    form_b.send_keys("demo-retry@4", Keys.ENTER)
    _at(driver, "demo-retry%404")
    assert "demo-retry" in driver.find_element(by.CSS_SELECTOR, "section.diff h2").text
    assert "$.plan[0]" in driver.find_element(by.CSS_SELECTOR, "table.changes").text
    _clean(driver)


def test_fork_graph_links_and_copy_buttons(viewer: tuple[Any, str]) -> None:
    """The fork graph's names and points open streams and versions; a copy button copies (or selects) the
    command without a console error."""
    driver, base = viewer
    by = _by()
    driver.get(base + "/streams")
    driver.find_element(by.CSS_SELECTOR, "g.lane-top[data-stream='demo-retry'] a.head-link circle").click()
    assert driver.current_url == base + "/s/demo-retry/v/4"
    copy = driver.find_element(by.CSS_SELECTOR, "button.copy[data-copy='cmd-fork']")
    # The button says "copied" once the clipboard's promise resolves, after the click returned, and says
    # "copy" again 1.5 s later: every text it shows is recorded from the click on, and the first one read.
    driver.execute_script("const button = arguments[0]; window.shown = [];"
                          "new MutationObserver(() => window.shown.push(button.textContent))"
                          ".observe(button, {childList: true, characterData: true, subtree: true});", copy)
    copy.click()
    assert _shown(driver) in ("copied", "selected")
    assert "eventckpt fork" in driver.find_element(by.ID, "cmd-fork").text
    driver.get(base + "/streams")
    driver.find_element(by.CSS_SELECTOR, "g.lane-top[data-stream='demo-cheaper'] a.name-link text").click()
    assert driver.current_url == base + "/s/demo-cheaper"
    driver.get(base + "/s/nope")  # a 404 page is a page, not a console error of ours
    assert "no stream named" in driver.find_element(by.CSS_SELECTOR, ".message").text
    errors = [e for e in console_errors(driver) if "/s/nope" not in e["message"]]
    assert errors == []


def test_screenshots(viewer: tuple[Any, str], tmp_path: Path) -> None:
    """The screenshots of the version page and of the fork graph (docs/img's, made by the same code) are
    PNGs of a drawn page."""
    driver, base = viewer
    for path in screenshots(driver, base, tmp_path).values():
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    _clean(driver)


def test_streams_named_dots_open_in_a_browser(viewer: tuple[Any, str], tmp_path: Path) -> None:
    """The links of streams named '.' and '..' (dot segments to a browser, even escaped) reach their
    streams and versions, and so do those of names holding '/', '%', '!' or other scripts."""
    import eventckpt

    driver, _ = viewer
    by = _by()
    names = (".", "..", "...", "a/b", "100%", "!.", "%2E", "ünï")
    with eventckpt.open(tmp_path / "dots.db") as store:
        for name in names:
            store.stream(name).save({"name": name})
    with serving(str(tmp_path / "dots.db")) as server:
        driver.get(server.url + "streams")
        links = {a.text: a.get_attribute("href") for a in driver.find_elements(by.CSS_SELECTOR, "a.stream-link")}
        assert set(links) == set(names)
        for name, href in links.items():
            driver.get(href)
            assert driver.current_url == href and driver.find_element(by.TAG_NAME, "h1").text.endswith(name), name
            driver.find_element(by.LINK_TEXT, "v1").click()
            assert driver.find_element(by.CSS_SELECTOR, "li.leaf code").text == f'"{name}"'
        _clean(driver)
