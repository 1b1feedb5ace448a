"""Transition minibatches from every source: a dataset (streamed), Minari, Parquet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trajkit
from trajkit import transition_minibatches, transitions
from trajkit.dataset import Dataset
from trajkit.testing import example_rollout


def by_obs(batches: list[dict[str, Any]]) -> dict[tuple[float, ...], dict[str, Any]]:
    """Each transition of `batches` keyed by its (unique) observation."""
    out: dict[tuple[float, ...], dict[str, Any]] = {}
    for batch in batches:
        for i in range(len(batch["reward"])):
            key = tuple(batch["obs"][i].tolist())
            assert key not in out
            out[key] = {name: batch[name][i] for name in batch}
    return out


def unique_obs_rollouts(count: int) -> list[trajkit.Rollout]:
    rs = []
    for s in range(count):
        r = example_rollout(5, 2, seed=s, final_obs=True, truncation=True)
        obses = np.arange(6 * 2 * 4, dtype=np.float32).reshape(6, 2, 4) + 1000 * s
        rs.append(r.replace(obses=obses))
    return rs


def test_a_dataset_streams_the_same_transitions_as_the_rollouts_in_memory(
    tmp_path: Path,
) -> None:
    rs = unique_obs_rollouts(5)
    ds = Dataset.write(tmp_path / "ds", rs)
    kw: dict[str, Any] = {"gamma": 0.9, "n_step": 3, "epochs": 2, "seed": 0}
    streamed = list(transition_minibatches(ds, 3, files_per_buffer=2, **kw))
    assert [len(b["reward"]) for b in streamed] == [3] * 16 + [2] + [3] * 16 + [2]
    want = by_obs(list(transition_minibatches(rs, 7, **kw))[:8])
    for epoch in (streamed[:17], streamed[17:]):
        got = by_obs(epoch)
        assert got.keys() == want.keys()
        for key, row in got.items():
            for name, value in row.items():
                np.testing.assert_array_equal(value, want[key][name], err_msg=name)


def test_a_dataset_is_read_memory_mapped_and_its_episode_ids_name_the_file(
    tmp_path: Path,
) -> None:
    rs = unique_obs_rollouts(3)
    ds = Dataset.write(tmp_path / "ds", rs)
    assert not ds[0].obses.flags.writeable  # memory-mapped
    batch = next(trajkit.transition_minibatches(ds, 100, seed=0))
    files = batch["episode"] >> 32
    np.testing.assert_array_equal(files, (batch["obs"][:, 0] // 1000).astype(np.int64))
    assert sorted(set(files.tolist())) == [0, 1, 2]


def test_one_file_per_buffer_still_mixes_the_left_overs(tmp_path: Path) -> None:
    ds = Dataset.write(tmp_path / "ds", unique_obs_rollouts(3))
    batches = list(transition_minibatches(ds, 4, files_per_buffer=1, seed=2, drop_last=True))
    assert [len(b["reward"]) for b in batches] == [4] * 7  # 30 transitions, 2 dropped
    assert any(len(set((b["episode"] >> 32).tolist())) > 1 for b in batches)


def test_a_dataset_file_without_actions_is_refused_when_reached(tmp_path: Path) -> None:
    ds = Dataset.write(tmp_path / "ds", [example_rollout(keys={"critic"})])
    batches = transition_minibatches(ds, 4)  # no error yet: files are read lazily
    with pytest.raises(trajkit.MissingModelOutputError, match="needs model_outs"):
        next(batches)


def test_an_empty_source_yields_nothing(tmp_path: Path) -> None:
    assert list(transition_minibatches([], 4)) == []
    spec = trajkit.RolloutSpec.from_rollout(example_rollout())
    assert list(transition_minibatches(Dataset.create(tmp_path / "ds", spec), 4)) == []


def test_a_parquet_file_gives_the_rollouts_transitions(tmp_path: Path) -> None:
    arrow = pytest.importorskip("trajkit.arrow")
    rs = [example_rollout(6, 2, seed=s, final_obs=True, truncation=True) for s in range(2)]
    arrow.write_parquet(rs, tmp_path / "steps.parquet")
    back = arrow.read_parquet(tmp_path / "steps.parquet")
    for got, want in zip(back, rs, strict=True):
        a, b = transitions(got, gamma=0.9, n_step=2), transitions(want, gamma=0.9, n_step=2)
        for name in b:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    batch = next(transition_minibatches(back, 24, seed=0))
    assert batch["action"].dtype == np.int64


def test_a_minari_import_trains_with_no_critic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    minari = pytest.importorskip("trajkit.minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    r = example_rollout(12, 2, keys={"actions", "critic"}, final_obs=True, truncation=True)
    episodes = minari.from_minari(minari.to_minari([r], "trajkit/transitions-v0"))
    assert "critic" not in episodes[0].model_outs.arrays
    got = list(transition_minibatches(episodes, 5, gamma=0.9, n_step=2, seed=0))
    assert sum(len(b["reward"]) for b in got) == 24
    # The episodes' own transitions, end flags included, are those of the recording.
    ended = sum(int(b["terminated"].sum() + b["truncated"].sum()) for b in got)
    assert ended == int(r.dones[1:].sum())


def test_rollouts_with_and_without_final_observations_mix() -> None:
    with_finals = example_rollout(5, 2, seed=1, final_obs=True)
    without = example_rollout(4, 1, seed=2)
    got = by_obs(list(transition_minibatches([with_finals, without], 3, seed=0)))
    for index, r in enumerate([with_finals, without]):
        for i, obs in enumerate(transitions(r, source=index)["obs"]):
            want = transitions(r, source=index)
            row = got[tuple(obs.tolist())]
            np.testing.assert_array_equal(row["next_obs"], want["next_obs"][i])
            assert row["episode"] == want["episode"][i]


def test_rollouts_of_another_layout_are_refused() -> None:
    other = example_rollout(obs_shape=(3,))
    with pytest.raises(ValueError, match=r"source\[1\] has observations or actions of another"):
        transition_minibatches([example_rollout(), other], 4)


_FRESH = """
import os, sys, tempfile
import trajkit
from trajkit.dataset import Dataset
from trajkit.testing import example_rollout

