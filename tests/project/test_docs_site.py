"""The built docs site, in a real browser: opened from disk and served, navigation and search.

The site is built once (`mkdocs build --strict` into a temporary folder). The browser is
Debian's Chromium driven by Playwright; `.ci/run` installs it, and without it these tests skip
saying so. Nothing here touches the network: a request for anything but the site fails a test.
"""

from __future__ import annotations

# ruff: noqa: RUF001 - Greek letters in the expected search text
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from tests.browser import launch
from tests.project.helpers import load_hook

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (it comes with the docs extra)")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run(
        [Path(sys.executable).parent / "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return out


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.targets: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = {"a": "href", "link": "href", "script": "src", "img": "src"}
        for name, value in attrs:
            if name == names.get(tag) and value:
                self.targets.append((tag, value))


def test_every_link_opens_a_file_from_disk(site: Path) -> None:
    """Opened from disk, a link to a folder shows a directory listing: every link names a file."""
    # 404.html is for servers only: it links from the site's root, wherever it is shown.
    pages = sorted(p for p in site.rglob("*.html") if p.name != "404.html")
    assert len(pages) > 10
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        for tag, target in parser.targets:
            parts = urlsplit(target)
            if parts.scheme and tag == "a":  # a link away from the site, followed by choice
                continue
            assert not parts.scheme, f"{page.name} loads {target} from the web"
            if target.startswith("#"):
                continue
            resolved = (page.parent / unquote(parts.path)).resolve()
            where = f"{page.relative_to(site)} links to {target}"
            assert resolved.is_file(), where


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from launch()


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(params=["from disk", "served"])
def home(request: pytest.FixtureRequest, site: Path) -> str:
    if request.param == "from disk":
        return (site / "index.html").as_uri()
    base: str = request.getfixturevalue("served")
    return f"{base}/index.html"


def _open(browser: Any, url: str) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    outside: list[str] = []
    origin = url.rsplit("/", 1)[0]
    page.on(
        "request",
        lambda request: None if request.url.startswith(origin) else outside.append(request.url),
    )
    page.goto(url)
    return page, outside


def test_navigation_opens_pages(browser: Any, home: str) -> None:
    page, outside = _open(browser, home)
    page.get_by_role("link", name="Concepts").first.click()
    page.wait_for_url(re.compile(r"concepts\.html$"))
    assert page.locator("h1").first.inner_text().startswith("Concepts")
    page.locator(".md-nav--primary label", has_text="API reference").first.click()
    page.get_by_role("link", name="Models").first.click()
    page.wait_for_url(re.compile(r"reference/models\.html$"))
    assert page.locator("h1").first.inner_text().startswith("Models")
    assert outside == []
    page.close()


def test_search_finds_pages_and_opens_them(browser: Any, home: str) -> None:
    page, outside = _open(browser, home)
    query = page.locator("input.md-search__input")
    query.click()
    query.press_sequentially("truncated", delay=10)  # as typed: search reacts to keys
    results = page.locator(".md-search-result__item")
    results.first.wait_for(timeout=20_000)
    meta = page.locator(".md-search-result__meta").inner_text()
    assert re.match(r"\d+ matching documents?", meta), meta
    results.first.locator("a").first.click()
    page.wait_for_load_state()
    assert "truncat" in page.locator("article").inner_text().lower()
    assert outside == []
    page.close()


def test_search_previews_show_math_as_text(site: Path) -> None:
    index = (site / "search" / "search_index.json").read_text(encoding="utf-8")
    assert "\\\\(" not in index
    assert "\\\\gamma" not in index
    assert "δ_t = r_t + γ(1 - d_(t+1))V_(t+1) - V_t" in index
    assert (site / "search" / "search_index.js").read_text(encoding="utf-8").endswith(index.strip())


def test_the_math_hook_reads_tex_as_text() -> None:
    hook = load_hook("search_math")
    assert hook.math_as_text(
        r"(A - \operatorname{mean} A) / (\operatorname{std} A + \epsilon)"
    ) == ("(A - mean A) / (std A + ε)")
    assert hook.math_as_text(r"\gamma\,V_{\text{final}}\,(\gamma\lambda)^{t-k}") == (
        "γ V_(final) (γλ)^(t-k)"
    )
    assert hook.readable(r"where \(\gamma \in [0, 1]\) is") == "where γ ∈ [0, 1] is"
