"""A real headless browser for the result-page tests: Debian's chromium + chromium-driver via selenium.

Nothing downloads a browser: the driver is started from the system's ``chromedriver``
(``apt-get install chromium chromium-driver``; ``.ci/run`` installs them).  Where the
browser, the driver or selenium is missing, :func:`start_browser` skips the test and says
which one and how to install it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_NAMES = ("chromedriver",)


def _which(names: tuple[str, ...], env: str) -> str | None:
    """The program named by environment variable ``env`` (when it is a file), else the first of
    ``names`` on ``PATH``; ``None`` when there is none (selenium is then never started, so it
    never tries to download a driver)."""
    if os.environ.get(env):
        return os.environ[env] if os.path.isfile(os.environ[env]) else None
    return next((p for p in map(shutil.which, names) if p), None)


class BrowserUnavailable(RuntimeError):
    """Chromium, chromedriver or selenium is missing or does not start (the message says which)."""


def launch(width: int = 1400, height: int = 900):
    """A headless Chromium WebDriver (the caller quits it).

    Raises:
        BrowserUnavailable: selenium, chromium or chromedriver is missing, or the browser
            does not start; the message says which and how to install it.
    """
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise BrowserUnavailable("selenium is not installed (pip install -e '.[dev]')") from None
    binary = _which(CHROMIUM_NAMES, "RAGEN_CHROMIUM")
    driver = _which(DRIVER_NAMES, "RAGEN_CHROMEDRIVER")
    if binary is None or driver is None:
        missing = " and ".join(
            n for n, p in (("chromium", binary), ("chromedriver", driver)) if p is None
        )
        raise BrowserUnavailable(
            f"{missing} not found (apt-get install -y chromium chromium-driver; .ci/run does this)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service(driver), options=options)
    except Exception as exc:  # a broken browser install: say why rather than fail the suite
        raise BrowserUnavailable(
            f"headless chromium did not start ({type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''})"
        ) from None


def start_browser(width: int = 1400, height: int = 900):
    """:func:`launch`, or ``pytest.skip`` with the printed reason where it cannot."""
    try:
        return launch(width, height)
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def browser() -> Iterator:
    """One headless Chromium per test module."""
    driver = start_browser()
    try:
        yield driver
    finally:
        driver.quit()


def file_url(path: Path) -> str:
    """The ``file://`` URL of a local page (pages must work without a server)."""
    return Path(path).resolve().as_uri()


def console_errors(driver) -> list[str]:
    """Severe messages on the browser console since the last call (script errors, CSP blocks)."""
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
