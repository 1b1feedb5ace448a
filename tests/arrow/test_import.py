"""trajkit.arrow's import side: every malformed table is refused by name, or read exactly.

Each refusal of `from_arrow` and `read_parquet` is pinned by its message; a Hypothesis fuzz
mutates valid tables (columns dropped or retyped, cells nulled, rows filtered, duplicated or
renumbered, metadata edited) and checks that the original rollout comes back or a
`ValueError` is raised, nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pc = pytest.importorskip("pyarrow.compute")

import trajkit  # noqa: E402
import trajkit.arrow as ta  # noqa: E402
from tests.arrow.helpers import (  # noqa: E402
    SAMPLES,
    layout_of,
    mutations,
    nulled,
    with_column,
    with_layout,
)
from trajkit.arrow import _import  # noqa: E402
from trajkit.testing import example_rollout  # noqa: E402


def _table(**kwargs: Any) -> Any:
    return ta.to_arrow(example_rollout(num_steps=3, num_envs=2, **kwargs))


def _refused(table: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ta.from_arrow(table)


# ------------------------------------------------------------------------------- columns


@pytest.mark.parametrize("name", ["rollout", "step", "env", "episode_id", "is_first", "info"])
def test_a_missing_column_is_named(name: str) -> None:
    _refused(
        _table().drop_columns([name]),
        f"^the table has no column '{name}', which trajkit's layout needs$",
    )


def test_a_leaf_or_output_column_the_metadata_names_must_be_there() -> None:
    _refused(_table().drop_columns(["out.critic"]), "no column 'out.critic'")
    _refused(_table().drop_columns(["next_action"]), "no column 'next_action'")
    _refused(_table(nested=True).drop_columns(["obs.image"]), "no column 'obs.image'")
    _refused(_table(nested=True).drop_columns(["next_obs.image"]), "no column 'next_obs.image'")
    _refused(_table(truncation=True).drop_columns(["final_value"]), "no column 'final_value'")


def test_columns_the_layout_does_not_name_are_refused_not_dropped() -> None:
    table = _table()
    _refused(
        table.append_column("obs.extra", pa.array(np.zeros(table.num_rows))),
        r"^the table has a column 'obs.extra', but trajkit's layout does not name it; drop it "
        r"or fix the layout \(trajkit does not drop data",
    )
    _refused(
        table.append_column("final_value", pa.array(np.zeros(table.num_rows, np.float32))),
        r"column 'final_value', but the layout says the rollout has no truncations",
    )
    twice = pa.Table.from_arrays(
        [*table.columns, table.column("reward")], [*table.column_names, "reward"]
    ).replace_schema_metadata(table.schema.metadata)
    _refused(twice, "^the table has two columns named 'reward'$")


@pytest.mark.parametrize(
    ("name", "type_", "match"),
    [
        ("step", pa.float64(), "column 'step' has type double; it holds integer indices"),
        ("rollout", pa.string(), "column 'rollout' has type string; it holds integer indices"),
        ("reward", pa.timestamp("s"), r"column 'reward' has type timestamp\[s\]; trajkit reads"),
        ("is_first", pa.string(), "column 'is_first' has type string; trajkit reads numbers"),
        ("info", pa.int64(), "column 'info' has type int64; it holds JSON text"),
    ],
)
def test_columns_of_the_wrong_type_are_refused(name: str, type_: Any, match: str) -> None:
    table = _table()
    column = table.column(name)
    if pa.types.is_timestamp(type_):
        values = pa.array(np.zeros(table.num_rows, "datetime64[s]"))
    elif pa.types.is_string(type_):
        values = pa.array([str(v) for v in column.to_pylist()])
    elif name == "info":
        values = pa.array(np.zeros(table.num_rows, np.int64))
    else:
        values = column.cast(type_)
    _refused(with_column(table, name, values), match)


def test_a_tensor_leaf_of_strings_is_refused() -> None:
    table = _table()
    _refused(
        with_column(table, "out.critic", pa.array(["x"] * table.num_rows)),
        "column 'out.critic' has type string; trajkit reads numbers",
    )


# --------------------------------------------------------------------------------- nulls


@pytest.mark.parametrize(
    "name", ["reward", "is_first", "out.critic", "action", "terminated", "next_obs", "obs"]
)
def test_a_null_is_refused_naming_the_column_and_the_row(name: str) -> None:
    table = _table()
    _refused(nulled(table, name, 3), rf"^column '{name}' is null at step 1, env 1 \(row 3\)")


def test_a_null_inside_a_tensor_cell_is_refused() -> None:
    table = _table()
    obs = table.column("obs").combine_chunks()
    values = obs.flatten().to_pylist()
    values[9] = None  # row 2, value 1 of 4
    cells = pa.FixedSizeListArray.from_arrays(pa.array(values, pa.float32()), 4)
    every_step = r"; a rollout has a value at every step$"
    _refused(
        with_column(table, "obs", cells),
        r"^column 'obs' holds a null value at step 1, env 0 \(row 2\)" + every_step,
    )
    tensor = ta.to_arrow(example_rollout(num_steps=3, num_envs=2), tensor_type="extension")
    storage = tensor.column("obs").combine_chunks()
    masked = pa.ExtensionArray.from_storage(storage.type, cells)
    _refused(
        with_column(tensor, "obs", masked),
        r"^column 'obs' holds a null value at step 1, env 0 \(row 2\)" + every_step,
    )


def test_a_null_in_an_index_column_is_refused() -> None:
    _refused(nulled(_table(), "step", 4), r"^column 'step' is null at row 4$")


def test_next_columns_must_be_the_next_steps_values() -> None:
    table = _table()
    after = table.column("next_obs").combine_chunks()
    values = after.flatten().to_numpy().copy()
    values[4 * 2 + 1] += 1  # step 1, env 0: no longer obs at step 2, env 0
    edited = pa.FixedSizeListArray.from_arrays(pa.array(values), 4)
    _refused(
        with_column(table, "next_obs", edited),
        r"^column 'next_obs' contradicts column 'obs': it holds at step 1, env 0 another "
        r"value than 'obs' at step 2 \(the values after a step are those of the next step\)",
    )
    critic = table.column("next_out.critic").to_numpy().copy()
    critic[0] += 1
    _refused(
        with_column(table, "next_out.critic", pa.array(critic)),
        r"^column 'next_out.critic' contradicts column 'out.critic': it holds at step 0, env 0",
    )
    critic = table.column("next_out.critic").to_numpy().copy()
    critic[-1] += 1  # the last step's: the bootstrap value, which nothing else holds
    back = ta.from_arrow(with_column(table, "next_out.critic", pa.array(critic)))
    assert float(back.model_outs.arrays["critic"][3, 1]) == float(critic[-1])


def test_cells_of_another_shape_are_refused() -> None:
    table = _table(obs_shape=(2, 3))
    as_lists = table.column("obs").cast(pa.list_(pa.list_(pa.float32())))
    assert ta.from_arrow(with_column(table, "obs", as_lists)) == ta.from_arrow(table)  # as DuckDB
    rows = table.column("obs").to_pylist()
    rows[3] = [rows[3][0], rows[3][1][:2]]
    _refused(
        with_column(table, "obs", pa.array(rows, pa.list_(pa.list_(pa.float32())))),
        r"^column 'obs' holds a list of 2 values at step 1, env 1 \(row 3\), where the "
        r"layout's cell shape \[2, 3\] needs 3 \(level 2\)",
    )
    flat = pa.FixedSizeListArray.from_arrays(
        table.column("obs").combine_chunks().flatten().flatten(), 6
    )
    _refused(
        with_column(table, "obs", flat),
        r"^column 'obs' has type fixed_size_list<item: float>\[6\]; trajkit reads cells of "
        r"shape \[2, 3\] there",
    )
    rows = table.column("obs").to_pylist()
    rows[1][0][2] = None
    _refused(
        with_column(table, "obs", pa.array(rows, pa.list_(pa.list_(pa.float32())))),
        r"^column 'obs' holds a null value at step 0, env 1 \(row 1\)",
    )


# ---------------------------------------------------------------------------------- grid


def test_the_rows_must_be_a_bounded_full_grid() -> None:
    table = _table()  # 6 rows: steps 0..2 by envs 0..1
    steps = table.column("step").to_numpy().copy()
    steps[2] = 2**27  # one huge step: refused by counting, before anything is allocated
    _refused(
        with_column(table, "step", pa.array(steps)),
        r"^the rows are not a full grid of steps 0..134217728 by envs 0..1: that makes "
        r"268435458 rows, the table has 6",
    )
    envs = table.column("env").to_numpy().copy()
    envs[0] = 2**31 - 1
    _refused(
        with_column(table, "env", pa.array(envs)),
        r"envs 0..2147483647: that makes 6442450944 rows",
    )
    steps = table.column("step").to_numpy().copy()
    steps[1] = -1
    _refused(
        with_column(table, "step", pa.array(steps)),
        r"^column 'step' holds -1 at row 1; it counts",
    )
    envs = table.column("env").to_numpy().copy()
    envs[1] = 0  # (0, 0) twice, (0, 1) missing: 6 rows still
    envs[3] = 0
    envs[4] = 1
    _refused(
        with_column(table, "env", pa.array(envs)),
        r"step 0, env 0 appears 2 times \(each \(step, env\) once\)",
    )
    _refused(table.slice(0, 0), "the table has no rows")
    _refused(
        pa.concat_tables([table, table]),
        r"^the rows are not a full grid of steps 0..2 by envs 0..1: that makes 6 rows, the "
        r"table has 12",
    )


@pytest.mark.parametrize(("name", "value"), [("step", 2**27), ("env", 2**31 - 1)])
def test_declared_extents_allocate_nothing_of_their_size(name: str, value: int) -> None:
    import tracemalloc

    table = _table()
    values = table.column(name).to_numpy().copy()
    values[0] = value
    bad = with_column(table, name, pa.array(values))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="the rows are not a full grid"):
            ta.from_arrow(bad)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # the old reader reached 2.2 GB (step) and 16 GiB (env) here


def test_max_rows_bounds_a_table_before_anything_is_read() -> None:
    table = _table()
    with pytest.raises(ValueError, match=r"^the table has 6 rows, more than max_rows=5; pass"):
        ta.from_arrow(table, max_rows=5)
    assert ta.from_arrow(table, max_rows=6) == ta.from_arrow(table, max_rows=None)


def test_read_parquet_checks_the_footers_row_count_first(tmp_path: Path) -> None:
    path = tmp_path / "r.parquet"
    ta.write_parquet([example_rollout(seed=s) for s in range(3)], path)  # 3 x 8 rows
    with pytest.raises(ValueError, match=r"^the file declares 24 rows, more than max_rows=23"):
        ta.read_parquet(path, max_rows=23)
    assert len(ta.read_parquet(path, max_rows=24)) == 3


def test_read_parquet_refuses_what_is_not_parquet(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=r"^not a readable Parquet file"):
        ta.read_parquet(path)


def test_read_parquet_refuses_a_bad_rollout_column(tmp_path: Path) -> None:
    table = _table()
    path = tmp_path / "x.parquet"
    pq.write_table(table.drop_columns(["rollout"]), path)
    with pytest.raises(ValueError, match="no column 'rollout'"):
        ta.read_parquet(path)
    pq.write_table(nulled(table, "rollout", 2), path)
    with pytest.raises(ValueError, match=r"^column 'rollout' is null at row 2$"):
        ta.read_parquet(path)


# ------------------------------------------------------------------------------ episode ids


def test_episode_ids_are_one_per_episode_and_distinct() -> None:
    r = example_rollout(num_steps=4, num_envs=2, done_prob=0.0)
    r = r.replace(dones=np.array([[1, 0], [0, 0], [1, 0], [0, 0], [0, 0]], np.float32))
    table = ta.to_arrow(r)
    assert table.column("episode_id").to_pylist() == [0, 2, 0, 2, 1, 2, 1, 2]
    renumbered = with_column(table, "episode_id", pa.array([7, 9, 7, 9, 8, 9, 8, 9]))
    assert ta.from_arrow(renumbered) == r  # any ids, one per episode, as a slice of a file has
    ids = table.column("episode_id").to_numpy().copy()
    ids[2] = 5
    _refused(
        with_column(table, "episode_id", pa.array(ids)),
        r"^column 'episode_id' changes within an episode at step 1, env 0: it holds 5, where "
        r"the episode's first step holds 0 \('is_first' is false there\)",
    )
    ids = table.column("episode_id").to_numpy().copy()
    ids[[4, 6]] = 2
    _refused(
        with_column(table, "episode_id", pa.array(ids)),
        r"^column 'episode_id' gives 2 episodes the id 2 \(the first starts at step 2, env 0\); "
        r"each episode has its own",
    )


def test_read_parquet_checks_ids_across_rollouts(tmp_path: Path) -> None:
    whole = example_rollout(num_steps=6, num_envs=2, done_prob=0.2, seed=5)
    parts = [_steps(whole, 0, 3), _steps(whole, 3, 6)]
    path = tmp_path / "parts.parquet"
    ta.write_parquet(parts, path)
    table = pq.read_table(path)
    assert ta.read_parquet(path) == parts
    ids = table.column("episode_id").to_numpy().copy()
    first_rows = table.filter(pc.equal(table.column("rollout"), 1)).column("episode_id")
    before = table.filter(pc.equal(table.column("rollout"), 0)).column("episode_id")
    going_on = whole.dones[3] == 0
    for b in range(2):  # an episode going on across the rollouts keeps its id
        assert (first_rows[b].as_py() == before[4 + b].as_py()) == bool(going_on[b])
    ids[6:] += 100  # rollout 1 renumbered: consistent within it, not with the file
    pq.write_table(with_column(table, "episode_id", pa.array(ids)), path)
    with pytest.raises(ValueError, match=r"^column 'episode_id' of rollout 1 holds 10\d at step 0"):
        ta.read_parquet(path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.booleans(), min_size=3 * 4, max_size=10 * 4), min_size=1, max_size=3),
    st.integers(1, 12),
    st.data(),
)
def test_ids_read_in_batches_of_any_size_are_checked_at_every_row(
    tmp_path_factory: pytest.TempPathFactory, flags: list[list[bool]], batch: int, data: Any
) -> None:
    # Rollouts of 2 envs going on from one to the next (ids carried), read `batch` rows at a
    # time: the ids as written are read back, and one id changed anywhere is refused with
    # the id write_parquet gives there, by the numbering (early rows) or by the row a step
    # before (the rest).
    rollouts = []
    for i, cells in enumerate(flags):
        dones = np.array(cells[: len(cells) // 2 * 2], np.float32).reshape(-1, 2)
        r = example_rollout(num_steps=len(dones) - 1, num_envs=2, seed=i)
        rollouts.append(r.replace(dones=dones, infos=None))
    path = tmp_path_factory.mktemp("ids") / "ids.parquet"
    ta.write_parquet(rollouts, path, compression="none")
    table = pq.read_table(path)
    row_bytes = 64 + sum(2 * c for c in (4, 4))  # (`_batch_rows` of these leaves, roughly)
    with mock.patch.object(_import, "BATCH_BYTES", batch * row_bytes):
        assert ta.read_parquet(path) == rollouts
        ids = table.column("episode_id").to_numpy().copy()
        row = data.draw(st.integers(0, len(ids) - 1))
        written = int(ids[row])
        ids[row] += data.draw(st.sampled_from([1, -1, 7]))
        pq.write_table(with_column(table, "episode_id", pa.array(ids)), path)
        rollout = int(table.column("rollout")[row].as_py())
        first = int(np.flatnonzero(table.column("rollout").to_numpy() == rollout)[0])
        t, b = divmod(row - first, 2)
        with pytest.raises(
            ValueError,
            match=rf"^column 'episode_id' of rollout {rollout} holds {int(ids[row])} at step "
            rf"{t}, env {b}, where write_parquet numbers that episode {written} ",
        ):
            ta.read_parquet(path)


def _steps(r: trajkit.Rollout, start: int, stop: int) -> trajkit.Rollout:
    """Steps start..stop-1 of `r` (rows start..stop), as a recorder's next rollout holds them."""

    def rows(tree: Any) -> Any:
        return trajkit._core.tree.map_leaves(lambda leaf: leaf[start : stop + 1], tree)

    return trajkit.Rollout(
        states=rows(r.states),
        obses=rows(r.obses),
        rews=r.rews[start:stop],
        dones=r.dones[start : stop + 1],
        infos=None,
        model_outs={k: v[start : stop + 1] for k, v in r.model_outs.arrays.items()},
    )


