"""A check that raises (a bug in lint) is reported with its file, and the run goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import trajkit
import trajkit.lint
from tests.mutation_report import UNDER_MUTMUT
from trajkit.lint import crossfile, run
from trajkit.lint.checks import check_rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import Finding, failed
from trajkit.lint.run import FileResult, LintFold, LintRun, lint_file
from trajkit.report._lint import LintFold as ReportFold
from trajkit.testing import example_rollout

SPACE = {"type": "Discrete", "n": 1, "start": 0}  # every action but 0 is outside: TK106


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Three files, each with actions outside `SPACE` (TK106) and its own arrays."""
    for i, name in enumerate("abc"):
        trajkit.save(example_rollout(num_steps=8, seed=i), tmp_path / f"{name}.npz")
    return tmp_path


def raising_on(path_end: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`check_rollout` (the checks of one file) raises on the file whose path ends so."""

    def check(rollout: Any, options: Any, *, path: str | None = None, **kw: Any) -> Any:
        if path is not None and path.endswith(path_end):
            raise RuntimeError("a bug")
        return check_rollout(rollout, options, path=path, **kw)

    monkeypatch.setattr(run, "check_rollout", check)


def test_a_check_that_raises_on_a_file_leaves_the_other_files_linted(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raising_on("b.npz", monkeypatch)
    linted = LintRun([str(folder)], LintOptions(frozenset({"TK106"}), action_space=SPACE), jobs=1)
    found = [Path(f.path or "").name for f in linted]
    assert found == ["a.npz", "c.npz"]
    assert linted.files == 3
    [failure] = linted.failures
    assert failure.startswith(f"{folder / 'b.npz'}: RuntimeError: a bug (at ")
    assert "in check)" in failure


def test_the_file_a_check_failed_on_keeps_its_recording_for_replay(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raising_on("a.npz", monkeypatch)
    result = lint_file(str(folder / "a.npz"), options=LintOptions(frozenset()), max_bytes=None)
    assert result.readable
    assert result.failure is not None
    assert result.findings == ()
    fold = LintFold(LintOptions(frozenset()))
    assert fold.add(result) == []
    assert fold.failures == [result.failure]
    assert fold.recordings == [(str(folder / "a.npz"), None)]


def test_a_check_across_files_that_raises_leaves_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: object) -> list[Finding]:
        raise ValueError("bad fold")

    monkeypatch.setattr(crossfile.CrossFileChecks, "_constant", broken)
    options = LintOptions(frozenset({"TK201", "TK203"}))
    fold = LintFold(options)
    r = example_rollout(num_steps=8)
    found = [*fold.add(run.lint_rollout(r, "a.npz", None, options))]
    found += fold.add(run.lint_rollout(r.copy(), "b.npz", None, options))
    found += fold.finish()
    assert [f.code for f in found] == ["TK203"]
    [failure] = fold.failures
    assert failure.startswith("the checks across files: ValueError: bad fold (at ")


def test_a_failure_while_folding_a_file_names_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object, summary: object) -> list[Finding]:
        raise KeyError("k")

    monkeypatch.setattr(crossfile.CrossFileChecks, "add", broken)
    options = LintOptions(frozenset({"TK203"}))
    fold = LintFold(options)
    assert fold.add(run.lint_rollout(example_rollout(), "a.npz", None, options)) == []
    assert fold.failures[0].startswith("a.npz: KeyError: 'k' (at ")
    assert fold.recordings == [("a.npz", None)]


def test_the_report_counts_the_failures_of_lints_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object) -> list[Finding]:
        raise ValueError("bad fold")

    monkeypatch.setattr(crossfile.CrossFileChecks, "finish", broken)
    options = LintOptions(frozenset({"TK203"}))
    fold = ReportFold(options)
    fold.add(run.lint_rollout(example_rollout(), "a.npz", None, options))
    fold.add(None, "b.npz: RuntimeError: a bug")
    findings = fold.finish()
    assert findings.failed == 2
    assert findings.failures[0] == "b.npz: RuntimeError: a bug"
    assert findings.failures[1].startswith("the checks across files: ValueError: bad fold")


def test_failed_names_the_error_and_where_it_was_raised() -> None:
    try:
        crossfile.summarize(None, "a.npz")  # type: ignore[arg-type]
    except AttributeError as exc:
        text = failed("a.npz", exc)
    assert text.startswith("a.npz: AttributeError: ")
    assert "(at trajkit/" in text
    if not UNDER_MUTMUT:  # its trampoline renames the function the error was raised in
        assert "in summarize)" in text
    assert FileResult("a.npz", (), None, None).failure is None


def test_a_replay_that_raises_leaves_the_other_recordings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("gymnasium")
    from trajkit.lint import replay

    def group(files: list[tuple[str, Any]], *args: Any) -> Any:
        if files[0][1]["id"] == "a":
            raise ZeroDivisionError("a bug")
        yield Finding("TK300", "replayed", files[0][0])

    monkeypatch.setattr(replay, "_replay_group", group)
    r = example_rollout(num_steps=4, num_envs=1)
    for rid in "ab":
        recording = {"id": rid, "index": 0, "num_envs": 1, "autoreset_mode": "NEXT_STEP"}
        trajkit.save(r, tmp_path / f"{rid}.npz", recording=recording)
    linted = LintRun([str(tmp_path)], LintOptions(frozenset({"TK300"})), replay=True, jobs=1)
    assert [Path(f.path or "").name for f in linted] == ["b.npz"]
    [failure] = linted.failures
    assert failure.startswith("the replay of recording a: ZeroDivisionError: a bug (at ")
    with pytest.raises(ZeroDivisionError):  # without a list to report it in, it propagates
        list(
            replay.replay_recordings(
                [(str(tmp_path / "a.npz"), {"id": "a", "index": 0})],
                LintOptions(frozenset({"TK300"})),
            )
        )


def test_lint_warns_of_a_check_that_raised_and_returns_the_other_findings(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raising_on("b.npz", monkeypatch)
    with pytest.warns(RuntimeWarning, match=r"a check failed \(please report it\): .*b\.npz"):
        found = trajkit.lint.lint(folder, select=["TK106"], action_space=SPACE, jobs=1)
    assert [Path(f.path or "").name for f in found] == ["a.npz", "c.npz"]
