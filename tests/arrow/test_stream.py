"""read_parquet's two passes: row groups one at a time, any batch size, page checksums.

The second pass reads a batch of rows at a time into the rollout's arrays; whatever the
batch size (down to one row, splitting steps), a file reads back the same rollouts and a
refusal names the same position. Page checksums make a flipped bit a refusal, not a changed
value.
"""

from __future__ import annotations

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
import trajkit.arrow._ahead as _ahead  # noqa: E402
import trajkit.arrow._import as reader  # noqa: E402
from tests.arrow.helpers import image_rollout, mutations  # noqa: E402
from trajkit.arrow._ahead import Ahead  # noqa: E402
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts  # noqa: E402

pytestmark = pytest.mark.usefixtures("read_ahead")

# ------------------------------------------------------------------------- any batch size


@pytest.fixture
def tiny_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second pass reads one row at a time: every step split across batches."""
    monkeypatch.setattr(reader, "BATCH_BYTES", 1)


@settings(max_examples=30, deadline=None)
@given(
    rollouts(action_kinds=ACTION_KINDS, nested=None, truncation=None, min_steps=1, final_obs=None),
    st.sampled_from(["readable", "compact"]),
    st.integers(1, 64),
)
def test_any_batch_size_reads_the_same_rollouts(
    r: trajkit.Rollout, layout: str, batch_bytes: int
) -> None:
    table = ta.to_arrow(r, layout=layout)  # type: ignore[arg-type]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader, "BATCH_BYTES", batch_bytes * 64)
        assert ta.from_arrow(table) == r


@pytest.mark.usefixtures("tiny_batches")
@pytest.mark.parametrize("layout", ["readable", "compact"])
def test_files_read_back_a_row_at_a_time(tmp_path: Path, layout: str) -> None:
    rs = [image_rollout(num_steps=6, seed=s) for s in range(3)]
    ta.write_parquet(rs, tmp_path / "runs.parquet", layout=layout, row_group_bytes=5_000)  # type: ignore[arg-type]
    assert ta.read_parquet(tmp_path / "runs.parquet") == rs


@pytest.mark.usefixtures("tiny_batches")
def test_a_refusal_names_the_position_in_the_rollout_not_in_the_batch() -> None:
    r = example_rollout(num_steps=5, num_envs=3, truncation=True, seed=2)
    table = ta.to_arrow(r)
    rewards = table.column("reward").cast(pa.float64()).to_pylist()
    rewards[10] = 1e300  # step 3, env 1
    i = table.column_names.index("reward")
    with pytest.raises(ValueError, match=r"^rews holds 1e\+300 at \(t=3, b=1\), beyond float32"):
        ta.from_arrow(table.set_column(i, "reward", pa.array(rewards, pa.float64())))
    obs = table.column("obs").to_pylist()
    obs[13][2] = float("nan")  # step 4, env 1
    i = table.column_names.index("obs")
    with pytest.raises(
        ValueError, match=r"^obses \(column 'obs'\) must be finite, got nan at \(t=4, b=1, 2\)"
    ):
        ta.from_arrow(table.set_column(i, "obs", pa.array(obs, table.schema.field("obs").type)))
    after = table.column("next_obs").to_pylist()
    after[7][0] += 1.0  # step 2, env 1
    i = table.column_names.index("next_obs")
    with pytest.raises(
        ValueError, match=r"^column 'next_obs' contradicts column 'obs': it holds at step 2, env 1 "
    ):
        ta.from_arrow(
            table.set_column(i, "next_obs", pa.array(after, table.schema.field("next_obs").type))
        )


def _with_nan(table: Any, column: str, row: int, item: int) -> Any:
    """A compact table with cell `item` of `column`'s row `row` (float32 bytes) made NaN."""
    cells = [
        bytearray(cell) if cell is not None else None for cell in table.column(column).to_pylist()
    ]
    cell = cells[row]
    assert cell is not None
    np.frombuffer(cell, np.float32)[item] = np.nan
    i = table.column_names.index(column)
    values = [bytes(c) if c is not None else None for c in cells]
    return table.set_column(i, column, pa.array(values, table.schema.field(column).type))


