"""iter_parquet: one rollout at a time, with memory bounded by one rollout and the batches.

Pinned without timing: the first rollout comes before the last row group is read (a spy on
pyarrow's reader), and once the caller lets a rollout go, nothing of it stays alive while the
next ones are read (weak references to its arrays). Files in another order read the same.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="trajkit.arrow needs pyarrow (trajkit[arrow])")
pq = pytest.importorskip("pyarrow.parquet")

import trajkit  # noqa: E402
import trajkit.arrow as ta  # noqa: E402
import trajkit.arrow._import as reader  # noqa: E402
from tests.arrow.helpers import image_rollout  # noqa: E402
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts  # noqa: E402

ROLLOUTS = 6


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, list[trajkit.Rollout]]:
    """Six image rollouts, several row groups each."""
    rs = [image_rollout(num_steps=10 + s, seed=s) for s in range(ROLLOUTS)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, row_group_bytes=8_000)
    return path, rs


def _root(array: Any) -> Any:
    """The array that owns the memory a view of it shows."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _arrays(r: trajkit.Rollout) -> list[Any]:
    assert isinstance(r.obses, dict)
    return [_root(r.obses["image"]), _root(r.rews), _root(r.model_outs.arrays["actions"])]


def test_iter_parquet_yields_the_rollouts_read_parquet_reads(
    runs: tuple[Path, list[trajkit.Rollout]],
) -> None:
    path, rs = runs
    assert list(ta.iter_parquet(path)) == rs == ta.read_parquet(path)
    assert list(ta.iter_parquet(str(path), max_rows=None)) == rs