# ----------------------------------------------------------------------------------- flags


def _flags(table: Any, name: str, row: int, value: bool | None) -> Any:
    flags = table.column(name).to_pylist()
    flags[row] = value
    return with_column(table, name, pa.array(flags, pa.bool_()))


def test_terminated_and_truncated_must_agree_with_is_first() -> None:
    r = example_rollout(num_steps=3, num_envs=2, done_prob=0.0, truncation=True)
    table = ta.to_arrow(r)
    _refused(
        _flags(table, "terminated", 2, True),
        r"^column 'terminated' contradicts column 'is_first': it is true at step 1, env 0, but "
        r"'is_first' is false at step 2 \(an episode that ended there makes the next step",
    )
    first = _flags(table, "is_first", 4, True)
    _refused(
        first,
        r"^columns 'terminated' and 'truncated' contradict column 'is_first': both are false "
        r"at step 1, env 0, but 'is_first' is true at step 2",
    )
    ended = _flags(first, "terminated", 2, True)
    _refused(ended, r"^column 'episode_id' gives 2 episodes the id 0 \(the first starts at step 0")
    both = _flags(ended, "truncated", 2, True)
    _refused(both, r"^columns 'terminated' and 'truncated' are both true at step 1, env 0; an")
    flags = table.column("is_first").to_numpy(zero_copy_only=False).astype(np.int8)
    flags[2] = 2
    _refused(with_column(table, "is_first", pa.array(flags)), r"^is_first must hold only 0 and 1")
    last = ta.from_arrow(_flags(table, "truncated", 5, True))  # the last step: dones[T] = 1
    assert last.dones[3].tolist() == [0, 1]
    assert last.truncated is not None
    assert last.truncated[2].tolist() == [0, 1]


