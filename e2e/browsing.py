"""A real browser for the dashboard's tests: Debian's chromium, headless, via Selenium.

Nothing is downloaded: the browser and its driver are Debian's (``e2e/setup.sh``
installs ``chromium`` and ``chromium-driver``), the driver's path is given to
Selenium explicitly and ``SE_OFFLINE`` keeps Selenium Manager from looking for
another.  Screenshots go to :data:`ARTIFACTS` (``e2e/artifacts/dashboard/``, kept by
CI, ignored by git) under names the test chooses.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "e2e" / "artifacts" / "dashboard"
CHROMIUM = os.environ.get("AGENTCHAIN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("AGENTCHAIN_CHROMEDRIVER", "/usr/bin/chromedriver")
T = TypeVar("T")


def missing() -> str | None:
    """Why no browser can start here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).exists() or shutil.which(path)):
            return f"{path} is missing: run e2e/setup.sh (Debian's chromium, chromium-driver)"
    return None


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[WebDriver]:
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must never download a browser.
    options = Options()
    options.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # Root in CI containers; the pages are our own.
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: WebDriver, name: str, max_height: int = 2400) -> Path:
    """The whole page (up to ``max_height`` CSS pixels), not just the window."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height)}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True, "clip": {**clip, "scale": 1}},
    )
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def wait(driver: WebDriver, check: Callable[[WebDriver], T], timeout: float, what: str) -> T:
    """Poll ``check`` (stale elements count as not yet) until truthy."""

    def attempt(d: WebDriver) -> T | bool:
        try:
            return check(d)
        except (StaleElementReferenceException, WebDriverException):
            return False

    result: Any = WebDriverWait(driver, timeout, poll_frequency=0.2).until(attempt, what)
    return result  # type: ignore[no-any-return]


def fetch_status(driver: WebDriver, path: str) -> int:
    """The status the page's own ``fetch`` of ``path`` gets (same origin, its cookies)."""
    script = (
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'}).then(r => done(r.status))"
        ".catch(e => done(-1));"
    )
    return int(driver.execute_async_script(script, path))
