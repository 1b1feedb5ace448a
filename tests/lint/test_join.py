"""TK101 and TK105 on episodes joined across the files of one recording."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from tests.lint.helpers import Array, dones_for, lint_rollouts, rollout
from trajkit import Rollout
from trajkit._io import engine
from trajkit.cli import main
from trajkit.lint import Finding, lint
from trajkit.lint.config import LintOptions
from trajkit.lint.join import EpisodeJoiner, episode_edges

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


# ------------------------------------------- in memory: what a chain of files carries, L = 10


def _env(
    rows: int, lengths: list[int], *, cut: bool = False, lead: int = 0, lead_cut: bool = False
) -> tuple[Array, Array]:
    """One env's `dones` `[rows+1]` and `truncated` `[rows]`: row 0 starts an episode
    (`lead` = 0) or continues one begun before it that ends after `lead` steps (truncated if
    `lead_cut`; never, if `lead` > `rows`); then episodes of `lengths`, truncated if `cut`."""
    dones, truncated = np.zeros(rows + 1), np.zeros(rows)
    ends = [(lead, lead_cut)] if lead else []
    dones[0] = not lead
    row = lead
    for length in lengths:
        row += length
        ends.append((row, cut))
    for end, flag in ends:
        if end <= rows:
            dones[end], truncated[end - 1] = 1, flag
    return dones, truncated


def _chain(
    envs: list[tuple[Array, Array]], cuts: list[int], obses: Array | None = None
) -> list[Rollout]:
    """The envs' rollout cut into files at the rows `cuts` (each file's row 0 repeats the row
    T of the one before, as a recorder writes them); random observations by default."""
    dones = np.stack([d for d, _ in envs], axis=1)
    truncated = np.stack([t for _, t in envs], axis=1)
    rows, B = truncated.shape
    if obses is None:
        obses = np.random.default_rng(1).normal(size=(rows + 1, B, 3)).astype(np.float32)
    edges = [0, *cuts, rows]
    return [
        rollout(dones[a : b + 1], obses=obses[a : b + 1], truncated=truncated[a:b], seed=i)
        for i, (a, b) in enumerate(itertools.pairwise(edges))
    ]


def _tk101(
    files: Sequence[Rollout | None], limit: int | None = L, select: str = "TK101"
) -> list[str]:
    return [f.format() for f in lint_rollouts(files, select, max_episode_steps=limit)]


def _message(count: int, files: int, limit: int, rate: str) -> str:
    return (
        f"{count} distinct episodes in {files} file{'s' * (files != 1)} end at exactly the time "
        f"limit of {limit} steps with truncated = 0, in envs that flag no such end as a "
        f"truncation, where a step terminates an episode {rate} of the time: record them as "
        "truncations (truncated = 1 and their final_values)"
    )


@pytest.mark.parametrize(("eights", "rate"), [(False, "0.019"), (True, "0.048")])
def test_tk101_counts_terminations_and_steps_across_the_chain(eights: bool, rate: str) -> None:
    """TK101's rate h is the larger of the chain's rate per step and its rate just before L,
    each `(events + 3) / (trials + 3)` over every file of the chain.

    40 rows, files cut at rows 13 and 27. Env 0: 4 distinct episodes of L steps, unflagged.
    Env 1 and env 2 continue episodes begun before row 0 that terminate after 3 and 5 steps
    (their starts are unseen, their terminations count), then 7 episodes of 5 steps each:
    16 terminations. Env 3 continues one that never ends, env 4 one that ends truncated after
    6 steps: no termination. Env 4, then 20 envs more, cut 3 and 4 episodes at L, flagged.
    Per step: 16 terminations in 25 * 40 steps, h = 19 / 1003. Just before L (steps 8 and 9):
    no termination among 2 chances of each of the 87 episodes that reach L, and one at L of
    each of the 83 flagged: 3 / 260.
    With 2 envs more of 5 episodes of 8 steps each (terminated at step 8, in the window): per
    step 29 / 1083, and just before L 13 / 270, the larger.
    """
    rows = 40
    envs = [
        _env(rows, [L] * 4),
        _env(rows, [5] * 7, lead=3),
        _env(rows, [5] * 7, lead=5),
        _env(rows, [], lead=rows + 1),
        _env(rows, [L] * 3, cut=True, lead=6, lead_cut=True),
        *[_env(rows, [L] * 4, cut=True)] * 20,
        *[_env(rows, [8] * 5)] * (2 * eights),
    ]
    assert _tk101(_chain(envs, [13, 27])) == [
        f"r0.npz: env 0, step 9: TK101 [warning] {_message(4, 3, L, rate)}"
    ]


def test_tk101_distinct_episodes_by_their_first_and_last_observations() -> None:
    """Four episodes of L steps, unflagged, across two files: envs 0 and 1 start alike and end
    apart, envs 2 and 3 start apart and end alike (one goal state): four distinct
    episodes. An episode that starts and ends as another does is a replay, not more evidence.
    40 envs more cut theirs at L, flagged: h = 3 / (3 * 40 + 2 * 4 + 3)."""
    envs = [*[_env(L, [L])] * 4, *[_env(L, [L], cut=True)] * 40]
    obses = np.random.default_rng(2).normal(size=(L + 1, 44, 3)).astype(np.float32)
    obses[0, 1] = obses[0, 0]
    obses[L - 1, 3] = obses[L - 1, 2]
    [found] = _tk101(_chain(envs, [4], obses))
    assert found == f"r1.npz: env 0, step 5: TK101 [warning] {_message(4, 1, L, '0.023')}"
    obses[L - 1, 1] = obses[L - 1, 0]  # env 1 replays env 0's episode
    [found] = _tk101(_chain(envs, [4], obses))
    assert _message(3, 1, L, "0.023") in found


def test_tk101_when_the_chance_is_exactly_the_threshold() -> None:
    """L = 2: env 0 ends one episode at L, unflagged; m envs end theirs at L, flagged. Just
    before L (step 1) no episode of 1 + 2 m chances (each reaches step 1, and a flagged one
    step L too) terminated: h = 3 / (1 + 2 m + 3), h^1 = 1e-3 exactly at m = 1498, reported
    there (at most `CHANCE`), not at m = 1497."""
    for m, hit in [(1498, True), (1497, False)]:
        envs = [_env(2, [2]), *[_env(2, [2], cut=True)] * m]
        found = _tk101(_chain(envs, []), limit=2)
        assert found == (
            [f"r0.npz: env 0, step 1: TK101 [warning] {_message(1, 1, 2, '0.001')}"] if hit else []
        )


def test_tk101_a_one_step_limit_is_no_evidence() -> None:
    """L = 1 (a bandit): every episode ends at its first step, at the limit; none has a step
    before L where it could have terminated, so 40 unflagged ends are no evidence."""
    assert _tk101(_chain([_env(40, [1] * 40)], []), limit=1) == []


def test_tk101_without_a_limit_no_length_is_a_cut() -> None:
    """No time limit: episodes of one step, unflagged in env 0 and flagged in 20 envs, are
    no evidence of a limit of one step."""
    envs = [_env(30, [1] * 30), *[_env(30, [1] * 30, cut=True)] * 20]
    assert _tk101(_chain(envs, [10]), limit=None) == []


def test_tk101_not_selected_is_not_reported() -> None:
    envs = [_env(L, [L]), _env(L, [L]), *[_env(L, [L], cut=True)] * 40]
    assert len(_tk101(_chain(envs, [4]))) == 1
    assert _tk101(_chain(envs, [4]), select="TK105") == []


def _evidence(seed: int) -> list[Rollout]:
    """A file whose env 0 ends 2 distinct episodes at L unflagged, 40 envs theirs flagged."""
    envs = [_env(2 * L, [L, L]), *[_env(2 * L, [L, L], cut=True)] * 40]
    obses = np.random.default_rng(seed).normal(size=(2 * L + 1, 41, 3)).astype(np.float32)
    return _chain(envs, [], obses)


_REC = {"id": "rec", "num_envs": 41}


@pytest.mark.parametrize(
    ("unreadable", "recordings"),
    [
        (True, None),
        (False, [None, {**_REC, "index": 0}]),
        (False, [{**_REC, "index": 0}, {**_REC, "index": 2}]),
        (False, None),
    ],
    ids=["an-unreadable-file-between", "a-recording-next", "an-index-missing", "not-row-T"],
)
def test_a_chain_that_ends_reports_its_evidence(
    unreadable: bool, recordings: list[dict[str, Any] | None] | None
) -> None:
    """A chain ends where the next file does not continue it: after an unreadable file, at a
    file of a recording (after files without one), at the index after next, or at a file
    whose row 0 is not the row T before. Its TK101 is reported, and the next file's too."""
    files: list[Rollout | None] = [*_evidence(0), *([None] * unreadable), *_evidence(1)]
    found = lint_rollouts(files, "TK101", recordings, max_episode_steps=L)
    last = f"r{len(files) - 1}.npz"
    assert [(f.code, f.path) for f in found] == [("TK101", "r0.npz"), ("TK101", last)]


