"""`trajkit.report.report`: its sources, its arguments, and what the page holds."""

from __future__ import annotations

import base64
import re
import struct
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.figure import Figure

import trajkit
from trajkit.dataset import Dataset
from trajkit.report import _collect, _figures, report
from trajkit.report._collect import Collection
from trajkit.report._figures import Picture
from trajkit.report._lint import Findings
from trajkit.report._page import SECTIONS
from trajkit.report._sources import Inputs
from trajkit.testing import example_rollout


def _save(folder: Path, count: int = 3, **kw: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        r = example_rollout(num_steps=32, num_envs=2, truncation=True, seed=i, **kw)  # type: ignore[arg-type]
        trajkit.save(r, folder / f"r{i}.npz")
    return folder


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    return _save(tmp_path / "runs")


@pytest.fixture(autouse=True)
def undrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Figures built but not drawn: drawing is most of a small report's time.

    The figures are drawn by the tests of the page in a browser (`test_browser.py`), and by
    `test_figures_are_drawn` here.
    """

    def picture(figure: Figure, alt: str) -> Picture:
        width, height = figure.get_size_inches()
        return Picture("data:image/png;base64,", round(width * 100), round(height * 100), alt)

    monkeypatch.setattr(_figures, "_picture", picture)


class _Page(HTMLParser):
    """What a page holds: its headings in order, its images and every URL it names."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.headings: list[tuple[int, str]] = []
        self.images: list[dict[str, str | None]] = []
        self.urls: list[str] = []
        self.ids: list[str] = []
        self._heading: int | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = int(tag[1])
            self.headings.append((self._heading, ""))
        if tag == "img":
            self.images.append(named)
        for key in ("src", "href"):
            if named.get(key):
                self.urls.append(str(named[key]))
        if named.get("id"):
            self.ids.append(str(named["id"]))

    def handle_endtag(self, tag: str) -> None:
        if re.fullmatch(r"h[1-6]", tag):
            self._heading = None

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            level, text = self.headings[-1]
            self.headings[-1] = (level, text + data)


def test_the_page_has_every_section(runs: Path) -> None:
    page = _Page(report(runs, jobs=1))
    assert [text for level, text in page.headings if level == 2] == [name for _, name in SECTIONS]
    assert [level for level, _ in page.headings].count(1) == 1
    assert {key for key, _ in SECTIONS} <= set(page.ids)
    assert page.images
    assert all(image["alt"] for image in page.images)
    assert all(str(image["src"]).startswith("data:image/png;base64,") for image in page.images)


def test_written_whole_and_the_same_as_returned(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    out.write_text("old")
    page = report(runs, out, jobs=1)
    assert out.read_text(encoding="utf-8") == page
    assert not list(tmp_path.glob(".trajkit-*"))


def test_links_to_files_are_relative_to_the_page(runs: Path, tmp_path: Path) -> None:
    (runs / "r1.npz").write_bytes(b"damaged")
    (tmp_path / "pages").mkdir()
    page = _Page(report(runs, tmp_path / "pages" / "report.html", jobs=1))
    assert "../runs/r1.npz" in page.urls
    absolute = _Page(report(runs, jobs=1))
    assert (runs / "r1.npz").as_uri() in absolute.urls


def test_an_output_that_is_an_input_is_refused_before_reading(runs: Path) -> None:
    target = runs / "r0.npz"
    before = target.read_bytes()
    with pytest.raises(ValueError, match="is one of the inputs"):
        report([str(runs), str(target)], target, jobs=1)
    with pytest.raises(IsADirectoryError):
        report(runs, runs, jobs=1)
    assert target.read_bytes() == before


def test_invalid_and_missing_files_are_on_the_page(runs: Path, tmp_path: Path) -> None:
    (runs / "r2.npz").write_bytes(b"damaged")
    page = report([runs, tmp_path / "missing.npz"], jobs=1)
    assert "no such file or directory" in page
    assert "damaged or not a ZIP archive" in page
    assert "Needs attention: 2 invalid files" in page
    assert "TK001" in page


def test_the_title_arrives(runs: Path) -> None:
    page = report(runs, jobs=1, title="Fleet <7>")
    assert "<h1>Fleet &lt;7&gt;</h1>" in page
    assert "<title>Fleet &lt;7&gt;</title>" in page


def test_select_and_ignore_arrive(runs: Path) -> None:
    (runs / "r3.npz").write_bytes((runs / "r0.npz").read_bytes())
    assert 'id="TK203"' in report(runs, jobs=1)
    assert 'id="TK203"' in report(runs, jobs=1, select=["TK2"])
    assert 'id="TK203"' not in report(runs, jobs=1, select=["TK1"])
    assert 'id="TK203"' not in report(runs, jobs=1, ignore=["TK203"])
    with pytest.raises(ValueError, match="TK999"):
        report(runs, jobs=1, select=["TK999"])


def test_max_episode_steps_arrives(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    r = example_rollout(num_steps=20, num_envs=1, done_prob=0.0)
    dones = np.zeros((21, 1))
    dones[0] = 1  # one episode, 20 steps and going on
    trajkit.save(r.replace(dones=dones), folder / "a.npz")
    assert 'id="TK105"' not in report(folder, jobs=1)
    assert 'id="TK105"' in report(folder, jobs=1, max_episode_steps=10)
    with pytest.raises(ValueError, match="max_episode_steps"):
        report(folder, jobs=1, max_episode_steps=0)


def test_max_bytes_arrives(runs: Path) -> None:
    assert "over the limit of 100 bytes" in report(runs, jobs=1, max_bytes=100)


def test_seed_arrives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import trajkit.report

    folder = _save(tmp_path / "runs", count=6)
    monkeypatch.setattr(_collect, "REWARD_SAMPLE", 3)
    collect = _collect.collect
    seen: dict[int, list[list[float]]] = {0: [], 1: []}

    def spy(inputs: Inputs, options: Any, **kw: Any) -> tuple[Collection, Findings]:
        c, found = collect(inputs, options, **kw)
        assert c.rewards is not None
        seen[kw["seed"]].append(c.rewards.values.tolist())
        return c, found

    monkeypatch.setattr(trajkit.report, "collect", spy)
    for seed in (0, 0, 1):
        report(folder, jobs=1, seed=seed)
    assert seen[0][0] == seen[0][1] != seen[1][0]


def test_figures_are_drawn(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()
    page = _Page(report(runs, jobs=1))
    for image in page.images:
        data = base64.b64decode(str(image["src"]).removeprefix("data:image/png;base64,"))
        assert data.startswith(b"\x89PNG\r\n\x1a\n")
        assert struct.unpack(">II", data[16:24]) == (
            2 * int(str(image["width"])),
            2 * int(str(image["height"])),
        )


def test_progress_arrives(runs: Path) -> None:
    seen: list[str] = []
    report(runs, jobs=1, progress=seen.append)
    assert seen == [str(p) for p in sorted(runs.glob("*.npz"))]


def test_a_generator_of_paths_is_read_once(runs: Path, tmp_path: Path) -> None:
    def paths() -> Iterator[str]:
        yield from (str(p) for p in sorted(runs.glob("*.npz")))

    page = report(paths(), tmp_path / "out.html", jobs=1)
    assert "All 3 files are valid" in page


def test_a_source_of_another_kind_is_refused() -> None:
    with pytest.raises(TypeError, match="source must be a path"):
        report(42, jobs=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"must be a str or os\.PathLike"):
        report([42], jobs=1)  # type: ignore[list-item]


def test_a_dataset_checks_its_spec(tmp_path: Path) -> None:
    rollouts = [example_rollout(num_steps=8, seed=s) for s in range(2)]
    dataset = Dataset.write(tmp_path / "ds", rollouts)
    assert "All 2 files are valid" in report(dataset, jobs=1)
    trajkit.save(example_rollout(num_steps=8, obs_shape=(3,)), tmp_path / "ds" / "z.npz")
    page = report(Dataset.open(tmp_path / "ds"), jobs=1)
    assert "1 invalid file" in page
    assert "conformance to the dataset&#x27;s spec" in page


def test_a_parquet_file(tmp_path: Path, runs: Path) -> None:
    arrow = pytest.importorskip("trajkit.arrow")
    rollouts = [trajkit.load(p) for p in sorted(runs.glob("*.npz"))]
    arrow.write_parquet(rollouts, tmp_path / "runs.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not really")
    page = report(
        [tmp_path / "runs.parquet", tmp_path / "bad.parquet"], tmp_path / "p.html", jobs=1
    )
    assert f"{tmp_path / 'runs.parquet'} (rollout 2)" in page
    assert "trajkit-report-" not in page  # the temporary files are never named
    assert "not readable as a trajkit Parquet file" in page
    assert "3 of 4 files are valid" in page
    assert 'href="runs.parquet"' in page  # a rollout's link opens its Parquet file


def test_a_minari_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    minari_module = pytest.importorskip("trajkit.minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    r = example_rollout(num_steps=24, num_envs=2, keys={"actions"}, truncation=True)
    dataset = minari_module.to_minari([r], "trajkit/report-v0")
    by_id = report("minari:trajkit/report-v0", jobs=1)
    by_object = report(dataset, jobs=1)
    for page in (by_id, by_object):
        assert "minari:trajkit/report-v0 (episode 0)" in page
        assert "Minari dataset" in page
        assert "trajkit/report-v0" in page
        assert "trajkit-report-" not in page
    missing = report("minari:trajkit/missing-v0", jobs=1)
    assert "not readable as a Minari dataset" in missing


def test_values_are_escaped(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    recording = {
        "id": "r",
        "index": 0,
        "env_id": "<script>alert(1)</script>",
        "num_envs": 2,
        "autoreset_mode": "NEXT_STEP",
    }
    trajkit.save(example_rollout(), folder / "<b>.npz", recording=recording)
    page = report(folder, jobs=1)
    assert "<script>" not in page
    assert "<b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;.npz" in page


def test_a_file_name_that_is_not_utf8(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    name = b"r\xff.npz".decode("utf-8", "surrogateescape")
    trajkit.save(example_rollout(), folder / name)
    out = tmp_path / "out.html"
    page = report(folder, out, jobs=1)
    assert "r\\xff.npz" in page
    out.read_bytes().decode("utf-8")  # the page is valid UTF-8


def test_image_observations_show_frames(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    r = example_rollout(num_steps=40, num_envs=2, nested=True, obs_shape=(16, 16, 3))
    trajkit.save(r, folder / "a.npz")
    page = _Page(report(folder, jobs=1))
    frames = [i for i in page.images if str(i["alt"]).startswith("obses['image'] at step")]
    traces = [i for i in page.images if str(i["alt"]).startswith("Traces")]
    assert len(traces) == 3  # the best, median and worst episodes
    for title in ("best", "median", "worst"):
        shown = [i for i in frames if f"of the {title} return episode" in str(i["alt"])]
        assert 1 <= len(shown) <= 8  # at most eight frames each (fewer in a short episode)
    assert str(frames[0]["alt"]).startswith("obses['image'] at step 0 of the best return episode")
    assert (frames[0]["width"], frames[0]["height"]) == ("16", "16")


def test_without_matplotlib_nothing_is_read(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    seen: list[str] = []
    with pytest.raises(ImportError, match=r"pip install 'trajkit\[plot\]'"):
        report(runs, jobs=1, progress=seen.append)
    assert seen == []
