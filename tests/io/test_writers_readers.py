"""What trajkit writes, trajkit reads: every writer against its reader, as properties.

For every writer (`trajkit.save`, `Dataset.append`, `trajkit.arrow.write_parquet` and
`to_arrow`, `trajkit.minari.to_minari`): a valid rollout is written and its reader reads it
back; a rollout broken through a documented way out is refused by the writer with the rule's
message (the first line `revalidate()` gives), and the writer leaves no file, or keeps the
file it would have replaced.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajkit
from trajkit import Rollout, RolloutSpec, RolloutValidationError
from trajkit.dataset import Dataset
from trajkit.testing import ACTION_KINDS, rollouts

pytest.importorskip("pyarrow")
import trajkit.arrow


class Npz:
    """`trajkit.save` and `trajkit.load`."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "r.npz"

    def write(self, r: Rollout) -> None:
        trajkit.save(r, self.path)

    def read(self) -> list[Rollout]:
        return [trajkit.load(self.path)]


class Folder:
    """`Dataset.append` and the dataset's own reading."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "ds"
        self.dataset: Dataset | None = None

    def write(self, r: Rollout) -> None:
        if self.dataset is None:
            self.dataset = Dataset.create(self.path, RolloutSpec.from_rollout(r))
        self.dataset.append(r)

    def read(self) -> list[Rollout]:
        return list(Dataset.open(self.path)) if self.dataset is not None else []


class Parquet:
    """`trajkit.arrow.write_parquet` and `read_parquet`."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "r.parquet"

    def write(self, r: Rollout) -> None:
        trajkit.arrow.write_parquet(r, self.path)

    def read(self) -> list[Rollout]:
        return trajkit.arrow.read_parquet(self.path)


class Table:
    """`trajkit.arrow.to_arrow` (held as a table) and `from_arrow`."""

    def __init__(self, folder: Path) -> None:
        self.table: Any = None

    def write(self, r: Rollout) -> None:
        self.table = trajkit.arrow.to_arrow(r)

    def read(self) -> list[Rollout]:
        return [] if self.table is None else [trajkit.arrow.from_arrow(self.table)]


WRITERS: dict[str, Callable[[Path], Any]] = {
    "save": Npz,
    "Dataset.append": Folder,
    "write_parquet": Parquet,
    "to_arrow": Table,
}

STRATEGY = rollouts(
    min_steps=1,
    max_steps=5,
    max_envs=3,
    action_kinds=ACTION_KINDS,
    nested=None,
    truncation=None,
    final_obs=None,
)


@pytest.mark.parametrize("writer", sorted(WRITERS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(r=STRATEGY)
def test_each_reader_reads_back_what_its_writer_wrote(writer: str, r: Rollout) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        io = WRITERS[writer](Path(tmp))
        io.write(r)
        assert io.read() == [r]


def _break_rews(r: Rollout, t: int, b: int) -> None:
    storage: Any = r.rews.base  # the storage behind the field
    storage[t, b] = np.nan


def _break_dones(r: Rollout, t: int, b: int) -> None:
    r.dones.flags.writeable = True  # then NumPy's own paths write unchecked
    np.copyto(r.dones[t + 1], 2.0)


def _break_by_at(r: Rollout, t: int, b: int) -> None:
    np.add.at(r.rews, (t, b), np.inf)  # NumPy's `ufunc.at` ignores the read-only flag


def _break_output(r: Rollout, t: int, b: int) -> None:
    key = next(k for k in r.model_outs.arrays if k in ("critic", "log_probs", "actor"))
    storage: Any = r.model_outs.arrays[key].base
    storage[t, b] = np.nan


WAYS_OUT: dict[str, Callable[[Rollout, int, int], None]] = {
    "storage (.base) of a field": _break_rews,
    "flags.writeable then np.copyto": _break_dones,
    "np.add.at on an element": _break_by_at,
    "storage (.base) of a model output": _break_output,
}


@st.composite
def broken(draw: st.DrawFn) -> tuple[Rollout, str, str]:
    r = draw(STRATEGY)
    ways = [w for w in sorted(WAYS_OUT) if "model output" not in w or _has_float_output(r)]
    way = draw(st.sampled_from(ways))
    t = draw(st.integers(0, r.num_steps - 1))
    b = draw(st.integers(0, r.batch_size - 1))
    WAYS_OUT[way](r, t, b)
    with pytest.raises(RolloutValidationError) as info:
        r.revalidate()
    return r, way, str(info.value).splitlines()[0]


def _has_float_output(r: Rollout) -> bool:
    return any(k in ("critic", "log_probs", "actor") for k in r.model_outs.arrays)


@pytest.mark.parametrize("writer", sorted(WRITERS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=STRATEGY, case=broken())
def test_a_rollout_broken_through_a_way_out_is_refused_and_nothing_is_lost(
    writer: str, old: Rollout, case: tuple[Rollout, str, str]
) -> None:
    r, way, message = case
    with tempfile.TemporaryDirectory() as tmp:
        io = WRITERS[writer](Path(tmp))
        io.write(old)
        listing = sorted(str(p) for p in Path(tmp).rglob("*"))
        with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
            io.write(r)
        assert sorted(str(p) for p in Path(tmp).rglob("*")) == listing, way  # nothing new
        assert io.read() == [old], way  # the old file, whole


def test_to_minari_reads_back_and_refuses_what_revalidate_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("minari")
    import trajkit.minari
    from trajkit.testing import example_rollout

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    r = example_rollout(num_steps=6, num_envs=2, keys={"actions", "critic"}, seed=4)
    dataset = trajkit.minari.to_minari(r, "trajkit/good-v0")
    back = trajkit.minari.from_minari(dataset)
    assert sum(x.num_steps for x in back) == r.num_steps * r.batch_size
    assert sum(float(x.rews.sum()) for x in back) == pytest.approx(float(r.rews.sum()))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for way, breaks in WAYS_OUT.items():
        broken_r = r.copy()
        breaks(broken_r, 2, 1)
        with pytest.raises(RolloutValidationError) as info:
            broken_r.revalidate()
        message = str(info.value).splitlines()[0]
        with pytest.raises(ValueError, match=f"^{re.escape(message)}"):
            trajkit.minari.to_minari(broken_r, "trajkit/broken-v0")
        assert sorted(p.name for p in tmp_path.rglob("*")) == before, way
