"""trajkit.arrow: rollouts to Arrow tables and Parquet files and back, losslessly."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import trajkit  # noqa: E402
import trajkit.arrow as ta  # noqa: E402
from trajkit.arrow import _export  # noqa: E402
from trajkit.arrow._export import EpisodeIds, episode_ids  # noqa: E402
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts  # noqa: E402


@settings(max_examples=40)
@given(rollouts(action_kinds=ACTION_KINDS, nested=None, truncation=None, min_steps=1))
def test_tables_round_trip_every_rollout(r: trajkit.Rollout) -> None:
    for table in (ta.to_arrow(r), ta.to_arrow(r, tensor_type="extension")):
        for layout_from in (table, table.replace_schema_metadata(None)):
            back = ta.from_arrow(layout_from)
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
    assert table.num_rows == 6  # one row per transition
    assert table.column_names == [
        "rollout", "step", "env", "episode_id", "obs", "action", "reward", "terminated",
        "truncated", "next_obs", "is_first", "final_value", "out.critic", "out.log_probs",
        "out.actor", "state", "next_action", "next_out.critic", "next_out.log_probs",
        "next_out.actor", "next_state", "info", "trajkit_layout",
    ]  # fmt: skip
    rows = table.to_pylist()
    assert [(row["step"], row["env"]) for row in rows[:3]] == [(0, 0), (0, 1), (1, 0)]
    assert rows[0]["reward"] == pytest.approx(float(r.rews[0, 0]))
    cell = pa.list_(pa.list_(pa.float32(), 3), 2)  # nested fixed-size lists, [2, 3]
    assert table.schema.field("obs").type == cell
    assert table.schema.field("next_obs").type == cell
    obs = np.array(table.column("obs").to_pylist(), np.float32)
    np.testing.assert_array_equal(obs.reshape(3, 2, 2, 3), r.obses[:3])
    after = np.array(table.column("next_obs").to_pylist(), np.float32)
    np.testing.assert_array_equal(after.reshape(3, 2, 2, 3), r.obses[1:])  # row T: bootstrap
    np.testing.assert_array_equal(
        np.array(table.column("next_out.critic").to_pylist()).reshape(3, 2),
        r.model_outs.arrays["critic"][1:],
    )
    ends = r.dones[1:] == 1
    cut = r.truncated == 1
    terminated = np.array(table.column("terminated").to_pylist()).reshape(3, 2)
    truncated = np.array(table.column("truncated").to_pylist()).reshape(3, 2)
    np.testing.assert_array_equal(terminated, ends & ~cut)
    np.testing.assert_array_equal(truncated, ends & cut)
    firsts = np.array(table.column("is_first").to_pylist()).reshape(3, 2)
    np.testing.assert_array_equal(firsts, r.dones[:3] == 1)
    assert table.schema.field("state").type == pa.list_(pa.float32(), 2)
    layout = table.column("trajkit_layout").to_pylist()
    assert layout[0] == table.schema.metadata[b"trajkit"].decode()
    assert layout[1:] == [None] * 5
    bare = r.replace(states=np.zeros((4, 2, 0)))
    assert "state" not in ta.to_arrow(bare).column_names  # empty states are left out
    assert ta.from_arrow(ta.to_arrow(bare)) == bare
    extension = ta.to_arrow(r, tensor_type="extension")
    assert extension.schema.field("obs").type == pa.fixed_shape_tensor(pa.float32(), [2, 3])


def test_to_arrow_refuses_what_it_cannot_hold() -> None:
    r = example_rollout(num_steps=2, num_envs=2)
    with pytest.raises(ValueError, match=r"^the rollout has no steps \(T = 0\): the table has"):
        ta.to_arrow(_first_rows(r, 0))
    with pytest.raises(ValueError, match=r"^tensor_type must be 'list' or 'extension', got 'x'$"):
        ta.to_arrow(r, tensor_type="x")  # type: ignore[arg-type]
    clash = r.replace(obses={"a.b": r.obses, "a": {"b": r.obses}})
    with pytest.raises(
        ValueError, match=r"^two leaves of the rollout would both be column 'obs.a.b'"
    ):
        ta.to_arrow(clash)


def _first_rows(r: trajkit.Rollout, steps: int) -> trajkit.Rollout:
    """The first `steps` steps of `r` (rows 0..steps)."""
    cut = trajkit._core.tree.map_leaves
    return trajkit.Rollout(
        states=cut(lambda leaf: leaf[: steps + 1], r.states),
        obses=cut(lambda leaf: leaf[: steps + 1], r.obses),
        rews=r.rews[:steps],
        dones=r.dones[: steps + 1],
        infos=None,
        model_outs={k: v[: steps + 1] for k, v in r.model_outs.arrays.items()},
    )


def test_episode_ids_run_across_consecutive_rollouts() -> None:
    a = example_rollout(num_steps=3, num_envs=2, seed=0)
    a = a.replace(dones=np.array([[1, 1], [0, 1], [1, 0], [0, 1]], np.float32))
    b = example_rollout(num_steps=2, num_envs=2, seed=1)
    b = b.replace(dones=np.array([[0, 1], [0, 0], [1, 0]], np.float32))  # env 0 goes on
    c = example_rollout(num_steps=2, num_envs=3, seed=2, done_prob=0.0)
    c = c.replace(dones=np.zeros((3, 3), np.float32))  # another B: nothing carried over
    ids = episode_ids([a, b, c])
    assert ids[0].tolist() == [[0, 2], [0, 3], [1, 3]]
    assert ids[1].tolist() == [[1, 4], [1, 4]]  # env 0 keeps 1; env 1 ended at a's last step
    assert ids[2][0].tolist() == [5, 6, 7]
    alone = ta.to_arrow(b).column("episode_id").to_pylist()
    assert alone == [0, 1, 0, 1]  # a table of one rollout numbers its own


def reference_ids(all_dones: list[Any]) -> list[Any]:
    """write_parquet's numbering, one cell at a time: env by env, carried across rollouts."""
    next_id, running, out = 0, None, []
    for dones in all_dones:
        T, B = dones.shape[0] - 1, dones.shape[1]
        ids = np.zeros((T, B), np.int64)
        for b in range(B):
            carried = running is not None and len(running) == B and running[b] >= 0
            carried = carried and dones[0, b] != 1
            current = running[b] if carried and running is not None else -1
            for t in range(T):
                if (t == 0 and not carried) or (t > 0 and dones[t, b] == 1):
                    current, next_id = next_id, next_id + 1
                ids[t, b] = current
        running = [-1 if dones[T, b] == 1 else int(ids[T - 1, b]) for b in range(B)]
        out.append(ids)
    return out


