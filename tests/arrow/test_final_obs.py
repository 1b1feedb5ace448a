"""The Arrow layout's `final_obs`: `next_obs` holds the true final observation at episode ends."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="trajkit.arrow needs pyarrow (trajkit[arrow])")
pq = pytest.importorskip("pyarrow.parquet")

import trajkit  # noqa: E402
import trajkit.arrow as ta  # noqa: E402
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts  # noqa: E402


def rollout(**kwargs: Any) -> trajkit.Rollout:
    base = {"num_steps": 8, "num_envs": 3, "done_prob": 0.3, "truncation": True, "seed": 2}
    return example_rollout(**{**base, **kwargs}, final_obs=True)


def layout(table: Any) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(table.schema.metadata[b"trajkit"])
    return loaded


def with_column(table: Any, name: str, values: list[Any]) -> Any:
    i = table.column_names.index(name)
    return table.set_column(i, name, pa.array(values, table.schema.field(name).type))


@given(
    rollouts(action_kinds=ACTION_KINDS, nested=None, truncation=None, min_steps=1, final_obs=True),
    st.sampled_from(["list", "extension"]),
)
def test_every_rollout_with_final_observations_round_trips(
    r: trajkit.Rollout, tensor_type: str
) -> None:
    assert ta.from_arrow(ta.to_arrow(r, tensor_type=tensor_type)) == r  # type: ignore[arg-type]


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("tensor_type", ["list", "extension"])
def test_final_observations_round_trip(nested: bool, tensor_type: str) -> None:
    r = rollout(nested=nested)
    table = ta.to_arrow(r, tensor_type=tensor_type)  # type: ignore[arg-type]
    assert layout(table)["final_obs"] is True
    assert ta.from_arrow(table) == r
    assert ta.from_arrow(pa.Table.from_pylist(table.to_pylist(), table.schema)) == r


def test_next_obs_holds_the_final_observation_and_reset_obs_what_came_after() -> None:
    r = rollout()
    table = ta.to_arrow(r)
    T, B = r.num_steps, r.batch_size
    ends = (r.dones[1:] == 1).reshape(-1)
    assert ends.any()
    nxt = np.array(table.column("next_obs").to_pylist(), np.float32).reshape(T, B, -1)
    np.testing.assert_array_equal(nxt, r.next_obses())
    reset = np.array(table.column("reset_obs").to_pylist(), np.float32)  # no nulls (HF datasets)
    np.testing.assert_array_equal(reset, r.obses[1:].reshape(T * B, -1))


def test_reset_obs_as_trajkit_wrote_it_before_values_at_ends_only_reads_back() -> None:
    r = rollout()
    assert ta.from_arrow(_legacy(ta.to_arrow(r), r)) == r


def _legacy(table: Any, r: trajkit.Rollout) -> Any:
    """`table` with `reset_obs` null but at episode ends, as trajkit wrote it before."""
    ends = (r.dones[1:] == 1).reshape(-1)
    reset = table.column("reset_obs").to_pylist()
    return with_column(
        table, "reset_obs", [v if e else None for v, e in zip(reset, ends, strict=True)]
    )


def test_without_final_obses_the_layout_is_as_before() -> None:
    r = example_rollout(num_steps=8, num_envs=3, done_prob=0.3)
    table = ta.to_arrow(r)
    assert "final_obs" not in layout(table)
    assert "reset_obs" not in table.column_names
    np.testing.assert_array_equal(
        np.array(table.column("next_obs").to_pylist(), np.float32).reshape(8, 3, -1), r.obses[1:]
    )


def test_parquet_files_and_their_rewrites_keep_the_final_observations(tmp_path: Path) -> None:
    r = rollout(nested=True)
    ta.write_parquet([r, r], tmp_path / "runs.parquet")
    assert ta.read_parquet(tmp_path / "runs.parquet") == [r, r]
    pl = pytest.importorskip("polars", reason="polars is in trajkit's dev extras")
    pl.read_parquet(tmp_path / "runs.parquet").write_parquet(tmp_path / "polars.parquet")
    assert ta.read_parquet(tmp_path / "polars.parquet") == [r, r]
    duckdb = pytest.importorskip("duckdb", reason="duckdb is in trajkit's dev extras")
    source, copy = tmp_path / "runs.parquet", tmp_path / "duckdb.parquet"
    duckdb.sql(f"COPY (SELECT * FROM '{source}') TO '{copy}' (FORMAT parquet)")
    assert ta.read_parquet(copy) == [r, r]
    datasets = pytest.importorskip("datasets", reason="datasets is in trajkit's dev extras")
    data = datasets.Dataset.from_parquet(str(source), cache_dir=str(tmp_path / "cache"))
    data.to_parquet(str(tmp_path / "hf.parquet"))
    assert ta.read_parquet(tmp_path / "hf.parquet") == [r, r]


def _end_and_other(r: trajkit.Rollout) -> tuple[int, int]:
    """A row (t * B + b) whose step ends an episode before the last step, and one that does not."""
    ends = r.dones[1:] == 1
    ends[-1] = False
    end = int(np.flatnonzero(ends.reshape(-1))[0])
    other = int(np.flatnonzero(~(r.dones[1:] == 1).reshape(-1))[0])
    return end, other


def test_next_obs_may_differ_from_the_next_row_only_at_ends_and_only_under_final_obs() -> None:
    r = rollout()
    table = ta.to_arrow(r)
    end, other = _end_and_other(r)
    next_obs = table.column("next_obs").to_pylist()
    moved = list(next_obs)
    moved[other] = [v + 1.0 for v in moved[other]]
    t, b = divmod(other, r.batch_size)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"column 'next_obs' contradicts column 'obs': it holds at step {t}, env {b} another "
            f"value than 'obs' at step {t + 1} (the values after a step are those of the next "
            "step, but at an episode end ('final_obs': true in the layout))"
        ),
    ):
        ta.from_arrow(with_column(table, "next_obs", moved))
    # Without the layout's final_obs, the final observation at an end is a contradiction.
    plain = ta.to_arrow(r.replace(final_obses=None))
    t, b = divmod(end, r.batch_size)
    finals = list(plain.column("next_obs").to_pylist())
    finals[end] = next_obs[end]
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"column 'next_obs' contradicts column 'obs': it holds at step {t}, env {b} another "
            f"value than 'obs' at step {t + 1} (the values after a step are those of the next "
            "step)"
        ),
    ):
        ta.from_arrow(with_column(plain, "next_obs", finals))


def test_every_reset_obs_refusal_is_pinned() -> None:
    r = rollout()
    table = _legacy(ta.to_arrow(r), r)
    end, other = _end_and_other(r)
    B = r.batch_size
    reset = table.column("reset_obs").to_pylist()
    missing = list(reset)
    missing[end] = None
    t, b = divmod(end, B)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"column 'reset_obs' is null at step {t}, env {b} (row {end}), an episode end (the "
            "layout's 'final_obs': true puts a value there at every step, or, as earlier "
            "trajkit versions wrote it, exactly at episode ends)"
        ),
    ):
        ta.from_arrow(with_column(table, "reset_obs", missing))
    extra = list(reset)
    extra[other] = [0.0] * 4
    t, b = divmod(other, B)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"column 'reset_obs' holds a value at step {t}, env {b} (row {other}), which is no "
            "episode end"
        ),
    ):
        ta.from_arrow(with_column(table, "reset_obs", extra))
    wrong = list(reset)
    wrong[end] = [v + 1.0 for v in wrong[end]]
    t, b = divmod(end, B)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"column 'reset_obs' contradicts column 'obs': it holds at step {t}, env {b} another "
            f"value than 'obs' at step {t + 1}"
        ),
    ):
        ta.from_arrow(with_column(table, "reset_obs", wrong))
    with pytest.raises(ValueError, match="has no column 'reset_obs', which trajkit's layout needs"):
        ta.from_arrow(table.drop_columns(["reset_obs"]))


def test_a_bad_final_obs_flag_is_refused() -> None:
    table = ta.to_arrow(rollout())
    bad = json.dumps({**layout(table), "final_obs": "yes"})
    rows = [bad] + [None] * (table.num_rows - 1)
    table = with_column(table, "trajkit_layout", rows)
    table = table.replace_schema_metadata({b"trajkit": bad.encode()})
    with pytest.raises(ValueError, match=re.escape("'final_obs' must be true or false")):
        ta.from_arrow(table)


def test_a_recording_exports_the_envs_final_observations(tmp_path: Path) -> None:
    gym = pytest.importorskip("gymnasium")
    from trajkit.gym import RolloutRecorder

    env = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", max_episode_steps=9)
    try:
        recorder = RolloutRecorder(
            env, lambda obs: {"actions": (obs[:, 2] > 0).astype(np.int64)}, seed=3
        )
        parts = [recorder.record(20), recorder.record(20)]
    finally:
        env.close()
    ta.write_parquet(parts, tmp_path / "cartpole.parquet")
    table = pq.read_table(tmp_path / "cartpole.parquet")
    ended = np.array(table.column("terminated").to_pylist()) | np.array(
        table.column("truncated").to_pylist()
    )
    nxt = np.array(table.column("next_obs").to_pylist(), np.float32)
    want = np.concatenate([p.next_obses().reshape(-1, 4) for p in parts])
    assert ended.any()
    np.testing.assert_array_equal(nxt, want)
    assert ta.read_parquet(tmp_path / "cartpole.parquet") == parts
