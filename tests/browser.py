"""Chromium, headless, driven by Playwright: for the tests that look at pages in a browser.

The browser is Debian's Chromium (`apt-get install chromium`; `.ci/run` installs it) with a
fresh profile and no background networking; without Playwright or Chromium, `launch` skips
the test, saying which is missing.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch() -> Iterator[Any]:
    """A Playwright `Browser` on Chromium, for a fixture to yield from; skips without one."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (dev extra)"
    )
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"no Chromium at {CHROMIUM}: install Debian's chromium (.ci/run does)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield browser
        browser.close()
