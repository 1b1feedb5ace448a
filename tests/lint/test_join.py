"""TK101 and TK105 on episodes joined across the files of one recording."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from tests.lint.helpers import dones_for, rollout
from trajkit._io import engine
from trajkit.cli import main
from trajkit.lint import lint

gym = pytest.importorskip("gymnasium")
from trajkit.gym import RolloutRecorder  # noqa: E402

T = 128  # CartPole-v1's episodes here last its whole time limit of 500 steps: 3 files and 116


def _policy(obs: Any) -> dict[str, Any]:
    return {"actions": (obs[:, 2] + 0.3 * obs[:, 3] > 0).astype(np.int64)}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recorded")
    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    recorder = RolloutRecorder(env, _policy, seed=0)
    for i in range(5):
        trajkit.save(recorder.record(T), folder / f"run-{i}.npz", recording=recorder.recording)
    env.close()
    return folder


@pytest.fixture
def run(recorded: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(recorded, folder)
    return folder


def _edit(path: Path, **update: Any) -> None:
    """Re-save `path` with its recording updated (`recording=None` drops it)."""
    r = trajkit.load(path)
    recording = trajkit.read_metadata(path).recording
    assert recording is not None
    if update.pop("truncations_dropped", False):
        assert r.truncated is not None
        r.truncated[...] = 0
    kept = None if update.pop("drop", False) else recording.model_copy(update=update)
    trajkit.save(r, path, recording=kept)


def test_the_recording_is_cut_across_files_and_passes(run: Path) -> None:
    r = trajkit.load(run / "run-3.npz")
    assert r.truncated is not None
    assert np.flatnonzero(r.dones[1:, 0]).tolist() == [115]  # step 3 * 128 + 115 = 499
    assert np.flatnonzero(r.truncated[:, 0]).tolist() == [115]
    assert lint(run, jobs=1) == []


def test_tk101_two_long_cut_episodes_are_evidence(run: Path) -> None:
    """Both episodes ended at 500 after 125 steps each (the last quarter of the limit) that
    terminated nothing: h = 3 / 253, and two such ends a chance of 1.4e-4."""
    _edit(run / "run-3.npz", truncations_dropped=True)
    [found] = lint(run, jobs=1)
    assert (found.code, Path(found.path or "").name, found.env, found.step) == (
        "TK101",
        "run-3.npz",
        0,
        115,
    )
    assert found.message.startswith("2 distinct episodes in 1 file end at exactly the time limit")


def test_tk101_one_cut_episode_is_no_evidence(run: Path) -> None:
    """Env 0's episode ends unflagged at 500, env 1's flagged: one is a coincidence."""
    r = trajkit.load(run / "run-3.npz")
    recording = trajkit.read_metadata(run / "run-3.npz").recording
    assert r.truncated is not None
    r.truncated[:, 0] = 0
    trajkit.save(r, run / "run-3.npz", recording=recording)
    assert lint(run, jobs=1) == []


def test_tk101_truncations_recorded_as_terminations_across_files(tmp_path: Path) -> None:
    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=15)
    recorder = RolloutRecorder(env, _policy, seed=0)
    for i in range(5):
        r = recorder.record(12)  # files shorter than the episodes
        assert r.truncated is not None
        r.truncated[...] = 0
        trajkit.save(r, tmp_path / f"run-{i}.npz", recording=recorder.recording)
    env.close()
    [found] = lint(tmp_path, jobs=1)
    assert (found.code, found.path, found.env, found.step) == (
        "TK101",
        str(tmp_path / "run-1.npz"),
        0,
        2,
    )
    assert found.message == (
        "8 distinct episodes in 4 files end at exactly the time limit of 15 steps with "
        "truncated = 0, in envs that flag no such end as a truncation, where a step terminates "
        "an episode 0.11 of the time: record them as truncations (truncated = 1 and their "
        "final_values)"
    )


def test_tk101_needs_a_limit_and_reports_once_per_recording(tmp_path: Path) -> None:
    dones = dones_for([10] * 8, 80)  # 8 episodes of 10 steps, unflagged
    obses = np.random.default_rng(0).normal(size=(81, 1, 3)).astype(np.float32)
    for i, s in enumerate(range(0, 80, 8)):  # 10 files of 8 steps: none complete in one
        part = rollout(dones[s : s + 9], obses=obses[s : s + 9], truncated=np.zeros(8), seed=i)
        trajkit.save(part, tmp_path / f"p{i:02d}.npz")
    assert lint(tmp_path, select=["TK101"], jobs=1) == []  # a fixed length is no time limit
    [limited] = lint(tmp_path, select=["TK101"], max_episode_steps=10, jobs=1)
    assert (limited.path, limited.env, limited.step) == (str(tmp_path / "p01.npz"), 0, 1)
    assert limited.message.startswith("8 distinct episodes in 8 files end at exactly the time")


@pytest.mark.parametrize("recorded_files", [True, False], ids=["recording", "no-recording"])
def test_tk105_on_the_joined_episode(
    run: Path, recorded_files: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(5):
        _edit(run / f"run-{i}.npz", max_episode_steps=None, drop=not recorded_files)
    assert main(["lint", "--no-config", "-j", "1", "--max-episode-steps", "300", str(run)]) == 1
    out = capsys.readouterr().out
    assert out == (
        f"{run / 'run-2.npz'}: env 0, step 44: TK105 [error] 2 episode(s) run past the time "
        "limit of 300 steps with no episode end or truncation (this one began 256 steps before "
        "row 0 of this file)\n"
    )


def test_files_of_other_recordings_are_not_joined(recorded: Path, run: Path) -> None:
    for i in range(5):
        _edit(run / f"run-{i}.npz", max_episode_steps=None)
    pair = [run / "run-0.npz", run / "run-1.npz"]
    assert [f.path for f in lint(pair, max_episode_steps=200, jobs=1)] == [str(pair[1])]
    # The same rollout under another recording's id (its row 0 repeats run-0's row T):
    _edit(pair[1], id="another-recording")
    assert lint(pair, max_episode_steps=200, jobs=1) == []
    # Interleaved in the listing, each recording is joined in its own index order:
    shutil.copyfile(recorded / "run-1.npz", pair[1])
    _edit(pair[1], max_episode_steps=None)
    other = run / "other"
    other.mkdir()
    for i in range(5):
        shutil.copyfile(recorded / f"run-{i}.npz", other / f"run-{i}b.npz")
        _edit(other / f"run-{i}b.npz", id="interleaved", max_episode_steps=None)
    listing = [p for i in range(5) for p in (run / f"run-{i}.npz", other / f"run-{i}b.npz")]
    found = lint(listing, select=["TK1"], max_episode_steps=300, jobs=1)
    assert [(Path(f.path or "").name, f.code, f.step) for f in found] == [
        ("run-2.npz", "TK105", 44),
        ("run-2b.npz", "TK105", 44),
    ]


def test_a_gap_in_the_index_breaks_the_chain(run: Path) -> None:
    for i in range(5):
        _edit(run / f"run-{i}.npz", max_episode_steps=None)
    (run / "run-1.npz").unlink()
    assert lint(run, max_episode_steps=300, jobs=1) == []  # 0 | 2, 3: 256 + 116 steps seen


def test_jobs_give_the_same_joined_findings(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "CHUNK_FILES", 1)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # workers, however few the files
    _edit(run / "run-3.npz", truncations_dropped=True)
    for i in (0, 1, 2, 4):
        _edit(run / f"run-{i}.npz", max_episode_steps=None)
    one = lint(run, max_episode_steps=300, jobs=1)
    two = lint(run, max_episode_steps=300, jobs=2)
    assert one == two
    assert [(Path(f.path or "").name, f.code) for f in one] == [
        ("run-2.npz", "TK105"),
        ("run-3.npz", "TK101"),
    ]


def test_files_without_a_recording_join_only_when_listed_one_after_the_other(run: Path) -> None:
    for i in range(5):
        _edit(run / f"run-{i}.npz", drop=True)
    assert [f.path for f in lint(run, select=["TK105"], max_episode_steps=300, jobs=1)] == [
        str(run / "run-2.npz")
    ]
    stranger = rollout(np.zeros(T + 1), seed=3)  # no episode end, B = 1
    trajkit.save(stranger, run / "run-1x.npz")  # listed between run-1 and run-2
    assert lint(run, select=["TK105"], max_episode_steps=300, jobs=1) == []


@pytest.mark.parametrize("index", [1, 2, 0], ids=["next", "skips-one", "repeats"])
def test_only_the_next_index_joins(run: Path, index: int) -> None:
    """run-1 follows run-0 row for row; it joins only as index 1, not across a missing one."""
    pair = [run / "run-0.npz", run / "run-1.npz"]
    _edit(pair[0], max_episode_steps=None)
    _edit(pair[1], max_episode_steps=None, index=index)
    found = lint(pair, select=["TK105"], max_episode_steps=200, jobs=1)
    if index == 1:  # 128 + 72 steps: the joined episodes pass 200 at run-1's step 72
        assert [(f.path, f.step) for f in found] == [(str(pair[1]), 72)]
    else:
        assert found == []


# ------------------------------------------------------------- boundaries, one env, L = 10

L = 10
OTHERS = 1500  # envs cut at L and flagged: TK101's rates (per step, and at step L-1) are rare


def _files(tmp_path: Path, length: int | None, cuts: list[int]) -> list[Path]:
    """Env 0: one episode from row 0 of `length` steps (None: no end, 20 rows), then one of
    L steps (cut by the end of the rows); `OTHERS` envs whose episodes are cut, flagged, at
    exactly L; cut into files at `cuts`."""
    rows = 20 if length is None else length + L
    dones = np.zeros((rows + 1, 1 + OTHERS))
    dones[0] = 1
    dones[L : rows + 1 : L, 1:] = 1
    truncated = np.zeros((rows, 1 + OTHERS))
    truncated[L - 1 : rows : L, 1:] = 1
    if length is not None:
        dones[length, 0] = 1
    obses = np.random.default_rng(0).normal(size=(rows + 1, 1 + OTHERS, 3)).astype(np.float32)
    edges = [0, *cuts, rows]
    paths = []
    for i, (a, b) in enumerate(itertools.pairwise(edges)):
        part = rollout(dones[a : b + 1], obses=obses[a : b + 1], truncated=truncated[a:b], seed=i)
        paths.append(tmp_path / f"p{i}.npz")
        trajkit.save(part, paths[-1])
    return paths


def _where(tmp_path: Path) -> list[tuple[str, str, int | None, int | None]]:
    found = lint(tmp_path, select=["TK101", "TK105"], max_episode_steps=L, jobs=1)
    return [(f.code, Path(f.path or "").name, f.env, f.step) for f in found]


@pytest.mark.parametrize(
    ("length", "cuts", "expected"),
    [
        (L, [4], [("TK101", "p1.npz", 0, 5)]),  # ends at row 10 = p1's step 5
        (L, [9], [("TK101", "p1.npz", 0, 0)]),  # ends at p1's first step
        (L, [1], [("TK101", "p1.npz", 0, 8)]),
        (L, [10], [("TK101", "p0.npz", 0, 9)]),  # ends at p0's last step: not joined
        (L, [11], [("TK101", "p0.npz", 0, 9)]),
        (L, [3, 7], [("TK101", "p2.npz", 0, 2)]),  # through a whole middle file
        (L - 1, [4], []),  # one step short of the limit
        (L + 1, [4], [("TK105", "p1.npz", 0, 6)]),  # passes the limit at p1's step 6
        (L + 1, [10], [("TK105", "p1.npz", 0, 0)]),  # L steps in p0, the limit passed at once
        (L + 1, [11], [("TK105", "p0.npz", 0, 10)]),  # passed in p0 itself
        (L + 1, [3, 7], [("TK105", "p2.npz", 0, 3)]),
        (None, [12], [("TK105", "p0.npz", 0, 10)]),  # passed in p0, not reported again in p1
        (None, [5], [("TK105", "p1.npz", 0, 5)]),
    ],
)
def test_join_boundaries(
    tmp_path: Path, length: int | None, cuts: list[int], expected: list[Any]
) -> None:
    _files(tmp_path, length, cuts)
    assert _where(tmp_path) == expected


def test_a_joined_episode_says_where_it_began(tmp_path: Path) -> None:
    _files(tmp_path, L + 1, [4])
    [over] = lint(tmp_path, select=["TK105"], max_episode_steps=L, jobs=1)
    assert over.message.endswith("(this one began 4 steps before row 0 of this file)")
    for path in tmp_path.iterdir():
        path.unlink()
    _files(tmp_path, L, [4])
    [cut] = lint(tmp_path, select=["TK101"], max_episode_steps=L, jobs=1)
    assert cut.message.startswith("1 distinct episodes in 1 file end at exactly")


@pytest.mark.parametrize(("length", "hit"), [(L - 1, True), (L, False)])
def test_tk113_on_a_joined_episode(tmp_path: Path, length: int, hit: bool) -> None:
    dones = dones_for([length], 14)
    truncated = np.zeros(14)
    truncated[length - 1] = 1
    obses = np.random.default_rng(0).normal(size=(15, 1, 3)).astype(np.float32)
    for i, (a, b) in enumerate([(0, 5), (5, 14)]):
        part = rollout(dones[a : b + 1], obses=obses[a : b + 1], truncated=truncated[a:b])
        trajkit.save(part, tmp_path / f"p{i}.npz")
    found = lint(tmp_path, select=["TK113"], max_episode_steps=L, jobs=1)
    assert [(Path(f.path or "").name, f.step) for f in found] == (
        [("p1.npz", length - 6)] if hit else []
    )