def test_truncations_need_the_layout_to_record_them() -> None:
    r = example_rollout(num_steps=6, num_envs=2, truncation=True, done_prob=0.5, seed=3)
    assert r.truncated is not None
    assert r.truncated.any()
    table = ta.to_arrow(r)
    layout = layout_of(table)
    layout["truncation"] = False
    _refused(
        with_layout(table.drop_columns(["final_value"]), layout),
        r"^column 'truncated' is true at step \d, env \d, but the table's layout says the "
        r"rollout has no truncations \('truncation': false\)",
    )


# ---------------------------------------------------------------------------------- values


def test_values_are_stored_in_the_recorded_dtype_without_wrapping() -> None:
    table = _table(nested=True)  # obs.image is uint8
    image = table.column("obs.image").combine_chunks()
    values = image.flatten().to_numpy().astype(np.int64)
    values[0] = 300
    size = image.type.list_size
    wide = pa.FixedSizeListArray.from_arrays(pa.array(values), size)
    _refused(
        with_column(table, "obs.image", wide),
        r"^obses\['image'\] \(column 'obs.image'\) must fit in uint8 \[0, 255\], got 300 at "
        r"\(t=0, b=0",
    )
    values[0] = 200  # fits: read back exactly, as uint8
    fits = pa.FixedSizeListArray.from_arrays(pa.array(values), size)
    back = ta.from_arrow(with_column(table, "obs.image", fits))
    assert isinstance(back.obses, dict)
    assert back.obses["image"].dtype == np.uint8
    assert int(back.obses["image"][0, 0].reshape(-1)[0]) == 200


