"""The one pass: profiles and lint's results folded in file order; the episodes picked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from trajkit._io import engine
from trajkit._io.filecheck import FileCheck
from trajkit._io.stats import DatasetStats
from trajkit.lint import lint
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import CHECKS, Finding
from trajkit.report import _collect, _profile
from trajkit.report._collect import Collection, collect
from trajkit.report._lint import Findings
from trajkit.report._profile import profile_rollout
from trajkit.report._sources import open_inputs, sources
from trajkit.report._views import episode_views, picks
from trajkit.testing import example_rollout

ALL = LintOptions(frozenset(c for c in CHECKS if not c.startswith("TK3")))


def _folder(tmp_path: Path, count: int = 5, **kw: object) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(count):
        r = example_rollout(num_steps=32, num_envs=2, truncation=True, seed=i, **kw)  # type: ignore[arg-type]
        trajkit.save(r, folder / f"r{i}.npz")
    return folder


def _collected(folder: Path, tmp_path: Path, **kw: Any) -> Collection:
    return collect(open_inputs(sources(str(folder)), str(tmp_path)), **kw)[0]


def _findings(folder: Path | list[Path], tmp_path: Path, **kw: Any) -> Findings:
    paths = [str(p) for p in folder] if isinstance(folder, list) else str(folder)
    return collect(open_inputs(sources(paths), str(tmp_path)), ALL, **kw)[1]


def _flat(found: Findings) -> list[Finding]:
    return [f for code in sorted(found.by_code) for f in found.by_code[code]]


def test_counts_are_the_datasets(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "bad.npz").write_bytes(b"not a zip")
    c = _collected(folder, tmp_path, jobs=1)
    files = sorted(folder.glob("r*.npz"))
    expected = DatasetStats()
    for path in files:
        expected = expected.merge(DatasetStats.of(trajkit.load(path), path.stat().st_size))
    expected = expected.merge(DatasetStats(files=1, nbytes=9))
    assert c.stats == expected
    assert (c.files, c.invalid) == (6, 1)
    assert [check.path for check in c.refused] == [str(folder / "bad.npz")]
    rewards = np.concatenate([np.ravel(trajkit.load(p).rews) for p in files])
    assert c.reward_moments.count == len(rewards)
    assert c.reward_moments.mean == pytest.approx(rewards.mean())


def test_the_same_with_any_number_of_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path, count=6)
    alone = _collected(folder, tmp_path, jobs=1, seed=3)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # workers, however few the files
    monkeypatch.setattr(engine, "CHUNK_FILES", 2)
    shared = _collected(folder, tmp_path, jobs=2, seed=3)
    assert shared.stats == alone.stats
    for name in ("rewards", "episodes"):
        a, b = getattr(alone, name), getattr(shared, name)
        np.testing.assert_array_equal(a.values, b.values)
    assert alone.leaves.keys() == shared.leaves.keys()
    np.testing.assert_array_equal(alone.leaves["obses"].mean, shared.leaves["obses"].mean)


def test_samples_stay_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_collect, "EPISODE_SAMPLE", 5)
    monkeypatch.setattr(_collect, "REWARD_SAMPLE", 7)
    c = Collection()
    for i in range(40):
        c.add(profile_rollout(example_rollout(num_steps=32, num_envs=2, seed=i), f"r{i}.npz"))
    assert c.episodes is not None
    assert len(c.episodes.values) == 5
    assert c.rewards is not None
    assert len(c.rewards.values) == 7
    assert c.rewards.population == 40 * 64
    assert len(c._paths) <= 4 * 5 + 1  # the files of the episodes kept, and a few more
    for row in (*c.episodes.values, c.best, c.worst):
        assert row is not None
        assert c.path_of(int(row[-1])) == f"r{int(row[-1])}.npz"


def test_listed_files_stop_at_max_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_collect, "MAX_LISTED", 2)
    c = Collection()
    for i in range(3):
        c.add(_profile.FileProfile(FileCheck(f"bad{i}.npz", ("damaged",))))
        assert len(c.refused) == min(i + 1, 2)
    assert c.invalid == 3


def test_files_of_another_schema_are_counted(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    trajkit.save(example_rollout(obs_shape=(4,)), folder / "a.npz")
    trajkit.save(example_rollout(obs_shape=(3,)), folder / "b.npz")
    c = _collected(folder, tmp_path, jobs=1)
    assert (c.other_schema_count, c.other_schema) == (1, [str(folder / "b.npz")])
    assert c.mismatched == {"obses": 1}
    assert c.leaves["obses"].shape == (4,)


def test_findings_are_lints(tmp_path: Path) -> None:
    folder = _folder(tmp_path, count=3)
    (folder / "r3.npz").write_bytes((folder / "r1.npz").read_bytes())  # TK203
    (folder / "r4.npz").write_bytes(b"damaged")  # TK001
    found = _findings(folder, tmp_path, jobs=1)
    expected = lint(folder, jobs=1)
    assert _flat(found) == sorted(expected, key=lambda f: f.code)
    assert found.files == 5
    assert sum(found.counts.values()) == len(expected)
    assert found.tally.exit_code == 1


@pytest.mark.parametrize("truncations", [True, False])
def test_episodes_joined_across_files_are_lints(tmp_path: Path, truncations: bool) -> None:
    """A recording cut into files, its time limit cuts recorded or not (TK101, TK105)."""
    gym = pytest.importorskip("gymnasium")
    from trajkit.gym import RolloutRecorder

    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=20)
    recorder = RolloutRecorder(
        env, lambda obs: {"actions": (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)}, seed=0
    )
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(4):
        r = recorder.record(64)  # about 25 cuts at the time limit: lint's evidence for TK101
        if not truncations and r.truncated is not None:
            r = r.replace(
                truncated=np.zeros_like(r.truncated), final_values=np.zeros_like(r.truncated)
            )
        trajkit.save(r, folder / f"r{i}.npz", recording=recorder.recording)
    env.close()
    expected = lint(folder, jobs=1)
    assert _flat(_findings(folder, tmp_path, jobs=1)) == sorted(expected, key=lambda f: f.code)
    assert truncations or {f.code for f in expected} & {"TK101", "TK105"}


def test_findings_are_lints_with_any_number_of_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _folder(tmp_path, count=6)
    (folder / "r6.npz").write_bytes((folder / "r2.npz").read_bytes())
    alone = _findings(folder, tmp_path, jobs=1)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # workers, however few the files
    monkeypatch.setattr(engine, "CHUNK_FILES", 2)
    assert _flat(_findings(folder, tmp_path, jobs=2)) == _flat(alone)
    assert alone.counts == {"TK203": 1}


def test_progress_hears_of_each_file_once(tmp_path: Path) -> None:
    folder = _folder(tmp_path, count=3)
    inputs = open_inputs(sources(str(folder)), str(tmp_path))
    read: list[str] = []
    collect(inputs, ALL, jobs=1, progress=read.append)
    assert read == [str(p) for p in sorted(folder.glob("*.npz"))]


def test_best_median_and_worst_episodes(tmp_path: Path) -> None:
    folder = _folder(tmp_path, count=3)
    c = _collected(folder, tmp_path, jobs=1)
    chosen = picks(c)
    assert [p.title for p in chosen] == ["Best return", "Median return", "Worst return"]
    returns = []
    for path in sorted(folder.glob("*.npz")):
        returns += trajkit.load(path).episode_stats().returns.tolist()
    assert chosen[0].ret == max(returns)
    assert chosen[2].ret == min(returns)
    assert chosen[1].ret == sorted(returns)[(len(returns) - 1) // 2]
    for pick, view in zip(chosen, episode_views(chosen), strict=True):
        r = trajkit.load(pick.path)
        rews = np.asarray(r.rews, np.float64)[pick.first : pick.first + pick.length, pick.env]
        assert view.rewards.sum() == pytest.approx(pick.ret)
        np.testing.assert_array_equal(view.rewards, rews)
        assert r.dones[pick.first, pick.env] == 1 == r.dones[pick.first + pick.length, pick.env]


def test_one_episode_is_shown_once(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    r = example_rollout(num_steps=8, num_envs=1)
    trajkit.save(
        r.replace(dones=np.array([[1], [0], [0], [1], [0], [0], [0], [0], [0]])), folder / "a.npz"
    )
    assert [p.title for p in picks(_collected(folder, tmp_path, jobs=1))] == ["Best return"]


def test_without_a_complete_episode_the_first_steps_are_shown(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    r = example_rollout(num_steps=12, num_envs=2)
    dones = np.zeros((13, 2))
    dones[6, 1] = 1
    trajkit.save(r.replace(dones=dones), folder / "a.npz")
    (pick,) = picks(_collected(folder, tmp_path, jobs=1))
    assert (pick.title, pick.env, pick.first, pick.length, pick.ending) == (
        "First steps",
        0,
        0,
        12,
        "goes on",
    )
    (view,) = episode_views([pick])
    assert view.ends == []
    other = episode_views([pick.__class__("First steps", pick.path, 1, 0, 12, np.nan, "goes on")])[
        0
    ]
    assert other.ends == [5]  # step 5 ended an episode: row 6 starts one


def test_a_bug_in_a_lint_check_is_reported_and_the_other_files_linted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trajkit.lint.run import lint_rollout
    from trajkit.report import _profile

    folder = _folder(tmp_path, count=3)
    (folder / "r3.npz").write_bytes((folder / "r0.npz").read_bytes())  # TK203

    def broken(rollout: trajkit.Rollout, path: str, metadata: Any, options: Any) -> Any:
        if path.endswith("r1.npz"):
            raise ValueError("a check broke")
        return lint_rollout(rollout, path, metadata, options)

    monkeypatch.setattr(_profile, "lint_rollout", broken)
    found = _findings(folder, tmp_path, jobs=1)
    assert found.failed == 1
    assert found.failures == [f"{folder / 'r1.npz'}: ValueError: a check broke"]
    assert found.counts == {"TK203": 1}
    assert found.files == 4


def test_an_episode_whose_file_is_gone_is_not_shown(tmp_path: Path) -> None:
    folder = _folder(tmp_path, count=2)
    chosen = picks(_collected(folder, tmp_path, jobs=1))
    gone = Path(chosen[0].path)
    gone.unlink()
    views = episode_views(chosen)
    assert [v.pick for v in views] == [p for p in chosen if Path(p.path) != gone]
