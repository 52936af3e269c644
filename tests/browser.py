"""A real Chromium driven through the viewer, shared by tests/test_serve_browser.py and the screenshots
in docs/img (regenerate them with `python -m tests.browser docs/img`).

Debian's chromium and chromium-driver are used as installed (/usr/bin): Selenium is given both paths, so
its manager never downloads a browser or a driver.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars", "--force-color-profile=srgb",
         "--window-size=1400,1000")


def missing() -> list[str]:
    """What the browser tests need and this machine lacks."""
    out = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        out.append("the selenium package")
    return out


@contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless Chromium with a fresh profile, logging the console."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        driver.set_window_size(1400, 1000)
        yield driver
    finally:
        driver.quit()


def demo_store(path: Path) -> None:
    """The demo store (`eventckpt demo`), plus two forks made with the CLI so the graph has four lanes."""
    from eventckpt.cli import main

    for args in (["demo", str(path)], ["fork", str(path), "demo@6", "--name", "demo-cheaper"],
                 ["fork", str(path), "demo-retry@4", "--name", "demo-retry-trains"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """The browser console's errors since the last call (the log is drained by reading it)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "ERROR")]


def screenshots(driver: Any, base: str, folder: Path) -> dict[str, Path]:
    """The version page (tree expanded, a path pinned) and the streams page's fork graph, as PNGs."""
    from selenium.webdriver.common.by import By

    folder.mkdir(parents=True, exist_ok=True)
    out = {"version": folder / "viewer-version.png", "forks": folder / "viewer-forks.png"}
    driver.get(base.rstrip("/") + "/s/demo/v/7?pin=scratch.best_fare")
    driver.find_element(By.CSS_SELECTOR, "li.branch-node details details summary").click()  # open messages[0]
    driver.save_screenshot(str(out["version"]))
    driver.get(base.rstrip("/") + "/streams")
    driver.find_element(By.CSS_SELECTOR, "main").screenshot(str(out["forks"]))
    return out


def main(folder: str) -> None:
    """Write docs/img's screenshots from a fresh demo store."""
    from eventckpt.serve import serving

    work = Path(tempfile.mkdtemp(prefix="eventckpt-shots-"))
    target, here = Path(folder).resolve(), os.getcwd()
    try:
        os.chdir(work)  # the page's commands name the store as a user would: agent.db
        demo_store(Path("agent.db"))
        with serving("agent.db") as server, chromium(work / "profile") as driver:
            for name, path in screenshots(driver, server.url, target).items():
                print(f"{name}: {path}")
    finally:
        os.chdir(here)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/img")