def test_values_beyond_float32_and_non_finite_values_are_refused() -> None:
    table = _table()
    rewards = table.column("reward").cast(pa.float64()).to_pylist()
    rewards[1] = 1e300
    _refused(
        with_column(table, "reward", pa.array(rewards, pa.float64())),
        r"^rews holds 1e\+300 at \(t=0, b=1\), beyond float32's range",
    )
    rewards[1] = float("nan")
    _refused(with_column(table, "reward", pa.array(rewards, pa.float64())), r"^rews must be finite")
    r = example_rollout(num_steps=3, num_envs=2, truncation=True)
    table = ta.to_arrow(r)
    values = table.column("final_value").to_pylist()
    values[0] = float("inf")
    _refused(
        with_column(table, "final_value", pa.array(values, pa.float32())), r"^final_values must be"
    )


def test_wider_columns_holding_the_same_values_read_back_exactly() -> None:
    r = example_rollout(num_steps=3, num_envs=2, truncation=True, nested=True)
    table = ta.to_arrow(r)
    for name, type_ in [
        ("step", pa.int64()),
        ("env", pa.uint16()),
        ("reward", pa.float64()),
        ("is_first", pa.int8()),
        ("episode_id", pa.int32()),
        ("terminated", pa.uint8()),
        ("final_value", pa.float64()),
    ]:
        table = with_column(table, name, table.column(name).cast(type_))
    assert ta.from_arrow(table) == r


