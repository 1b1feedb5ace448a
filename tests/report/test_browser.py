"""Reports of recorded CartPole datasets, rendered by Chromium from disk, offline.

Three datasets (`tests/report/datasets.py`): CartPole's vector observations, its rendered
frames (image observations), and a recording with bugs that validate and lint find. Each
page must show every section, load nothing but itself (every request outside `file:` and
`data:` is blocked and fails the test), log no error (a Content-Security-Policy violation
would), and pass an accessibility check of its headings (one h1, no level skipped) and of its
images (alt text on every one, each a decodable picture).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import launch
from tests.report import datasets
from trajkit.report import report
from trajkit.report._page import SECTIONS

pytest.importorskip("gymnasium", reason="the datasets are recorded from Gymnasium's CartPole")


def _pixels(folder: Path) -> Path:
    pytest.importorskip("pygame", reason="rendering CartPole's frames needs pygame")
    return datasets.cartpole_pixels(folder, files=1, steps=96)


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "cartpole": lambda folder: datasets.cartpole(folder, files=2, steps=256, envs=2),
    "pixels": _pixels,
    "flawed": datasets.flawed,
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def page_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(request.param)
    folder = BUILDERS[request.param](root / "data")
    out = root / "report.html"
    report(folder, out, jobs=1, title=f"{request.param} report")
    return out


def _open(browser: Any, path: Path, width: int = 1280) -> tuple[Any, list[str], list[str]]:
    """The page, the URLs it requested outside `file:` and `data:`, and its console errors."""
    context = browser.new_context(viewport={"width": width, "height": 900}, offline=True)
    outside: list[str] = []
    errors: list[str] = []

    def route(request_route: Any) -> None:
        url = request_route.request.url
        if url.startswith(("file:", "data:")):
            request_route.continue_()
        else:
            outside.append(url)
            request_route.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on(
        "request",
        lambda request: (
            None if request.url.startswith(("file:", "data:")) else outside.append(request.url)
        ),
    )
    page.on(
        "console", lambda message: errors.append(message.text) if message.type == "error" else None
    )
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, outside, errors


def test_every_section_is_shown_and_nothing_is_fetched(browser: Any, page_file: Path) -> None:
    page, outside, errors = _open(browser, page_file)
    for key, name in SECTIONS:
        heading = page.locator(f"#{key} > h2")
        assert heading.is_visible(), key
        assert heading.inner_text() == name
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # every image in view once
    assert outside == []
    assert errors == []
    page.context.close()


def test_headings_and_images_are_accessible(browser: Any, page_file: Path) -> None:
    page, _, _ = _open(browser, page_file)
    levels = page.evaluate(
        "[...document.querySelectorAll('h1,h2,h3,h4,h5,h6')].map(h => Number(h.tagName[1]))"
    )
    assert levels.count(1) == 1
    assert levels[0] == 1
    skips = [(a, b) for a, b in itertools.pairwise(levels) if b > a + 1]
    assert skips == [], "a heading level is skipped"
    images = page.evaluate(
        "[...document.images].map(i => [i.alt.trim(), i.complete && i.naturalWidth > 0])"
    )
    assert images
    assert all(alt for alt, _ in images), "an image has no alt text"
    assert all(drawn for _, drawn in images), "an image cannot be decoded"
    assert page.evaluate("document.documentElement.lang") == "en"
    page.context.close()


@pytest.mark.parametrize("width", [1280, 420])
def test_the_page_fits_the_window(browser: Any, page_file: Path, width: int) -> None:
    page, _, _ = _open(browser, page_file, width=width)
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0
    page.context.close()


def test_what_each_dataset_shows(browser: Any, page_file: Path) -> None:
    page, _, _ = _open(browser, page_file)
    text = page.inner_text("body")
    name = page_file.parent.name.rstrip("0123456789")
    if name == "flawed":
        assert "Needs attention: 1 invalid file, 2 lint errors, 2 lint warnings." in text
        row = page.locator("#TK106 + p + div tr", has_text="rollout-001.npz")
        assert row.locator("td").all_inner_texts()[1:3] == ["1", "7"]
        href = row.locator("a").get_attribute("href")
        assert href == "data/rollout-001.npz"
        assert (page_file.parent / href).is_file()
        assert page.locator("#TK203").is_visible()
        assert "damaged or not a ZIP archive" in page.inner_text("#checks")
    else:
        files = page.locator("#checks p").first.inner_text()
        assert files.endswith(("2 of 2 files are valid.", "1 of 1 files are valid."))
        assert "CartPole-v1" in page.inner_text("#schema")
        alts = page.evaluate("[...document.images].map(i => i.alt)")
        assert any(alt.startswith("Traces over the") for alt in alts)
        if name == "pixels":
            assert any(alt.startswith("obses['image'] at step 0 of the best") for alt in alts)
            assert "(100, 300, 3)" in page.inner_text("#schema")
    page.context.close()