def test_files_join_only_where_row_0_repeats_the_row_t_before() -> None:
    """Two files without a recording, B alike: env 0's episode runs through both (16 steps,
    L = 12) only if the second file's row 0 is the first's row T."""
    files = _chain([_env(16, [])], [8])
    assert [f.path for f in lint_rollouts(files, "TK105", max_episode_steps=12)] == ["r1.npz"]
    moved = files[1].replace(obses=files[1].obses + 1.0)
    assert lint_rollouts([files[0], moved], "TK105", max_episode_steps=12) == []


def test_finish_forgets_the_chains() -> None:
    """After `finish`, a file that continues the last one starts a chain of its own."""
    first, second = _chain([_env(16, [])], [8])
    joiner = EpisodeJoiner(LintOptions(frozenset({"TK105"})))
    assert joiner.add(episode_edges(first, "a.npz", None, 12)) == []
    assert joiner.finish() == []
    assert joiner.add(episode_edges(second, "b.npz", None, 12)) == []  # 8 steps, not 16
    assert joiner.finish() == []


# ------------------------------------------------ TK112: starts joined across a recording


def _seeded(alike_rows: str) -> list[Rollout]:
    """Two envs of a recording, 9 episodes of 4 steps each, starting on the same rows with
    the same observation (seeded alike); files cut at row 27. Between the starts, env 1's
    observations are random (`"random"`) or env 0's on every other row (`"lockstep"`)."""
    envs = [_env(36, [4] * 9)] * 2
    obses = np.random.default_rng(3).normal(size=(37, 2, 3)).astype(np.float32)
    obses[::4, 1] = obses[::4, 0]
    if alike_rows == "lockstep":
        obses[::2, 1] = obses[::2, 0]
    return _chain(envs, [27], obses)


def _recorded(files: list[Rollout]) -> list[Finding]:
    recordings = [
        {"id": "rec", "index": i, "num_envs": 2, "wrappers": []} for i in range(len(files))
    ]
    return lint_rollouts(files, "TK112", recordings)


def test_tk112_seeded_alike_across_the_files_of_a_recording() -> None:
    """Every start of env 1 repeats env 0's on the same row, in either file; the envs' rows
    between starts are never alike (0 of 18 pairs judged in both files): reported, with the
    starts of both files."""
    [found] = _recorded(_seeded("random"))
    assert (found.code, found.path, found.env, found.step) == ("TK112", "r0.npz", 1, 0)
    assert found.message.startswith(
        "envs 0 and 1 start alike: 9 of 9 episode starts repeat another env's start of the "
        "same order (r0.npz row 0 and r0.npz row 0), where two starts out of order are alike "
    )


def test_tk112_envs_in_lockstep_across_the_files_of_a_recording() -> None:
    """The envs come to one observation by themselves on every other row (a deterministic
    env and policy, in each file): their alike starts on one row are no evidence."""
    assert _recorded(_seeded("lockstep")) == []