@st.composite
def _dones_and_splits(draw: st.DrawFn) -> tuple[list[Any], list[list[int]]]:
    all_dones, splits = [], []
    for _ in range(draw(st.integers(1, 4))):
        T, B = draw(st.integers(1, 6)), draw(st.sampled_from([1, 2, 3]))
        flags = draw(st.lists(st.booleans(), min_size=(T + 1) * B, max_size=(T + 1) * B))
        all_dones.append(np.array(flags, np.float32).reshape(T + 1, B))
        cuts = draw(st.lists(st.integers(1, T * B), max_size=4))
        splits.append(sorted({0, T * B, *cuts}))
    return all_dones, splits


@pytest.mark.parametrize("in_32", [_export.COUNT_IN_32, 1], ids=["32 bits", "64 bits"])
@settings(max_examples=200, deadline=None)
@given(_dones_and_splits())
def test_episode_ids_in_blocks_of_rows_are_the_reference_numbering(
    in_32: int, case: tuple[list[Any], list[list[int]]]
) -> None:
    # Blocks of more than `in_32` steps count their new ids in 64 bits: both sides agree.
    all_dones, splits = case
    numbering = EpisodeIds()
    with mock.patch.object(_export, "COUNT_IN_32", in_32):
        for dones, bounds, expected in zip(
            all_dones, splits, reference_ids(all_dones), strict=True
        ):
            ids = numbering.next(dones)
            got = [ids.rows(a, b) for a, b in itertools.pairwise(bounds)]
            np.testing.assert_array_equal(np.concatenate(got), expected.reshape(-1))
            again = ids.steps(0, dones.shape[0] - 1)
            np.testing.assert_array_equal(again, expected)
            assert again.dtype == np.int64


@settings(max_examples=200, deadline=None)
@given(_dones_and_splits())
def test_ids_settle_into_the_id_a_step_before_plus_each_new_episode(
    case: tuple[list[Any], list[list[int]]],
) -> None:
    # From `settled()` on, an env's id is its id a step before plus 1 where `dones` starts
    # an episode (what the reader checks there).
    all_dones, _ = case
    numbering = EpisodeIds()
    for dones, expected in zip(all_dones, reference_ids(all_dones), strict=True):
        settled = numbering.next(dones).settled()
        T = dones.shape[0] - 1
        following = expected[1:] == expected[:-1] + (dones[1:T] == 1)
        assert 1 <= settled <= max(1, T)
        assert following[settled - 1 :].all()


def test_a_carried_id_settles_after_its_envs_first_new_episode() -> None:
    numbering = EpisodeIds()
    numbering.next(np.zeros((3, 2), np.float32))  # two episodes going on
    dones = np.zeros((6, 2), np.float32)
    dones[4, 1] = 1  # env 1's carried episode ends at step 3: a new id at step 4
    assert numbering.next(dones).settled() == 5
    assert numbering.next(np.zeros((6, 2), np.float32)).settled() == 1  # none starts one


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
    assert plain.schema.field("obs").type == pa.list_(pa.float32(), 4)
    # Rows of the rollouts interleaved by another tool: each is gathered back by its id.
    mixed = plain.take(np.random.default_rng(1).permutation(plain.num_rows))
    pq.write_table(mixed, tmp_path / "mixed.parquet")
    assert ta.read_parquet(tmp_path / "mixed.parquet") == rs


def test_refusals_say_what_is_wrong(tmp_path: Path) -> None:
    r = example_rollout(num_steps=2, num_envs=2)
    table = ta.to_arrow(r)
    with pytest.raises(ValueError, match=r"^the table has no trajkit layout: neither schema"):
        ta.from_arrow(table.replace_schema_metadata(None).drop_columns(["trajkit_layout"]))
    two = pa.concat_tables([table, ta.to_arrow(r, index=1)])
    with pytest.raises(ValueError, match="the table holds 2 rollouts; split it"):
        ta.from_arrow(two)
    with pytest.raises(ValueError, match=r"the rows are not a full grid of steps 0..1 by envs"):
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
    assert capsys.readouterr().out == f"{out}: 2 rollout(s), 16 rows\n"
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
    assert "plain.parquet: invalid: the table has no trajkit layout" in capsys.readouterr().err


def test_polars_reads_the_parquet_file_as_it_is(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    r = example_rollout(num_steps=3, num_envs=2, nested=True, obs_shape=(2, 3))
    path = tmp_path / "r.parquet"
    ta.write_parquet(r, path)
    frame = pl.read_parquet(path)
    assert frame.height == 6
    np.testing.assert_array_equal(frame["reward"].to_numpy(), r.rews.reshape(-1))
    assert frame["reward"].null_count() == 0


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
