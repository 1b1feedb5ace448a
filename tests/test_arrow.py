"""trajkit.arrow: rollouts to Arrow tables and Parquet files and back, losslessly."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import trajkit  # noqa: E402
import trajkit.arrow as ta  # noqa: E402
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts  # noqa: E402


@settings(max_examples=40)
@given(rollouts(action_kinds=ACTION_KINDS, nested=None, truncation=None))
def test_tables_round_trip_every_rollout(r: trajkit.Rollout) -> None:
    back = ta.from_arrow(ta.to_arrow(r))
    assert back == r
    for name in ("obses", "states"):
        for (_, a), (_, b) in zip(
            trajkit._core.tree.flatten(getattr(r, name)),
            trajkit._core.tree.flatten(getattr(back, name)),
            strict=True,
        ):
            assert a.dtype == b.dtype
            assert a.shape == b.shape


def test_the_columns_are_what_the_layout_says() -> None:
    r = example_rollout(num_steps=3, num_envs=2, truncation=True, seed=1, obs_shape=(2, 3))
    table = ta.to_arrow(r)
    assert table.num_rows == 8
    rows = table.to_pylist()
    assert [(row["step"], row["env"]) for row in rows[:3]] == [(0, 0), (0, 1), (1, 0)]
    assert [row["bootstrap"] for row in rows] == [False] * 6 + [True] * 2
    assert rows[-1]["reward"] is None
    assert rows[-1]["terminated"] is None
    assert rows[0]["reward"] == pytest.approx(float(r.rews[0, 0]))
    assert table.schema.field("obs").type == pa.fixed_shape_tensor(pa.float32(), [2, 3])
    obs = table.column("obs").combine_chunks().to_numpy_ndarray()
    np.testing.assert_array_equal(obs.reshape(4, 2, 2, 3), r.obses)
    ends = r.dones[1:] == 1
    cut = r.truncated == 1
    terminated = np.array([row["terminated"] for row in rows[:6]]).reshape(3, 2)
    truncated = np.array([row["truncated"] for row in rows[:6]]).reshape(3, 2)
    np.testing.assert_array_equal(terminated, ends & ~cut)
    np.testing.assert_array_equal(truncated, ends & cut)
    assert table.schema.field("state").type == pa.fixed_shape_tensor(pa.float32(), [2])
    bare = r.replace(states=np.zeros((4, 2, 0)))
    assert "state" not in ta.to_arrow(bare).column_names  # empty states are left out


def test_episode_ids_are_unique_within_the_rollout() -> None:
    dones = np.array([[1, 1], [0, 1], [1, 0], [0, 0]], np.float32)
    ids = ta._episode_ids(dones)
    assert ids.tolist() == [[0, 2], [0, 3], [1, 3], [1, 3]]


def test_infos_are_json_strings_and_absent_infos_are_nulls() -> None:
    r = example_rollout(num_steps=2, num_envs=2)
    table = ta.to_arrow(r)
    assert table.column("info").to_pylist()[:2] == ['{"t": 0, "env": 0}', '{"t": 0, "env": 1}']
    bare = trajkit.Rollout(r.states, r.obses, r.rews, r.dones, None, r.model_outs)
    table = ta.to_arrow(bare)
    assert table.column("info").null_count == table.num_rows
    assert ta.from_arrow(table) == bare


def test_rows_in_any_order_give_the_same_rollout() -> None:
    r = example_rollout(num_steps=5, num_envs=3, nested=True, action_kind="box")
    table = ta.to_arrow(r)
    shuffled = table.take(np.random.default_rng(0).permutation(table.num_rows))
    assert ta.from_arrow(shuffled) == r


def test_parquet_holds_several_rollouts(tmp_path: Path) -> None:
    rs = [example_rollout(num_steps=4 + i, num_envs=2 + i, seed=i) for i in range(3)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, compression="zstd")
    assert ta.read_parquet(path) == rs
    plain = pq.read_table(path)  # readable as-is, without trajkit
    assert sorted(set(plain.column("rollout").to_pylist())) == [0, 1, 2]
    assert plain.schema.field("obs").type.extension_name == "arrow.fixed_shape_tensor"
    # Rows of the rollouts interleaved by another tool: each is gathered back by its id.
    mixed = plain.take(np.random.default_rng(1).permutation(plain.num_rows))
    pq.write_table(mixed, tmp_path / "mixed.parquet")
    assert ta.read_parquet(tmp_path / "mixed.parquet") == rs


def test_refusals_say_what_is_wrong(tmp_path: Path) -> None:
    r = example_rollout(num_steps=2, num_envs=2)
    table = ta.to_arrow(r)
    with pytest.raises(ValueError, match="the table has no trajkit metadata"):
        ta.from_arrow(table.replace_schema_metadata(None))
    two = pa.concat_tables([table, ta.to_arrow(r, index=1)])
    with pytest.raises(ValueError, match="the table holds 2 rollouts; split it"):
        ta.from_arrow(two)
    with pytest.raises(ValueError, match=r"the rows are not a full grid of steps 0..2 by envs"):
        ta.from_arrow(table.slice(1))
    with pytest.raises(ValueError, match="rollout 1 differs in structure from rollout 0"):
        ta.write_parquet(
            [r, example_rollout(num_steps=2, num_envs=2, obs_shape=(3,))], tmp_path / "x"
        )
    with pytest.raises(ValueError, match="write_parquet needs at least one rollout"):
        ta.write_parquet([], tmp_path / "y")
    with pytest.raises(ValueError, match="the table has no column 'reward'"):
        ta.from_arrow(table.drop_columns(["reward"]))


def test_export_and_import_commands_round_trip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trajkit.cli import main

    rs = [example_rollout(num_steps=4, num_envs=2, seed=s, nested=True) for s in range(2)]
    paths = []
    for i, r in enumerate(rs):
        paths.append(str(tmp_path / f"r{i}.npz"))
        trajkit.save(r, paths[-1])
    out = tmp_path / "runs.parquet"
    assert main(["export", *paths, "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"{out}: 2 rollout(s), 20 rows\n"
    assert main(["import", str(out), "--out", str(tmp_path / "back")]) == 0
    written = capsys.readouterr().out.split()
    assert [Path(p).name for p in written] == ["rollout-00000.npz", "rollout-00001.npz"]
    assert [trajkit.load(p) for p in written] == rs


def test_export_and_import_refuse_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trajkit.cli import main

    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    assert main(["export", str(bad), "--out", str(tmp_path / "x.parquet")]) == 1
    assert "bad.npz: invalid:" in capsys.readouterr().err
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), plain)
    assert main(["import", str(plain), "--out", str(tmp_path / "y")]) == 1
    assert "plain.parquet: invalid: the table has no trajkit metadata" in capsys.readouterr().err


def test_polars_reads_the_parquet_file_as_it_is(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    r = example_rollout(num_steps=3, num_envs=2, nested=True, obs_shape=(2, 3))
    path = tmp_path / "r.parquet"
    ta.write_parquet(r, path)
    frame = pl.read_parquet(path)
    assert frame.height == 8
    rewards = frame.filter(~pl.col("bootstrap"))["reward"].to_numpy()
    np.testing.assert_array_equal(rewards, r.rews.reshape(-1))
    assert frame.filter(pl.col("bootstrap"))["reward"].null_count() == 2


@pytest.mark.parametrize("module", ["pyarrow", "matplotlib"])
def test_commands_without_their_extra_say_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, module: str
) -> None:
    from trajkit.cli import main

    path = tmp_path / "r.npz"
    trajkit.save(example_rollout(), path)
    for name in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    command = ["export", str(path), "--out", str(tmp_path / "x.parquet")]
    if module == "matplotlib":
        command = ["plot", str(path), "--out", str(tmp_path / "plots")]
    assert main(command) == 2
    extra = "arrow" if module == "pyarrow" else "plot"
    err = capsys.readouterr().err
    assert f"trajkit {command[0]}: error: " in err
    assert f"pip install 'trajkit[{extra}]'" in err


def test_infos_are_converted_and_checked_as_save_does() -> None:
    r = example_rollout(num_steps=2, num_envs=2)
    infos: list[list[dict[str, Any]]] = [
        [{}, {"lives": np.int64(2), "ok": np.bool_(True)}],
        [{}, {}],
    ]
    table = ta.to_arrow(r.replace(infos=infos))
    assert table.column("info").to_pylist()[1] == '{"lives": 2, "ok": true}'
    with pytest.raises(ValueError, match=r"infos\[1\]\[0\]\['pos'\] is a numpy array"):
        ta.to_arrow(r.replace(infos=[[{}, {}], [{"pos": np.zeros(2)}, {}]]))
    with pytest.raises(ValueError, match=r"infos\[0\]\[1\]\['s'\]"):
        ta.to_arrow(r.replace(infos=[[{}, {"s": "\ud800"}], [{}, {}]]))
