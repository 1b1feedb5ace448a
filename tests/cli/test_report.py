"""`trajkit report`: exit codes, output and summary, options that arrive; in-process and fresh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import trajkit
from tests.cli.helpers import run
from trajkit.report import Built, _figures
from trajkit.report._figures import Picture
from trajkit.testing import example_rollout


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(2):
        trajkit.save(example_rollout(num_steps=32, seed=i, truncation=True), folder / f"r{i}.npz")
    return folder


@pytest.fixture(autouse=True)
def undrawn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Figures built but not drawn (in this process): drawing is most of a report's time."""

    def picture(figure: object, alt: str) -> Picture:
        return Picture("data:image/png;base64,", 1, 1, alt)

    monkeypatch.setattr(_figures, "_picture", picture)


def test_a_valid_folder(capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    code, stdout, stderr = run(
        capsys, "report", str(runs), "-o", str(out), "--no-config", "-j", "1"
    )
    assert code == 0
    assert stdout == f"{out}\n"
    assert stderr == "2 files: 2 valid, 0 invalid. Lint: All checks passed (2 files).\n"
    assert "<h1>Dataset report: " in out.read_text(encoding="utf-8")


def test_an_invalid_file_is_exit_1_and_still_reported(
    capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path
) -> None:
    (runs / "r1.npz").write_bytes(b"damaged")
    out = tmp_path / "report.html"
    code, stdout, stderr = run(capsys, "report", str(runs), "--out", str(out), "-j", "1")
    assert code == 1
    assert stdout == f"{out}\n"
    assert stderr.startswith("2 files: 1 valid, 1 invalid. Lint: Found 1 finding (1 error)")
    assert "damaged or not a ZIP archive" in out.read_text(encoding="utf-8")


def test_a_lint_warning_is_exit_1(
    capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path
) -> None:
    (runs / "r2.npz").write_bytes((runs / "r0.npz").read_bytes())
    out = str(tmp_path / "report.html")
    assert run(capsys, "report", str(runs), "-o", out, "-j", "1", "--no-config")[0] == 1
    code, _, stderr = run(capsys, "report", str(runs), "-o", out, "-j", "1", "--ignore", "TK203")
    assert (code, stderr.endswith("All checks passed (3 files).\n")) == (0, True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--select", ","], "--select needs at least one code or prefix"),
        (["--ignore", " "], "--ignore needs at least one code or prefix"),
        (["--select", "TK999"], "TK999 matches no check"),
        (["--max-episode-steps", "0"], "--max-episode-steps must be >= 1, got 0"),
        (["--jobs", "0"], "0 jobs: use 1 to 4096"),
        (["--max-bytes", "lots"], "invalid size 'lots'"),
    ],
)
def test_usage_errors(
    capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "report.html"
    code, stdout, stderr = run(capsys, "report", str(runs), "-o", str(out), *args)
    assert (code, stdout) == (2, "")
    assert message in stderr
    assert not out.exists()


def test_an_out_that_is_an_input_or_a_folder(
    capsys: pytest.CaptureFixture[str], runs: Path
) -> None:
    target = runs / "r0.npz"
    before = target.read_bytes()
    code, _, stderr = run(capsys, "report", str(target), "-o", str(target))
    assert code == 2
    assert (
        stderr == f"trajkit report: error: {target} is one of the inputs: write to another path\n"
    )
    assert target.read_bytes() == before
    code, _, stderr = run(capsys, "report", str(runs), "-o", str(runs))
    assert code == 2
    assert stderr.startswith(
        f"trajkit report: error: cannot write {runs}: cannot write over a folder"
    )


def test_an_unwritable_out_is_exit_1(
    capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "missing" / "report.html"
    code, stdout, stderr = run(capsys, "report", str(runs), "-o", str(out), "-j", "1")
    assert (code, stdout) == (1, "")
    assert stderr.startswith("trajkit report: error: cannot write ")


def test_options_arrive(
    capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trajkit.report

    seen: dict[str, Any] = {}
    build = trajkit.report.build

    def spy(source: Any, **kw: Any) -> Built:
        seen.update(kw)
        return build(source, **kw)

    monkeypatch.setattr(trajkit.report, "build", spy)
    out = tmp_path / "pages" / "report.html"
    out.parent.mkdir()
    args = ["--title", "T", "--seed", "7", "-j", "1", "--max-bytes", "1MiB", "--select", "TK2"]
    run(capsys, "report", str(runs), "-o", str(out), "--max-episode-steps", "9", *args)
    options = seen["options"]
    assert (seen["title"], seen["seed"], seen["jobs"], seen["max_bytes"]) == ("T", 7, 1, 1 << 20)
    assert seen["folder"] == str(out.parent.resolve())
    assert options.max_episode_steps == 9
    assert sorted(options.codes) == ["TK201", "TK202", "TK203", "TK204"]


def test_progress(capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "report.html")
    _, _, quiet = run(capsys, "report", str(runs), "-o", out, "-j", "1", "--no-progress")
    _, _, shown = run(capsys, "report", str(runs), "-o", out, "-j", "1", "--progress")
    assert quiet.count("\n") == shown.count("\n") == 1
    assert len(shown) > len(quiet)  # the progress display was written, then cleared


def test_the_command_in_a_fresh_interpreter(runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "trajkit", "report", str(runs), "-o", str(out), "-j", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MPLBACKEND": "Agg"},
        check=False,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (0, f"{out}\n"), done.stderr
    assert "Traceback" not in done.stderr
    page = out.read_text(encoding="utf-8")
    assert page.count('<img src="data:image/png;base64,iVBOR') >= 4
    help_text = subprocess.run(
        [sys.executable, "-m", "trajkit", "report", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "usage: trajkit report [-h] -o FILE" in help_text


def test_a_bug_in_a_lint_check_is_exit_3_with_the_page_written(
    capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trajkit.report import _profile

    def broken(*args: object, **kw: object) -> None:
        raise ValueError("a check broke")

    monkeypatch.setattr(_profile, "lint_rollout", broken)
    out = tmp_path / "report.html"
    code, _, stderr = run(capsys, "report", str(runs), "-o", str(out), "-j", "1", "--no-config")
    assert code == 3
    assert stderr.endswith(
        f"a lint check failed (please report it): {runs / 'r1.npz'}: ValueError: a check broke\n"
    )
    page = out.read_text(encoding="utf-8")
    assert "Needs attention: lint failed on 2 files." in page


def test_without_matplotlib_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    code, stdout, stderr = run(capsys, "report", str(runs), "-o", str(tmp_path / "r.html"))
    assert (code, stdout) == (2, "")
    assert stderr == (
        "trajkit report: error: trajkit.report needs matplotlib; install it with: "
        "pip install 'trajkit[plot]'\n"
    )
