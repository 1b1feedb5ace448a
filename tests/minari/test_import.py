"""trajkit.minari's import: each episode's structure is checked before its rollout is built.

Datasets are made with Minari's own API (Arrow storage, as `to_minari` writes them), then
edited as a damaged or hand-made dataset would be: the episode files rewritten with pyarrow,
or (for shapes Arrow storage cannot hold, such as a flags array of another length than the
rewards, which HDF5 storage can) the episodes Minari's storage hands back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("minari")
pa = pytest.importorskip("pyarrow")

import gymnasium.spaces as spaces  # noqa: E402

import trajkit.minari as tm  # noqa: E402
from tests.minari.helpers import STEPS, edited, make  # noqa: E402


def _rewrite(root: Path, dataset_id: str, column: str, values: Any) -> None:
    """Replace one column of episode 0's file (its arrays hold one padding row at the end)."""
    path = root / dataset_id / "data" / "0" / "part-0.arrow"
    table = pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all()  # not mapped
    table = table.set_column(table.column_names.index(column), column, values)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def _flags(*set_at: int) -> Any:
    flags = np.zeros(STEPS + 1, bool)
    flags[list(set_at)] = True
    return pa.array(flags)


def test_a_termination_before_the_last_step_is_refused(datasets: Path) -> None:
    make()
    _rewrite(datasets, "test/made-v0", "terminations", _flags(3, STEPS - 1))
    with pytest.raises(
        ValueError,
        match=r"^episode 0: terminations\[3\] is set, before the last step \(7\); only an "
        r"episode's last step may end it$",
    ):
        tm.from_minari("test/made-v0")
    _rewrite(datasets, "test/made-v0", "truncations", _flags(0))
    _rewrite(datasets, "test/made-v0", "terminations", _flags(STEPS - 1))
    with pytest.raises(ValueError, match=r"^episode 0: truncations\[0\] is set, before"):
        tm.from_minari("test/made-v0")


@pytest.mark.parametrize("length", [0, 1, STEPS + 1])
def test_flags_must_be_as_many_as_the_steps(monkeypatch: pytest.MonkeyPatch, length: int) -> None:
    dataset = edited(make(), monkeypatch, terminations=np.ones(length, bool))
    with pytest.raises(
        ValueError,
        match=rf"^episode 0: terminations has shape \({length},\), expected \(8,\): one flag "
        r"per step, as many as actions and rewards$",
    ):
        tm.from_minari(dataset)


def test_flags_other_than_0_and_1_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = edited(make(), monkeypatch, truncations=np.full(STEPS, 2))
    with pytest.raises(ValueError, match=r"^episode 0: truncations must hold only 0 and 1"):
        tm.from_minari(dataset)


def test_actions_must_be_as_many_as_the_rewards(monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = edited(make(), monkeypatch, actions=np.zeros(3, np.int64))
    with pytest.raises(
        ValueError, match=r"^episode 0: 3 actions for 8 rewards; an episode has one action"
    ):
        tm.from_minari(dataset)


def test_terminated_and_truncated_together_count_as_terminated() -> None:
    (back,) = tm.from_minari(make(terminated=True, truncated=True))
    assert back.dones[-1, 0] == 1
    assert back.truncated is not None
    assert not back.truncated.any()  # terminated wins, as the recorder counts it
    stats = back.episode_stats()
    assert (stats.terminations, stats.truncations) == (1, 0)


def test_truncated_and_final_values_are_zeros_when_nothing_was_truncated() -> None:
    (back,) = tm.from_minari(make(terminated=False))
    assert back.truncated is not None
    assert back.final_values is not None
    assert back.truncated.shape == back.final_values.shape == (STEPS, 1)
    assert not back.truncated.any()
    assert not back.final_values.any()
    assert back.dones[-1, 0] == 0
    (cut,) = tm.from_minari(make("test/cut-v0", terminated=False, truncated=True))
    assert cut.truncated is not None
    assert cut.truncated[-1, 0] == 1


def test_observations_are_checked_against_the_observation_space(datasets: Path) -> None:
    make()
    wide = pa.FixedSizeListArray.from_arrays(
        pa.array(np.zeros((STEPS + 1) * 4, np.float32)), 4
    )  # 4 values per row for a (3,) space: Minari reshapes them into 12 rows
    _rewrite(datasets, "test/made-v0", "observations", wide)
    with pytest.raises(
        ValueError,
        match=r"^episode 0: observations have shape \(12, 3\), expected \(9, 3\): 9 rows",
    ):
        tm.from_minari("test/made-v0")


def test_observations_are_stored_in_the_spaces_dtype_without_change(
    datasets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = spaces.Box(0, 255, (2,), np.uint8)
    pixels = np.arange((STEPS + 1) * 2, dtype=np.uint8).reshape(STEPS + 1, 2)
    dataset = make(space=image, observations=pixels)
    (back,) = tm.from_minari(dataset)
    assert back.obses.dtype == np.uint8
    np.testing.assert_array_equal(back.obses[:, 0], pixels)
    wide = pixels.astype(np.int64)
    wide[2, 1] = 300
    with pytest.raises(
        ValueError,
        match=r"^episode 0: observations must fit in uint8 \[0, 255\], got 300 at \(t=2, 1\)",
    ):
        tm.from_minari(edited(dataset, monkeypatch, observations=wide))


def test_non_finite_observations_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = make()
    (ok,) = tm.from_minari(dataset)
    bad = ok.obses[:, 0].copy()
    bad[4, 2] = np.nan
    with pytest.raises(ValueError, match=r"^episode 0: observations must be finite"):
        tm.from_minari(edited(dataset, monkeypatch, observations=bad))


def test_nested_observations_must_match_the_spaces_structure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "n": spaces.Discrete(5)})
    pos, n = np.zeros((STEPS + 1, 2), np.float32), np.arange(STEPS + 1) % 5
    observations = {"pos": pos, "n": n}
    dataset = make(space=space, observations=observations)
    (back,) = tm.from_minari(dataset)
    assert isinstance(back.obses, dict)
    assert back.obses["n"].dtype == np.int64
    with pytest.raises(
        ValueError, match=r"^episode 0: observations have keys \['pos'\], the observation"
    ):
        tm.from_minari(edited(dataset, monkeypatch, observations={"pos": pos}))
    short = {"pos": pos, "n": n[:-1]}
    with pytest.raises(
        ValueError, match=r"^episode 0: observations\['n'\] have shape \(8,\), expected \(9,\)"
    ):
        tm.from_minari(edited(dataset, monkeypatch, observations=short))


def test_rewards_beyond_float32_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    rewards = np.zeros(STEPS)
    rewards[5] = 1e300
    dataset = edited(make(), monkeypatch, rewards=rewards)
    with pytest.raises(ValueError, match=r"^episode 0: rews holds 1e\+300 at \(t=5, b=0\)"):
        tm.from_minari(dataset)