# ----------------------------------------------------------------------------------- infos


def test_infos_are_refused_as_save_refuses_them() -> None:
    table = _table()
    deep = "[" * 70 + "]" * 70

    def info(text: str | None) -> Any:
        texts: list[str | None] = [None] * table.num_rows
        texts[2] = text
        return with_column(table, "info", pa.array(texts, pa.string()))

    _refused(info('{"a": ' + deep + "}"), r"^infos\[1\]\[0\]\['a'\]" + r"(\[0\])+ is nested")
    _refused(info("[1]"), r"^column 'info' at step 1, env 0 \(row 2\) holds a JSON list; an")
    _refused(info('{"a": NaN}'), r"^column 'info' at step 1, env 0 \(row 2\) is not valid JSON")
    _refused(info('{"a": 1, "a": 2}'), r"is not valid JSON \(duplicate key 'a'")
    _refused(info("[" * 100_000), r"^column 'info' holds 99999 '\{' and '\[' besides its 1")
    back = ta.from_arrow(info('{"a": [1, {"b": null}]}'))
    assert back.infos[1][0] == {"a": [1, {"b": None}]}
    assert ta.from_arrow(info("{}")) == ta.from_arrow(info(None))


def test_what_the_importer_accepts_save_accepts(tmp_path: Path) -> None:
    table = _table()
    texts: list[str | None] = [None] * table.num_rows
    texts[0] = json.dumps({"a": [[[[1]]]] * 3, "n": 10**4000})
    back = ta.from_arrow(with_column(table, "info", pa.array(texts, pa.string())))
    trajkit.save(back, tmp_path / "r.npz")
    assert trajkit.load(tmp_path / "r.npz") == back


