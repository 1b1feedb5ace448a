"""Many files: discovery order, mergeable statistics, errors that cross processes."""

from __future__ import annotations

import os
import pickle
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import trajkit
from trajkit._io import scan
from trajkit.dataset import DatasetStats, Moments
from trajkit.testing import example_rollout


def test_rollout_file_errors_survive_pickling() -> None:
    err = trajkit.RolloutFileError("CRC-32 mismatch", path="a.npz", member="rews.npy")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is trajkit.RolloutFileError
    assert (str(back), back.path, back.member, back.reason) == (
        str(err),
        "a.npz",
        "rews.npy",
        "CRC-32 mismatch",
    )


def test_discover_walks_folders_in_sorted_order(tmp_path: Path) -> None:
    names = ["z.npz", "a.npz", "b/y.npz", "b/c/x.npz", "a/w.npz", ".h/v.npz", ".u.npz", "t.txt"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"x" * len(name))
    found = list(scan.discover([str(tmp_path), str(tmp_path / "t.txt")]))
    relative = [os.path.relpath(item.path, tmp_path) for item in found]
    assert relative == ["a.npz", "z.npz", "a/w.npz", "b/y.npz", "b/c/x.npz", "t.txt"]
    assert all(isinstance(item, scan.Found) for item in found)
    assert [item.nbytes for item in found] == [len(r) for r in relative]
    assert sorted(relative[:-1], key=scan.walk_key) == relative[:-1]


def test_discover_is_lazy(tmp_path: Path) -> None:
    (tmp_path / "a.npz").write_bytes(b"")
    items = scan.discover([str(tmp_path), str(tmp_path / "gone")])
    assert next(items) == scan.Found(str(tmp_path / "a.npz"), 0)
    (tmp_path / "gone").mkdir()  # looked at only now
    assert next(items) == scan.FileCheck(str(tmp_path / "gone"), ("no *.npz files in this folder",))


def test_chunks_close_at_a_byte_budget() -> None:
    items = [scan.Found(f"{i}.npz", n) for i, n in enumerate([1, 1, 30, 1, 1, 1])]
    sizes = [len(c) for c in scan.chunks(items, max_files=4, max_bytes=20)]
    assert sizes == [3, 3]


@pytest.mark.parametrize("splits", [[0], [1], [3, 7], [0, 0, 5], [2, 4, 6, 8]])
def test_moments_merge_like_numpy(splits: list[int]) -> None:
    values = np.random.default_rng(0).normal(3.0, 2.0, size=10)
    merged = Moments()
    for part in np.split(values, splits):
        merged = merged.merge(Moments.of(part))
    assert merged.count == 10
    np.testing.assert_allclose(
        [merged.mean, merged.std, merged.min, merged.max],
        [values.mean(), values.std(), values.min(), values.max()],
        rtol=1e-12,
    )


def test_dataset_stats_of_files_equal_the_concatenation() -> None:
    rollouts = [
        example_rollout(num_steps=40, num_envs=3, truncation=True, done_prob=0.2, seed=s)
        for s in range(4)
    ]
    total = DatasetStats()
    for r in rollouts:
        total = total.merge(DatasetStats.of(r, nbytes=10))
    episodes = [r.episode_stats() for r in rollouts]
    returns = np.concatenate([e.returns for e in episodes])
    lengths = np.concatenate([e.lengths for e in episodes])
    assert (total.files, total.nbytes, total.steps) == (4, 40, 4 * 40 * 3)
    assert total.episodes == sum(e.episodes for e in episodes)
    assert total.truncations == sum(e.truncations for e in episodes) > 0
    assert total.returns.count == len(returns) > 0
    np.testing.assert_allclose(
        [total.returns.mean, total.returns.std, total.lengths.mean, total.lengths.max],
        [returns.mean(), returns.std(), lengths.mean(), lengths.max()],
    )


def test_run_ordered_in_processes_keeps_the_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan, "CHUNK_FILES", 2)
    for i in range(7):
        trajkit.save(example_rollout(num_steps=i), tmp_path / f"r{i}.npz")
    work = partial(scan.stats_chunk, spec=None, max_bytes=None)
    one = list(scan.run_ordered(work, scan.discover([str(tmp_path)]), jobs=1))
    two = list(scan.run_ordered(work, scan.discover([str(tmp_path)]), jobs=2))
    assert repr(one) == repr(two)  # equal, NaNs included
    assert [s.steps for s in one] == [0 + 2, 4 + 6, 8 + 10, 12]  # T * B, two files per chunk


def test_stats_chunk_raises_on_a_refused_path(tmp_path: Path) -> None:
    items = list(scan.discover([str(tmp_path / "gone.npz")]))
    with pytest.raises(trajkit.RolloutFileError, match=r"gone\.npz: no such file or directory"):
        scan.stats_chunk(items, spec=None, max_bytes=None)


def test_cpu_count() -> None:
    assert scan.cpu_count() >= 1
