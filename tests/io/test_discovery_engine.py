"""Many files: discovery order, the engine (in-process or workers), mergeable statistics."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import trajkit
from trajkit._io import discovery, engine, stats
from trajkit._io.filecheck import FileCheck, check_chunk
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
    found = list(discovery.discover([str(tmp_path), str(tmp_path / "t.txt")]))
    relative = [os.path.relpath(item.path, tmp_path) for item in found]
    assert relative == ["a.npz", "z.npz", "a/w.npz", "b/y.npz", "b/c/x.npz", "t.txt"]
    assert all(isinstance(item, discovery.Found) for item in found)
    assert [item.nbytes for item in found] == [len(r) for r in relative]
    assert sorted(relative[:-1], key=discovery.walk_key) == relative[:-1]


def test_discover_compares_numbers_as_numbers(tmp_path: Path) -> None:
    names = ["r10.npz", "r9.npz", "r009.npz", "d10/a.npz", "d9/a.npz", "rollout-1000000.npz"]
    names.append("rollout-999999.npz")
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    found = [os.path.relpath(item.path, tmp_path) for item in discovery.discover(str(tmp_path))]
    assert found == [
        "r009.npz",
        "r9.npz",
        "r10.npz",
        "rollout-999999.npz",
        "rollout-1000000.npz",
        "d9/a.npz",
        "d10/a.npz",
    ]
    assert sorted(found, key=discovery.walk_key) == found


def test_an_empty_folder_is_a_verdict_unless_empty_ok(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("")
    empty = str(tmp_path / "empty")
    assert list(discovery.discover(empty)) == [FileCheck(empty, ("no *.npz files in this folder",))]
    assert list(discovery.discover(empty, empty_ok=True)) == []
    gone = str(tmp_path / "gone")  # still a verdict: the folder is not there at all
    assert list(discovery.discover(gone, empty_ok=True)) == [
        FileCheck(gone, ("no such file or directory",))
    ]


def test_discover_is_lazy(tmp_path: Path) -> None:
    (tmp_path / "a.npz").write_bytes(b"")
    items = discovery.discover([str(tmp_path), str(tmp_path / "gone")])
    assert next(items) == discovery.Found(str(tmp_path / "a.npz"), 0)
    (tmp_path / "gone").mkdir()  # looked at only now
    assert next(items) == FileCheck(str(tmp_path / "gone"), ("no *.npz files in this folder",))


def test_chunks_close_at_a_byte_budget() -> None:
    items = [discovery.Found(f"{i}.npz", n) for i, n in enumerate([1, 1, 30, 1, 1, 1])]
    sizes = [len(c) for c in engine.chunks(items, max_files=4, max_bytes=20)]
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
    monkeypatch.setattr(engine, "CHUNK_FILES", 2)
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)
    for i in range(7):
        trajkit.save(example_rollout(num_steps=i), tmp_path / f"r{i}.npz")
    work = partial(stats.stats_chunk, spec=None, max_bytes=None)
    one = list(engine.run_ordered(work, discovery.discover([str(tmp_path)]), jobs=1))
    two = list(engine.run_ordered(work, discovery.discover([str(tmp_path)]), jobs=2))
    assert repr(one) == repr(two)  # equal, NaNs included
    assert [s.steps for s in one] == [0 + 2, 4 + 6, 8 + 10, 12]  # T * B, two files per chunk


def test_stats_chunk_raises_on_a_refused_path(tmp_path: Path) -> None:
    items = list(discovery.discover([str(tmp_path / "gone.npz")]))
    with pytest.raises(trajkit.RolloutFileError, match=r"gone\.npz: no such file or directory"):
        stats.stats_chunk(items, spec=None, max_bytes=None)


def test_cpu_count() -> None:
    assert engine.cpu_count() >= 1


def _no_pool(*args: object, **kwargs: object) -> None:
    """Stands in for the process pool: starting one fails the test."""
    raise AssertionError("a process pool was started")


def _files(tmp_path: Path, count: int, nbytes: int = 0) -> list[discovery.Found | FileCheck]:
    return [discovery.Found(str(tmp_path / f"{i}.npz"), nbytes) for i in range(count)]


def test_small_work_stays_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30: `--jobs 2` was slower than `--jobs 1` on 200 small files (pool start-up)."""
    monkeypatch.setattr(engine, "_pool", _no_pool)
    monkeypatch.setattr(engine, "CHUNK_FILES", 3)  # many chunks, still small work
    work = partial(check_chunk, spec=None, quick=True, max_bytes=None)
    items = _files(tmp_path, engine.IN_PROCESS_FILES)
    checks = list(engine.run_ordered(work, iter(items), jobs=4))
    assert [c.path for c in checks] == [item.path for item in items]
    assert all(c.problems == ("cannot open: No such file or directory",) for c in checks)


@pytest.mark.parametrize(
    ("count", "nbytes", "by_size"),
    [(engine.IN_PROCESS_FILES + 1, 0, True), (8, engine.IN_PROCESS_BYTES // 4, True)],
)
def test_larger_work_goes_to_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, nbytes: int, by_size: bool
) -> None:
    monkeypatch.setattr(engine, "_pool", _no_pool)
    monkeypatch.setattr(engine, "start_method", lambda: "fork")  # the limits of forked workers
    work = partial(check_chunk, spec=None, quick=not by_size, max_bytes=None)
    with pytest.raises(AssertionError, match="a process pool was started"):
        next(
            engine.run_ordered(work, iter(_files(tmp_path, count, nbytes)), jobs=2, by_size=by_size)
        )
    # Bytes count only for work whose cost grows with the file's size.
    small = _files(tmp_path, 8, engine.IN_PROCESS_BYTES)
    assert len(list(engine.run_ordered(work, iter(small), jobs=2, by_size=False))) == 8


def test_one_job_never_looks_ahead(tmp_path: Path) -> None:
    def items() -> Iterator[discovery.Found | FileCheck]:
        yield from _files(tmp_path, engine.CHUNK_FILES)
        raise AssertionError("read past the first chunk")

    work = partial(check_chunk, spec=None, quick=True, max_bytes=None)
    first = next(engine.run_ordered(work, items(), jobs=1))
    assert first.path == str(tmp_path / "0.npz")
