"""`trajkit.lint.lint` and `LintRun`, in process: every argument's arrival, every refusal's words.

These tests run in the test's own process (where mutation testing sees them): each setting of
`lint` reaches the checks or the engine, a file lint cannot read is TK001 in the words
`trajkit validate` uses, a file's recording reaches the checks that read it, and `close` stops
the workers.
"""

from __future__ import annotations

import inspect
import re
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
import trajkit.lint
from tests.lint.helpers import dones_for, rollout
from tests.mutation_report import UNDER_MUTMUT
from trajkit._io.discovery import Found
from trajkit._io.engine import run_ordered
from trajkit._io.filecheck import FileCheck, check_file
from trajkit._io.metadata import Recording
from trajkit._io.reader import load_with_metadata
from trajkit.lint import CHECKS, Finding, lint, run
from trajkit.lint.config import LintOptions
from trajkit.lint.join import EpisodeJoiner
from trajkit.lint.run import FileResult, LintFold, LintRun, lint_chunk, lint_file, lint_rollout
from trajkit.testing import example_rollout

SPACE = {"type": "Discrete", "n": 1, "start": 0}  # every action but 0 is outside: TK106
RECORDING = {"id": "a", "index": 0, "num_envs": 2, "autoreset_mode": "NEXT_STEP"}
LIMIT = (
    "the metadata declares 1000 bytes of array data (T=8, B=2), over the limit of 100 bytes; "
    "pass a larger max_bytes to load it"
)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    """One small valid file (1000 bytes of array data), recorded: `RECORDING`."""
    path = tmp_path / "a.npz"
    trajkit.save(example_rollout(num_steps=8, seed=1), path, recording=RECORDING)
    return path


@pytest.fixture
def url(saved: Path) -> Iterator[str]:
    """`saved`, copied to fsspec's in-memory file system: read through a local copy."""
    fsspec = pytest.importorskip("fsspec", reason="URLs need fsspec (trajkit[cloud])")
    name = f"memory://wiring-{uuid.uuid4().hex}/a.npz"
    with fsspec.open(name, "wb") as out:
        out.write(saved.read_bytes())
    yield name
    fsspec.filesystem("memory").rm(name.removeprefix("memory://"))


# --- the size limit and the files lint cannot read ----------------------------------------


def test_max_bytes_reaches_the_load(saved: Path) -> None:
    assert lint(saved, max_bytes=100, jobs=1) == [Finding("TK001", LIMIT, str(saved))]
    assert lint(saved, jobs=1) == []  # the default limit is far above
    assert lint(saved, max_bytes=None, jobs=1) == []
    linted = LintRun([str(saved)], LintOptions(frozenset(CHECKS)), jobs=1, max_bytes=100)
    assert list(linted) == [Finding("TK001", LIMIT, str(saved))]


def test_a_url_over_the_limit_is_refused_before_it_is_copied(saved: Path, url: str) -> None:
    size = saved.stat().st_size
    words = (
        f"the file is {size} bytes, over the limit of 100 bytes; pass a larger max_bytes to read it"
    )
    assert lint(url, max_bytes=100, jobs=1) == [Finding("TK001", words, url)]
    assert lint(url, jobs=1) == []