def test_the_first_rollout_comes_before_the_last_row_group_is_read(
    runs: tuple[Path, list[trajkit.Rollout]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, rs = runs
    groups = pq.ParquetFile(path).metadata.num_row_groups
    assert groups >= 3 * ROLLOUTS
    asked: list[tuple[int, tuple[str, ...]]] = []
    lock = threading.Lock()
    original = pq.ParquetFile.iter_batches

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:  # reader threads ask too
            asked.append((kwargs["row_groups"][0], tuple(kwargs["columns"])))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    with contextlib.closing(ta.iter_parquet(path)) as rollouts:
        assert not asked  # nothing is read before the first rollout is asked for
        assert next(rollouts) == rs[0]
        with lock:
            values = [group for group, columns in asked if "obs.image" in columns]
            small = [group for group, columns in asked if "step" in columns]
        # The first rollout's row groups, and those the two reader threads decode ahead
        # (each a batch made and one waiting): far from the last.
        metadata = pq.ParquetFile(path).metadata
        sizes = np.cumsum([metadata.row_group(g).num_rows for g in range(groups)])
        last_of_first = int(np.searchsorted(sizes, rs[0].num_steps * rs[0].batch_size))
        assert max(values) <= last_of_first + 4 < groups - 1, (values, last_of_first, groups)
        assert max(small) <= last_of_first + 1
        assert [
            group for group, columns in asked if columns == ("rollout", "trajkit_layout")
        ] == list(
            range(groups)
        )  # the first pass reads the whole rollout column (and the layout column)
    assert not [t for t in threading.enumerate() if t.name == "trajkit-parquet-reader"]


def test_a_rollout_let_go_is_freed_before_the_next_one_is_built(
    runs: tuple[Path, list[trajkit.Rollout]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most one rollout is alive: the caller's, until it lets it go."""
    path, rs = runs
    alive: list[weakref.ref[Any]] = []
    held_while_building: list[int] = []
    build = reader.Assembly.__init__

    def spy(self: Any, *args: Any, **kwargs: Any) -> None:
        gc.collect()
        held_while_building.append(sum(ref() is not None for ref in alive))
        build(self, *args, **kwargs)

    monkeypatch.setattr(reader.Assembly, "__init__", spy)
    rollouts = ta.iter_parquet(path)
    for count in range(ROLLOUTS):
        r = next(rollouts)
        assert r == rs[count]
        alive = [weakref.ref(array) for array in _arrays(r)]
        del r  # let go before the next is asked for
    assert next(rollouts, None) is None
    assert held_while_building == [0] * ROLLOUTS


def test_a_refusal_midway_comes_after_the_valid_rollouts_before_it(tmp_path: Path) -> None:
    rs = [example_rollout(num_steps=8, num_envs=2, seed=s) for s in range(3)]
    ta.write_parquet(rs, tmp_path / "runs.parquet")
    table = pq.read_table(tmp_path / "runs.parquet")
    rewards = table.column("reward").to_numpy().copy()
    rewards[2 * 16 + 5] = np.nan  # rollout 2, step 2, env 1
    i = table.column_names.index("reward")
    table = table.set_column(i, "reward", pa.array(rewards, pa.float32()))
    pq.write_table(table, tmp_path / "bad.parquet", row_group_size=16)
    rollouts = ta.iter_parquet(tmp_path / "bad.parquet")
    assert [next(rollouts), next(rollouts)] == rs[:2]
    with pytest.raises(ValueError, match=r"^rews must be finite, got nan at \(t=2, b=1\)$"):
        next(rollouts)


@pytest.mark.parametrize(
    "order",
    [
        "shuffled within",  # each rollout's rows shuffled, the rollouts in order: streamed
        "rollouts swapped",  # rollout 1, then rollout 0: read whole
        "interleaved",  # rows of both rollouts mixed: read whole
    ],
)
def test_files_in_another_order_read_the_same(tmp_path: Path, order: str) -> None:
    rs = [example_rollout(num_steps=7, num_envs=3, seed=s, done_prob=0.3) for s in range(2)]
    ta.write_parquet(rs, tmp_path / "runs.parquet")
    table = pq.read_table(tmp_path / "runs.parquet")
    rng = np.random.default_rng(0)
    if order == "shuffled within":
        rows = np.concatenate([rng.permutation(21), 21 + rng.permutation(21)])
    elif order == "rollouts swapped":
        rows = np.concatenate([np.arange(21, 42), np.arange(21)])
    else:
        rows = rng.permutation(42)
    pq.write_table(table.take(rows), tmp_path / "odd.parquet", row_group_size=5)
    assert list(ta.iter_parquet(tmp_path / "odd.parquet")) == rs


def _reordered(table: Any, order: str, sizes: list[int], rng: np.random.Generator) -> Any:
    """`table` (rollouts of `sizes` rows, in order) with its rows in another `order`."""
    starts = np.cumsum([0, *sizes])
    parts = [np.arange(a, b) for a, b in itertools.pairwise(starts)]
    if order == "shuffled within":
        parts = [rng.permutation(part) for part in parts]
    elif order == "rollouts reversed":
        parts = parts[::-1]
    rows = np.concatenate(parts)
    return table.take(rng.permutation(rows) if order == "interleaved" else rows)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rollouts(action_kinds=ACTION_KINDS, nested=None, truncation=None, min_steps=1, final_obs=None),
    st.integers(1, 3),
    st.sampled_from(["as written", "shuffled within", "rollouts reversed", "interleaved"]),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
)
def test_any_file_of_rollouts_in_any_order_reads_back(
    r: trajkit.Rollout, count: int, order: str, group_rows: int, seed: int
) -> None:
    """Against the rollouts written: streamed or read whole, whatever the row groups."""
    rs = [r] * count
    with tempfile.TemporaryDirectory() as tmp:
        ta.write_parquet(rs, Path(tmp, "runs.parquet"))
        table = pq.read_table(Path(tmp, "runs.parquet"))
        size = r.num_steps * r.batch_size
        rng = np.random.default_rng(seed)
        odd = _reordered(table, order, [size] * count, rng)
        pq.write_table(odd, Path(tmp, "odd.parquet"), row_group_size=group_rows)
        assert list(ta.iter_parquet(Path(tmp, "odd.parquet"))) == rs


def test_the_first_pass_names_the_files_row(tmp_path: Path) -> None:
    rs = [example_rollout(num_steps=4, num_envs=2, seed=s) for s in range(3)]
    ta.write_parquet(rs, tmp_path / "runs.parquet")
    table = pq.read_table(tmp_path / "runs.parquet")
    ids = table.column("rollout").to_pylist()
    ids[19] = None
    i = table.column_names.index("rollout")
    table = table.set_column(i, "rollout", pa.array(ids, pa.int32()))
    pq.write_table(table, tmp_path / "null.parquet", row_group_size=6)
    with pytest.raises(ValueError, match=r"^column 'rollout' is null at row 19$"):
        ta.read_parquet(tmp_path / "null.parquet")


def test_iter_parquet_refuses_a_missing_file_when_iterated(tmp_path: Path) -> None:
    rollouts = ta.iter_parquet(tmp_path / "missing.parquet")  # opened when iterated
    with pytest.raises(FileNotFoundError):
        next(rollouts)


def test_cut_takes_rows_across_batches_and_refuses_too_few_or_too_many() -> None:
    batches = [pa.record_batch({"x": list(range(a, b))}) for a, b in ((0, 3), (3, 3), (3, 7))]
    cut = reader._Cut(batches)
    taken = [[b.column("x").to_pylist() for b in cut.take(n)] for n in (2, 4)]
    assert taken == [[[0, 1]], [[2], [], [3, 4, 5]]]
    with pytest.raises(ValueError, match=r"^the file's columns hold more rows than its index"):
        cut.end()
    cut = reader._Cut(batches)
    with pytest.raises(ValueError, match=r"^the file's columns hold fewer rows than its index"):
        list(cut.take(8))
    cut = reader._Cut(batches)
    assert sum(b.num_rows for b in cut.take(7)) == 7
    cut.end()  # nothing left: no refusal


@pytest.mark.parametrize("order", ["as written", "shuffled within"])
@pytest.mark.parametrize("final_obs", [False, True], ids=["bootstrap", "final obs"])
def test_rollouts_sharing_a_row_group_read_back_with_their_rows_out_of_order(
    tmp_path: Path, final_obs: bool, order: str
) -> None:
    # A leaf of shape [2, 1] is a fixed-size list of fixed-size lists in the readable layout:
    # pyarrow took such rows of a slice (the second rollout's rows of a shared row group) as
    # zeros.
    rs = [
        example_rollout(num_steps=3, num_envs=2, seed=s, obs_shape=(2, 1), final_obs=final_obs)
        for s in range(2)
    ]
    ta.write_parquet(rs, tmp_path / "runs.parquet")
    table = pq.read_table(tmp_path / "runs.parquet")
    odd = _reordered(table, order, [6, 6], np.random.default_rng(0))
    pq.write_table(odd, tmp_path / "odd.parquet", row_group_size=12)
    assert list(ta.iter_parquet(tmp_path / "odd.parquet")) == rs
    sliced = odd.slice(6)  # the second rollout alone, its rows out of order
    assert ta.from_arrow(sliced) == rs[1]