def _refused_both_ways(table: Any, tmp_path: Path, match: str) -> None:
    """`table` refused with `match`, by pyarrow's batches and by its pages read into place."""
    path = tmp_path / "refused.parquet"
    pq.write_table(table, path, compression="none", use_dictionary=False)
    with pytest.raises(ValueError, match=match):
        ta.from_arrow(table)
    with pytest.raises(ValueError, match=match):
        ta.read_parquet(path)


@pytest.mark.parametrize("batch_bytes", [1, 1 << 20])
def test_a_non_finite_value_is_named_by_its_column_and_step(
    tmp_path: Path, batch_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Leaves are checked for finiteness once, by the rollout's constructor; the message
    # still names the column and the step, as every other check of an import does.
    monkeypatch.setattr(reader, "BATCH_BYTES", batch_bytes)
    r = example_rollout(num_steps=5, num_envs=3, seed=2)
    table = ta.to_arrow(r, layout="compact")
    expected = r"^obses \(column 'obs'\) must be finite, got nan at \(t=4, b=1, 2\)$"
    _refused_both_ways(_with_nan(table, "obs", 13, 2), tmp_path, expected)
    last = table.num_rows - 2  # the bootstrap row: env 1's next_obs on the last step
    bootstrap = r"^obses \(column 'obs'\) must be finite, got nan at \(t=5, b=1, 0\)$"
    _refused_both_ways(_with_nan(table, "next_obs", last, 0), tmp_path, bootstrap)


@pytest.mark.usefixtures("tiny_batches")
def test_a_non_finite_value_read_before_another_refusal_is_the_one_reported(
    tmp_path: Path,
) -> None:
    r = example_rollout(num_steps=5, num_envs=3, seed=2)
    table = _with_nan(ta.to_arrow(r, layout="compact"), "obs", 4, 0)  # step 1, env 1
    ids = table.column("episode_id").to_pylist()
    later = ids[:]
    later[13] += 100  # step 4, env 1: a wrong id, read after the NaN
    i = table.column_names.index("episode_id")
    both = table.set_column(i, "episode_id", pa.array(later, pa.int64()))
    expected = r"^obses \(column 'obs'\) must be finite, got nan at \(t=1, b=1, 0\)$"
    _refused_both_ways(both, tmp_path, expected)
    earlier = ids[:]
    earlier[1] += 100  # step 0, env 1: a wrong id, read before the NaN (in a file, whose ids
    first = table.set_column(i, "episode_id", pa.array(earlier, pa.int64()))  # are checked
    pq.write_table(first, tmp_path / "first.parquet", compression="none")  # as they come)
    with pytest.raises(
        ValueError, match=r"^column .episode_id. of rollout 0 holds 103 at step 0, env 1,"
    ):
        ta.read_parquet(tmp_path / "first.parquet")


def _outcome(table: Any) -> trajkit.Rollout | None:
    try:
        return ta.from_arrow(table)
    except ValueError:
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations())
def test_a_mutated_table_reads_the_same_a_row_at_a_time(case: tuple[int, Any]) -> None:
    """The same rollout, or a refusal, whatever the batches (test_import's fuzz).

    With several faults, which is named first may differ: a batch's columns are checked
    before the next batch's rows.
    """
    _, table = case
    whole = _outcome(table)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader, "BATCH_BYTES", 1)
        assert _outcome(table) == whole