def test_a_local_file_is_mapped_and_a_url_copied(
    saved: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    real = load_with_metadata

    def spy(path: str, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(path, **kwargs)

    monkeypatch.setattr(run, "load_with_metadata", spy)
    options = LintOptions(frozenset({"TK001"}))
    for path in (str(saved), url):
        assert lint_file(path, options=options, max_bytes=12345).findings == ()
    assert calls == [{"mmap": True, "max_bytes": 12345}, {"mmap": False, "max_bytes": 12345}]


def test_a_damaged_file_is_tk001_in_validate_s_words(tmp_path: Path) -> None:
    path = tmp_path / "bad.npz"
    path.write_bytes(b"PK not a zip")
    words = "damaged or not a ZIP archive: File is not a zip file"
    assert list(check_file(str(path)).problems) == [words]
    result = lint_file(str(path), options=LintOptions(frozenset({"TK001"})), max_bytes=None)
    found = (Finding("TK001", words, str(path)),)
    assert result == FileResult(str(path), found, None, None, readable=False)
    assert result.readable is False
    assert lint(path, select=["TK1", "TK2"], jobs=1) == []  # TK001 only when selected


def test_an_error_while_loading_is_an_internal_error_finding(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: str, **kwargs: Any) -> Any:
        raise KeyError("boom")

    monkeypatch.setattr(run, "load_with_metadata", broken)
    words = "internal error (please report it): KeyError: 'boom'"
    assert lint(saved, jobs=1) == [Finding("TK001", words, str(saved))]


def test_discovery_s_problems_are_one_tk001() -> None:
    options = LintOptions(frozenset({"TK001"}))
    [result] = lint_chunk(
        [FileCheck("x.npz", ("too big", "not a file"))], options=options, max_bytes=None
    )
    assert result.findings == (Finding("TK001", "too big; not a file", "x.npz"),)


def test_a_chunk_passes_max_bytes_on(saved: Path) -> None:
    options = LintOptions(frozenset({"TK001"}))
    [result] = lint_chunk([Found(str(saved))], options=options, max_bytes=100)
    assert result.findings == (Finding("TK001", LIMIT, str(saved)),)


# --- a file's recording, and what each check is given ------------------------------------


def _recorded_file(folder: Path) -> Path:
    """A file whose own findings are TK106 and TK116 (from its recording's space)."""
    obses = np.zeros((9, 1, 3), np.float32)
    obses[4] = obses[3] = 1.0
    obses[7, 0, 0] = obses[6, 0, 0] = 50.0  # far outside the declared space, above
    obses[5, 0, 0] = -50.0  # and below (TK116 asks a two-sided feature for both)
    rews = np.ones(8)
    rews[[3, 6]] = 0.0
    outs = {"actions": np.array([[0], [1], [9], [0], [0], [0], [0], [0], [0]])}  # 9: TK106
    space = {"type": "Box", "low": -1.0, "high": 1.0, "shape": [3], "dtype": "float32"}
    recording = {**RECORDING, "num_envs": 1, "observation_space": space}
    path = folder / "r.npz"
    trajkit.save(
        rollout(dones_for([4, 3], 8), obses=obses, rews=rews, outs=outs), path, recording=recording
    )
    return path


def test_a_file_s_recording_reaches_its_checks_and_findings_come_in_code_order(
    tmp_path: Path,
) -> None:
    path = _recorded_file(tmp_path)
    space = {"type": "Discrete", "n": 2}
    found = lint(path, select=["TK1"], action_space=space, max_episode_steps=3, jobs=1)
    # TK105 (an episode over the time limit) is found by joining episodes, after the others,
    # and comes before them in code order
    codes = [(f.code, f.env, f.step) for f in found]
    assert codes == [("TK105", 0, 3), ("TK106", 0, 2), ("TK116", 0, 5)]


def test_the_recording_and_the_settings_reach_the_summary_and_the_edges(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, tuple[Any, ...]] = {}
    for name in ("check_rollout", "summarize", "episode_edges"):
        real = getattr(run, name)

        def spy(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            seen[_name] = (*args[1:], kwargs)
            return _real(*args, **kwargs)

        monkeypatch.setattr(run, name, spy)
    options = LintOptions(frozenset({"TK101", "TK203"}), max_episode_steps=7, action_space=SPACE)
    result = lint_file(str(saved), options=options, max_bytes=None)
    recording = trajkit.read_metadata(saved).recording
    assert recording is not None
    recorded = recording.model_dump(mode="json")
    assert result.recording == recorded
    assert seen["check_rollout"] == (options, {"path": str(saved), "recording": recorded})
    assert seen["summarize"] == (str(saved), recorded, SPACE, {})
    assert seen["episode_edges"] == (str(saved), recorded, 7, {})


def test_summary_and_edges_are_made_only_for_the_checks_that_read_them() -> None:
    r = example_rollout(num_steps=8)
    alone = lint_rollout(r, "a.npz", None, LintOptions(frozenset({"TK106"}), action_space=SPACE))
    assert (alone.summary, alone.edges) == (None, None)
    across = lint_rollout(r, "a.npz", None, LintOptions(frozenset({"TK203"})))
    assert across.summary is not None
    assert across.edges is None
    joined = lint_rollout(r, "a.npz", None, LintOptions(frozenset({"TK101"})))
    assert joined.summary is None
    assert joined.edges is not None


def test_a_file_a_check_failed_on_keeps_its_recording(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(run, "check_rollout", broken)
    result = lint_file(str(saved), options=LintOptions(frozenset()), max_bytes=None)
    assert result.failure is not None
    assert result.recording == Recording.model_validate(RECORDING).model_dump(mode="json")


def test_a_failure_joining_episodes_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object) -> list[Finding]:
        raise ValueError("bad join")

    monkeypatch.setattr(EpisodeJoiner, "finish", broken)
    fold = LintFold(LintOptions(frozenset({"TK101"})))
    assert fold.finish() == []
    [failure] = fold.failures
    assert failure.startswith("the episodes joined across files: ValueError: bad join (at ")


# --- lint's settings: refused, or passed on ---------------------------------------------


@pytest.mark.parametrize(
    ("setting", "words"),
    [
        ({"max_episode_steps": 0}, "max_episode_steps must be an integer >= 1, got 0"),
        ({"reward_scale_ratio": 1}, "reward_scale_ratio must be a finite number > 1, got 1"),
        (
            {"action_space": {"type": "Discrete"}},
            "action_space: Discrete needs n, got {'type': 'Discrete'}",
        ),
        (
            {"ignore": ["TK9"]},
            f"ignore: TK9 matches no check (codes are {min(CHECKS)} to {max(CHECKS)}; "
            "see trajkit lint --list)",
        ),
        (
            {"select": ["TK9"]},
            f"select: TK9 matches no check (codes are {min(CHECKS)} to {max(CHECKS)}; "
            "see trajkit lint --list)",
        ),
    ],
)
def test_a_bad_setting_is_refused_by_its_name(
    saved: Path, setting: dict[str, Any], words: str
) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        lint(saved, jobs=1, **setting)


def test_the_smallest_settings_allowed_are_accepted(saved: Path) -> None:
    assert lint(saved, max_episode_steps=1, reward_scale_ratio=1.5, jobs=1) is not None


def test_ignore_reaches_the_checks(tmp_path: Path) -> None:
    r = example_rollout(num_steps=16, num_envs=2, keys=("actions",))
    for name in "ab":
        trajkit.save(r, tmp_path / f"{name}.npz")
    assert [f.code for f in lint(tmp_path, select=["TK2"], jobs=1)] == ["TK203"]
    assert lint(tmp_path, select=["TK2"], ignore=["TK203"], jobs=1) == []


def test_reward_scale_ratio_reaches_tk202(tmp_path: Path) -> None:
    for i in range(4):  # the last file's rewards are about 5 times the others'
        r = rollout(np.stack([dones_for([6, 9], 20)] * 2, 1), seed=i)
        r.rews *= 5.0 if i == 3 else 1.0
        trajkit.save(r, tmp_path / f"r{i}.npz")
    assert lint(tmp_path, select=["TK202"], jobs=1) == []  # the default factor is 10
    [found] = lint(tmp_path, select=["TK202"], reward_scale_ratio=3, jobs=1)
    assert (found.code, found.path) == ("TK202", str(tmp_path / "r3.npz"))
    assert "(limit 3x)" in found.message


def test_jobs_and_trust_env_args_reach_the_run(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    real = run_ordered

    def ordered(work: Any, items: Any, *, jobs: int) -> Any:
        seen.append(jobs)
        return real(work, items, jobs=1)  # the files are linted here, however many asked

    monkeypatch.setattr(run, "run_ordered", ordered)
    options: list[LintOptions] = []

    class Spy(LintRun):
        def __init__(self, paths: Any, given: LintOptions, **kwargs: Any) -> None:
            options.append(given)
            super().__init__(paths, given, **kwargs)

    monkeypatch.setattr(trajkit.lint, "LintRun", Spy)
    lint(saved, jobs=1)
    lint(saved, jobs=3, trust_env_args=True)
    assert seen == [1, 3]
    assert [o.trust_env_args for o in options] == [False, True]


def test_a_run_replays_only_when_asked(saved: Path) -> None:
    tk3 = frozenset(code for code in CHECKS if code.startswith("TK3"))
    linted = LintRun([str(saved)], LintOptions(tk3), jobs=1)
    assert list(linted) == []
    assert linted.replayed == []


def test_max_bytes_reaches_the_replay(saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gymnasium")
    from trajkit.lint import replay

    calls: list[dict[str, Any]] = []

    def recorded(files: Any, options: Any, **kwargs: Any) -> Iterator[Finding]:
        calls.append(kwargs)
        yield from ()

    monkeypatch.setattr(replay, "replay_recordings", recorded)
    linted = LintRun(
        [str(saved)], LintOptions(frozenset({"TK300"})), replay=True, jobs=1, max_bytes=54321
    )
    assert list(linted) == []
    assert [call["max_bytes"] for call in calls] == [54321]


# --- a failed check's warning, and stopping a run -----------------------------------------


def _raising(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(run, "check_rollout", broken)


def test_a_failed_check_warns_at_the_caller_of_lint(
    saved: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _raising(monkeypatch)
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    with monkeypatch.context() as patch:
        patch.setattr(warnings, "warn", lambda *args, **kwargs: calls.append((args, kwargs)))
        assert lint(saved, jobs=1) == []
    [((message, category), kwargs)] = calls
    assert message.startswith(
        f"a check failed (please report it): {saved}: RuntimeError: a bug (at "
    )
    assert (category, kwargs) == (RuntimeWarning, {"stacklevel": 2})
    if not UNDER_MUTMUT:  # its trampoline's frames lie between the caller and the warning
        line = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
        with pytest.warns(RuntimeWarning) as caught:
            lint(saved, jobs=1)
        assert (caught[0].filename, caught[0].lineno) == (__file__, line)


def test_close_stops_the_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in "abc":
        trajkit.save(example_rollout(num_steps=8, seed=ord(name)), tmp_path / f"{name}.npz")
    stopped: list[bool] = []
    real = run_ordered

    def ordered(work: Any, items: Any, *, jobs: int) -> Iterator[Any]:
        try:
            yield from real(work, items, jobs=jobs)
        except GeneratorExit:
            stopped.append(True)
            raise

    monkeypatch.setattr(run, "run_ordered", ordered)
    linted = LintRun([str(tmp_path)], LintOptions(frozenset({"TK106"}), action_space=SPACE), jobs=1)
    found = iter(linted)
    assert next(found).path == str(tmp_path / "a.npz")
    linted.close()
    assert stopped == [True]
    LintRun([], LintOptions(frozenset())).close()  # before any file: nothing to stop