with tempfile.TemporaryDirectory() as tmp:
    for i in range(2):
        trajkit.save(example_rollout(6, 2, seed=i, keys={"actions"}), os.path.join(tmp, f"{i}.npz"))
    ds = Dataset.adopt(tmp)
    batches = trajkit.transition_minibatches(ds, 10, gamma=0.9, n_step=2, seed=0)
    sizes = [len(b["action"]) for b in batches]
print(sizes, sorted(m for m in ("torch", "ray", "pyarrow", "minari") if m in sys.modules))
"""


def test_adopt_and_transitions_work_in_a_fresh_interpreter() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FRESH], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[10, 10, 4] []"  # and no optional library was imported


class FakeFiles:
    """A `RolloutFiles` source in memory: what `Dataset` offers, without a folder."""

    def __init__(self, rollouts: list[trajkit.Rollout]) -> None:
        self.rollouts = rollouts
        self.loads = 0

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(str(i) for i in range(len(self.rollouts)))

    def load(self, path: str) -> trajkit.Rollout:
        self.loads += 1
        return self.rollouts[int(path)]


@settings(max_examples=30, deadline=None)
@given(
    count=st.integers(1, 5),
    per_buffer=st.integers(1, 6),
    size=st.integers(1, 40),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_any_shuffle_buffer_gives_every_transition_once_per_epoch(
    count: int, per_buffer: int, size: int, drop_last: bool, seed: int
) -> None:
    rs = unique_obs_rollouts(count)
    source = FakeFiles(rs)
    kw: dict[str, Any] = {"gamma": 0.8, "n_step": 2, "seed": seed, "drop_last": drop_last}
    batches = list(transition_minibatches(source, size, files_per_buffer=per_buffer, **kw))
    n = 10 * count
    assert [len(b["reward"]) for b in batches] == [size] * (n // size) + (
        [] if drop_last or n % size == 0 else [n % size]
    )
    assert source.loads == count  # each file loaded once per epoch
    want = by_obs(list(transition_minibatches(rs, n, **{**kw, "drop_last": False})))
    got = by_obs(batches)
    assert set(got) <= set(want)
    assert len(got) == len(want) - (n % size if drop_last else 0)
    for key, row in got.items():
        for name, value in row.items():
            np.testing.assert_array_equal(value, want[key][name], err_msg=name)