def test_the_second_pass_reads_one_row_group_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow's reader keeps every row group it is given until the end: a whole file's."""
    rs = [image_rollout(num_steps=20, seed=s) for s in range(2)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, row_group_bytes=10_000)
    groups: list[Any] = []
    original = pq.ParquetFile.iter_batches

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        groups.append(kwargs.get("row_groups"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    assert ta.read_parquet(path) == rs
    count = pq.ParquetFile(path).metadata.num_row_groups
    assert count > 2
    assert groups[:count] == [[g] for g in range(count)]  # the first pass: the rollout ids
    # then each rollout's small columns, and the others by threads: each group once per pass
    assert sorted(groups[count:]) == sorted([[g] for g in range(count)] * 2)


def test_rows_out_of_order_and_steps_split_across_row_groups_read_back(tmp_path: Path) -> None:
    rs = [
        example_rollout(num_steps=7, num_envs=3, seed=s, done_prob=0.3, final_obs=True)
        for s in range(2)
    ]
    table = pq.read_table(_written(tmp_path, rs))
    pq.write_table(table, tmp_path / "odd.parquet", row_group_size=5)  # 5 rows: steps split
    assert ta.read_parquet(tmp_path / "odd.parquet") == rs
    backwards = table.take(np.arange(table.num_rows)[::-1].copy())
    pq.write_table(backwards, tmp_path / "backwards.parquet", row_group_size=4)
    assert ta.read_parquet(tmp_path / "backwards.parquet") == rs
    second_first = pa.concat_tables([table.slice(21), table.slice(0, 21)])  # rollout 1, then 0
    pq.write_table(second_first, tmp_path / "swapped.parquet", row_group_size=8)
    assert ta.read_parquet(tmp_path / "swapped.parquet") == rs


def _written(tmp_path: Path, rs: list[trajkit.Rollout], **options: Any) -> Path:
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, **options)
    return path


# ------------------------------------------------------------------------- page checksums


def _flips(size: int, count: int) -> list[tuple[int, int]]:
    """`count` (byte, bit) positions of a file of `size` bytes, the same on every run."""
    rng = np.random.default_rng(45)
    return [
        (int(p), int(b))
        for p, b in zip(
            rng.choice(size, count, replace=False), rng.integers(0, 8, count), strict=True
        )
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("layout", "compression"), [("compact", "none"), ("compact", "snappy"), ("readable", "none")]
)
def test_every_flipped_bit_is_refused_or_reads_back_the_same(
    tmp_path: Path, layout: str, compression: str
) -> None:
    """Without page checksums, about 3 % of single bit flips read back changed values."""
    rs = [image_rollout(num_steps=4, seed=s, num_envs=2) for s in range(2)]
    path = _written(tmp_path, rs, layout=layout, compression=compression)
    data = path.read_bytes()
    damaged = tmp_path / "damaged.parquet"
    checksums = 0
    for byte, bit in _flips(len(data), 300):
        flipped = bytearray(data)
        flipped[byte] ^= 1 << bit
        damaged.write_bytes(bytes(flipped))
        try:
            back = ta.read_parquet(damaged)
        except ValueError as exc:
            checksums += "CRC checksum verification" in str(exc)
            continue
        assert back == rs, f"a flip of bit {bit} of byte {byte} read back other values"
    assert checksums  # flips in data pages, which the checksums refused


def test_a_damaged_page_is_refused_as_a_damaged_file(tmp_path: Path) -> None:
    r = image_rollout(num_steps=4)
    path = _written(tmp_path, [r], layout="compact", compression="none")
    data = bytearray(path.read_bytes())
    assert isinstance(r.obses, dict)
    image = np.asarray(r.obses["image"])[0, 0].tobytes()
    at = bytes(data).index(image)  # the first image's bytes in its data page
    data[at + 100] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(
        ValueError, match=r"^not a readable Parquet file: .*CRC checksum verification"
    ):
        ta.read_parquet(path)
    assert (
        pq.read_table(path, page_checksum_verification=False).num_rows == r.num_steps * r.batch_size
    )


# ----------------------------------------------------------------------------- read ahead


def _reader_threads() -> list[Any]:
    import threading

    return [t for t in threading.enumerate() if t.name == "trajkit-parquet-reader"]


def test_read_ahead_gives_every_item_in_order_and_the_error_in_its_place() -> None:
    with Ahead(iter(range(50))) as items:
        assert list(items) == list(range(50))

    def failing() -> Any:
        yield from range(3)
        raise OSError("the disk")

    got: list[int] = []
    with pytest.raises(OSError, match="the disk"), Ahead(failing()) as items:
        got.extend(items)
    assert got == [0, 1, 2]
    assert not _reader_threads()


def test_read_ahead_ends_its_thread_when_the_caller_stops() -> None:
    made: list[int] = []

    def items() -> Any:
        for i in range(1000):
            made.append(i)
            yield i

    with Ahead(items()) as ahead:
        for item in ahead:
            if item == 2:
                break
    assert not _reader_threads()
    assert len(made) < 10  # it stopped after the item it was making
    with Ahead(items()):  # closed before the first item is taken
        pass
    assert not _reader_threads()


@pytest.mark.parametrize("readers", [1, 2, 3])
def test_row_groups_decoded_by_threads_come_in_the_files_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readers: int
) -> None:
    monkeypatch.setattr(_ahead, "READERS", readers)
    rs = [image_rollout(num_steps=12, seed=s) for s in range(3)]
    path = _written(tmp_path, rs, row_group_bytes=7_000)
    assert pq.ParquetFile(path).metadata.num_row_groups > 5
    assert ta.read_parquet(path) == rs
    assert not _reader_threads()


def test_a_refusal_in_the_first_row_group_ends_the_reading_threads(tmp_path: Path) -> None:
    r = example_rollout(num_steps=200, num_envs=4, seed=3)
    table = ta.to_arrow(r)
    rewards = table.column("reward").to_pylist()
    rewards[5] = float("nan")
    i = table.column_names.index("reward")
    pq.write_table(
        table.set_column(i, "reward", pa.array(rewards, pa.float32())),
        tmp_path / "bad.parquet",
        row_group_size=50,
    )
    with pytest.raises(ValueError, match=r"^rews must be finite, got nan at \(t=1, b=1\)$"):
        ta.read_parquet(tmp_path / "bad.parquet")
    assert not _reader_threads()


class _Tagged:
    """A `Merge` that adds each batch's first row of the file, and refuses at its end."""

    def __init__(self, k: int, n: int, log: list[tuple[int, int]], refuse: bool) -> None:
        self.k, self.log, self.refuse = k, log, refuse

    def __call__(self, row: int, batch: Any) -> Any:
        self.log.append((self.k, row))
        return batch

    def end(self) -> None:
        if self.refuse:
            raise ValueError(f"thread {self.k} has rows left")


