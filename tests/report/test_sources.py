"""The report's sources: a Parquet file or a Minari dataset is spilled one rollout at a time.

Bounded memory is pinned without timing: whenever the reader is asked for the next rollout,
the rollouts it gave before are no longer alive (weak references to their arrays).
"""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from trajkit._io.filecheck import FileCheck
from trajkit.report import _sources
from trajkit.report._sources import open_inputs
from trajkit.testing import example_rollout


def _spy_on_reads(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Wrap the reader `module.name`; per rollout asked for, how many earlier ones are alive."""
    held: list[int] = []
    original = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Iterator[trajkit.Rollout]:
        alive: list[weakref.ref[Any]] = []
        rollouts = original(*args, **kwargs)
        while True:
            gc.collect()
            held.append(sum(ref() is not None for ref in alive))
            r = next(rollouts, None)
            if r is None:
                return
            alive.append(weakref.ref(_root(r.rews)))
            yield r
            del r

    monkeypatch.setattr(module, name, counted)
    return held


def _root(array: Any) -> Any:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def test_a_parquet_file_is_spilled_one_rollout_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrow = pytest.importorskip("trajkit.arrow")
    rs = [example_rollout(num_steps=6 + s, num_envs=2, seed=s) for s in range(5)]
    arrow.write_parquet(rs, tmp_path / "runs.parquet", row_group_bytes=200)
    held = _spy_on_reads(monkeypatch, arrow, "iter_parquet")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    inputs = open_inputs([str(tmp_path / "runs.parquet")], str(scratch))
    assert held == [0] * 6  # each rollout let go before the next is read
    assert [trajkit.load(item.path) for item in inputs.items()] == rs
    assert inputs.notes == [
        {"kind": "Parquet file", "source": str(tmp_path / "runs.parquet"), "rollouts": 5}
    ]


def test_a_parquet_file_refused_midway_is_one_invalid_file(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    arrow = pytest.importorskip("trajkit.arrow")
    rs = [example_rollout(num_steps=8, num_envs=2, seed=s) for s in range(3)]
    arrow.write_parquet(rs, tmp_path / "runs.parquet")
    table = pq.read_table(tmp_path / "runs.parquet")
    rewards = table.column("reward").to_numpy().copy()
    rewards[-1] = np.inf  # the last rollout's last reward
    i = table.column_names.index("reward")
    table = table.set_column(i, "reward", pa.array(rewards, pa.float32()))
    pq.write_table(table, tmp_path / "bad.parquet")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    inputs = open_inputs([str(tmp_path / "bad.parquet")], str(scratch))
    (item,) = inputs.items()
    assert isinstance(item, FileCheck)
    assert item.path == str(tmp_path / "bad.parquet")
    assert item.problems[0].startswith(
        "not readable as a trajkit Parquet file: rews must be finite, got inf"
    )
    assert os.listdir(scratch) == []  # the rollouts spilled before it are removed
    assert inputs.labels == inputs.origins == {}
    assert inputs.notes == []


def test_a_minari_dataset_is_spilled_one_episode_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    minari_module = pytest.importorskip("trajkit.minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    r = example_rollout(num_steps=12, num_envs=3, keys={"actions"}, done_prob=0.0)
    minari_module.to_minari([r], "trajkit/spill-v0")
    held = _spy_on_reads(monkeypatch, minari_module, "iter_minari")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    inputs = open_inputs(["minari:trajkit/spill-v0"], str(scratch))
    assert held == [0] * 4
    assert [trajkit.load(item.path) for item in inputs.items()] == minari_module.from_minari(
        "trajkit/spill-v0"
    )
    assert inputs.notes[0]["episodes"] == 3


def test_a_temporary_file_that_cannot_be_written_is_not_the_sources_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrow = pytest.importorskip("trajkit.arrow")
    arrow.write_parquet([example_rollout(num_steps=4)], tmp_path / "runs.parquet")

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_sources, "save", full)
    with pytest.raises(OSError, match="No space left on device"):
        open_inputs([str(tmp_path / "runs.parquet")], str(tmp_path))
