"""Take the screenshots of `docs/report.md`: three reports, in Chromium, from disk.

Run from the repository root (needs gymnasium, pygame, Playwright and Debian's Chromium):

    PYTHONPATH=src python -m tests.report.screenshots docs/images

It records the datasets of `tests/report/datasets.py` into a temporary folder, writes their
reports and saves `report-cartpole.png` (the top of the page), `report-distributions.png`,
`report-pixels.png` (the best episode's frames) and `report-lint.png` (validation and lint
of the recording with bugs). Look at them before committing them.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from tests.browser import BROWSER_ARGS, CHROMIUM
from tests.report import datasets
from trajkit.report import report

WIDTH = 1100


def _page(browser: Any, path: Path) -> Any:
    page = browser.new_page(viewport={"width": WIDTH, "height": 900}, device_scale_factor=1)
    page.goto(path.as_uri())
    return page


def _section(page: Any, selector: str, out: Path, height: int) -> None:
    """A screenshot of `height` pixels of the page, from the top of `selector`."""
    box = page.locator(selector).first.bounding_box()
    page.screenshot(
        path=out,
        full_page=True,
        clip={"x": 0, "y": max(0, box["y"] - 12), "width": WIDTH, "height": height},
    )


def main(folder: str) -> None:
    from playwright.sync_api import sync_playwright

    images = Path(folder)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        made = {}
        for name, build in (
            ("cartpole", lambda f: datasets.cartpole(f, files=8, steps=512, envs=4)),
            ("pixels", lambda f: datasets.cartpole_pixels(f, files=2, steps=128)),
            ("flawed", datasets.flawed),
        ):
            data = build(root / name)
            made[name] = root / f"{name}.html"
            report(data, made[name], jobs=1, title=f"CartPole-v1: {name}")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            page = _page(browser, made["cartpole"])
            _section(page, "header", images / "report-cartpole.png", 900)
            _section(page, "#distributions", images / "report-distributions.png", 900)
            page = _page(browser, made["pixels"])
            _section(page, "#episodes h3", images / "report-pixels.png", 760)
            page = _page(browser, made["flawed"])
            _section(page, "#checks", images / "report-lint.png", 1000)
            browser.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/images")