# -------------------------------------------------------------------------------- metadata


def test_metadata_that_would_drop_leaves_is_refused() -> None:
    table = _table(nested=True)
    layout = layout_of(table)
    layout["fields"]["obses"]["nested"] = False
    _refused(
        with_layout(table, layout),
        r"^the table's trajkit layout is inconsistent: 'obses' is not nested \('nested': "
        r"false\) but has 3 leaves or a leaf path; refusing rather than dropping leaves",
    )


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda m: m.pop("fields"), "'fields' must name 'obses' and 'states'"),
        (lambda m: m.update(model_outs={}), "'model_outs' must be a list"),
        (lambda m: m.update(truncation=1), "'truncation' must be true or false"),
        (
            lambda m: m["model_outs"].append(m["model_outs"][0]),
            r"model output '\w+' is listed twice",
        ),
        (
            lambda m: m["model_outs"][0].update(column="reward"),
            "column 'reward' is named twice",
        ),
        (
            lambda m: m["fields"]["obses"]["leaves"][0].update(dtype="M8[s]"),
            r"leaf obses has dtype 'M8\[s\]'; trajkit stores bool, int8, .*, float64$",
        ),
        (
            lambda m: m["fields"]["obses"]["leaves"][0].update(dtype="no such"),
            "leaf obses has dtype 'no such'",
        ),
        (
            lambda m: m["fields"]["obses"]["leaves"][0].update(path=[0] * 100),
            "a leaf path of 'obses' must be a list of at most 64 keys",
        ),
        (
            lambda m: m["fields"]["states"]["leaves"][0].update(column=None, next=None),
            r"leaf states has no column, so its 'shape' must have a 0 in it",
        ),
        (
            lambda m: m["fields"]["states"]["leaves"][0].update(next=None),
            r"leaf states must have a 'column' and a 'next' column \(strings\), or neither",
        ),
        (
            lambda m: m["fields"]["obses"]["leaves"][0].update(shape=[-1]),
            r"leaf obses has shape \[-1\]; a shape is a list of at most 32 sizes",
        ),
        (
            lambda m: m["model_outs"][0].update(per_step=True, shape=[2]),
            r"model output 'critic' is a per-step scalar \('per_step': true\) with a shape",
        ),
        (
            lambda m: m["model_outs"][0].pop("next"),
            r"each of 'model_outs' must be \{'key': str, 'column': str, 'next': str,",
        ),
        (lambda m: m["fields"]["obses"].update(leaves=[]), "'obses' must have 'nested'"),
        (lambda m: m.update(version=1), None),
    ],
)
def test_inconsistent_metadata_is_refused(edit: Any, match: str | None) -> None:
    table = _table()
    layout = layout_of(table)
    edit(layout)
    if match is None:
        _refused(
            with_layout(table, layout),
            r"^the table uses trajkit's Arrow layout version 1; this trajkit reads version 2 "
            r"\(one row per transition\)",
        )
    else:
        _refused(
            with_layout(table, layout), "^the table's trajkit layout is inconsistent: " + match
        )