@pytest.mark.parametrize("readers", [1, 2, 3])
def test_each_thread_merges_its_batches_and_ends_its_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, readers: int
) -> None:
    monkeypatch.setattr(_ahead, "READERS", readers)
    table = pa.table({"x": np.arange(100, dtype=np.int32)})
    pq.write_table(table, tmp_path / "x.parquet", row_group_size=30)  # 4 row groups
    file = pq.ParquetFile(tmp_path / "x.parquet")

    def reopen(metadata: Any) -> Any:
        return pq.ParquetFile(tmp_path / "x.parquet", metadata=metadata)

    log: list[tuple[int, int]] = []
    with _ahead.Batches(file, reopen, ["x"], 20, lambda k, n: _Tagged(k, n, log, False)) as got:
        assert [b.column(0).to_pylist() for b in got] == [
            list(range(a, min(b, 100)))
            for a, b in [(0, 20), (20, 30), (30, 50), (50, 60), (60, 80), (80, 90), (90, 100)]
        ]
    assert sorted(log) == sorted(
        (g % readers, row)
        for g, rows in enumerate([(0, 20), (30, 50), (60, 80), (90,)])
        for row in rows
    )
    taken: list[int] = []
    with (
        pytest.raises(ValueError, match=r"^thread 0 has rows left$"),
        _ahead.Batches(file, reopen, ["x"], 20, lambda k, n: _Tagged(k, n, [], k == 0)) as b,
    ):
        taken.extend(batch.num_rows for batch in b)
    assert sum(taken) == 100  # every row first: refused at the end, where thread 0 ends
    assert not _reader_threads()