def test_metadata_that_is_not_json_is_refused() -> None:
    table = _table()
    for raw in (b"{", b"[" * 100_000, b"\xff"):
        _refused(
            table.replace_schema_metadata({b"trajkit": raw}),
            "^the table's trajkit metadata is not valid JSON$",
        )


def test_the_layout_comes_from_the_metadata_or_the_column_and_both_must_agree() -> None:
    r = example_rollout(num_steps=3, num_envs=2, nested=True)
    table = ta.to_arrow(r)
    assert ta.from_arrow(table.replace_schema_metadata(None)) == r  # as polars, DuckDB, HF
    assert ta.from_arrow(table.drop_columns(["trajkit_layout"])) == r  # as pyarrow keeps it
    _refused(
        table.replace_schema_metadata(None).drop_columns(["trajkit_layout"]),
        r"^the table has no trajkit layout: neither schema metadata \(key 'trajkit'\), which "
        r"polars, DuckDB and HF datasets drop when they rewrite a file, nor a value in a column "
        r"'trajkit_layout' \(keep that column when rewriting",
    )
    layout = layout_of(table)
    layout["truncation"] = True
    other = table.replace_schema_metadata({b"trajkit": json.dumps(layout).encode()})
    _refused(
        other,
        r"^the table's trajkit metadata and its column 'trajkit_layout' hold different "
        r"layouts; drop the one that is wrong$",
    )
    texts = table.column("trajkit_layout").to_pylist()
    texts[1] = json.dumps(layout)
    _refused(
        with_column(table, "trajkit_layout", pa.array(texts, pa.string())),
        r"^column 'trajkit_layout' holds 2 different layouts; a table \(or a file\) holds",
    )
    texts = [None] * table.num_rows
    texts[3] = "{"
    _refused(
        with_column(table, "trajkit_layout", pa.array(texts, pa.string())),
        r"^column 'trajkit_layout' is not valid JSON$",
    )
    _refused(
        with_column(table, "trajkit_layout", pa.array(np.zeros(table.num_rows))),
        r"^column 'trajkit_layout' has type double; it holds JSON text \(string\)$",
    )
    texts[3] = json.dumps({"format": "other"})
    _refused(
        with_column(table, "trajkit_layout", pa.array(texts, pa.string())),
        r"^column 'trajkit_layout' is not of the 'trajkit-arrow' layout$",
    )


# --------------------------------------------------------------------------------- the CLI


def test_the_import_command_says_each_refusal_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trajkit.cli import main

    table = ta.to_arrow(example_rollout(num_steps=3, num_envs=2))
    for i, bad in enumerate(
        [
            table.drop_columns(["env"]),
            nulled(table, "reward", 0),
            table.slice(1),  # a row missing
            with_column(table, "step", table.column("step").cast(pa.float64())),
        ]
    ):
        path = tmp_path / f"bad{i}.parquet"
        pq.write_table(bad, path)
        assert main(["import", str(path), "--out", str(tmp_path / f"out{i}")]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"{path}: invalid: ")
        assert err.count("\n") == 1
        assert "Traceback" not in err


# ------------------------------------------------------------------------------------ fuzz


def _corner(r: trajkit.Rollout, T: int, k: int) -> trajkit.Rollout:
    """Steps 0..T-1 of envs 0..k-1 of `r`: what a table filtered to those rows holds."""

    def cut(tree: Any) -> Any:
        return trajkit._core.tree.map_leaves(lambda leaf: leaf[: T + 1, :k], tree)

    return trajkit.Rollout(
        states=cut(r.states),
        obses=cut(r.obses),
        rews=r.rews[:T, :k],
        dones=r.dones[: T + 1, :k],
        infos=None if r.infos is None else [row[:k] for row in r.infos[:T]],
        model_outs={key: value[: T + 1, :k] for key, value in r.model_outs.arrays.items()},
        truncated=None if r.truncated is None else r.truncated[:T, :k],
        final_values=None if r.final_values is None else r.final_values[:T, :k],
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations())
def test_a_mutated_table_is_read_exactly_or_refused(case: tuple[int, Any]) -> None:
    which, table = case
    try:
        back = ta.from_arrow(table)
    except ValueError:
        return
    original = SAMPLES[which]
    if (back.num_steps, back.batch_size) != (original.num_steps, original.batch_size):
        original = _corner(original, back.num_steps, back.batch_size)  # filtered rows
    outs = original.model_outs.arrays
    if set(back.model_outs.arrays) < set(outs):  # an output removed, metadata and column
        original = original.replace(model_outs={key: outs[key] for key in back.model_outs.arrays})
    assert back == original


def test_per_step_scalar_outputs_round_trip_and_must_agree_across_envs() -> None:
    """Issue 25: obs-tower2 GAIL's per-step `prob_pi` (`[T+1]`) through the Arrow layout."""
    import json

    import numpy as np
    import pyarrow as pa

    from trajkit.arrow import from_arrow, to_arrow
    from trajkit.testing import example_rollout

    r = example_rollout(num_steps=4, num_envs=3)
    prob_pi = np.arange(5, dtype=np.float32)
    prob_pi[2] = np.nan
    r = r.replace(model_outs={**r.model_outs.arrays, "prob_pi": prob_pi})
    table = to_arrow(r)
    assert from_arrow(table) == r
    layout = json.loads(table.schema.metadata[b"trajkit"])
    assert {
        "key": "prob_pi", "column": "out.prob_pi", "next": "next_out.prob_pi", "dtype": "<f4",
        "shape": [], "per_step": True,
    } in layout["model_outs"]  # fmt: skip
    column = table.column("out.prob_pi").to_numpy(zero_copy_only=False).copy()
    column[1] = 7.0  # env 1's row of step 0 (rows run over the steps of env 0 first)
    edited = table.set_column(
        table.schema.get_field_index("out.prob_pi"), "out.prob_pi", pa.array(column)
    )
    message = r"holds a per-step scalar .* but env 1 differs from env 0 at step 0"
    with pytest.raises(ValueError, match=message):
        from_arrow(edited)
