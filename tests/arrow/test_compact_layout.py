"""The compact layout, streaming row groups, rows counted as read, and dtypes a layout declares."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="trajkit.arrow needs pyarrow (trajkit[arrow])")
pq = pytest.importorskip("pyarrow.parquet")

import trajkit  # noqa: E402
import trajkit.arrow as ta  # noqa: E402
from tests.arrow.helpers import image_rollout  # noqa: E402
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(
    rollouts(action_kinds=ACTION_KINDS, nested=None, truncation=None, min_steps=1, final_obs=None),
    st.sampled_from(["readable", "compact"]),
)
def test_every_rollout_round_trips_in_both_layouts(r: trajkit.Rollout, layout: str) -> None:
    table = ta.to_arrow(r, layout=layout)  # type: ignore[arg-type]
    assert ta.from_arrow(table) == r
    assert ta.from_arrow(table.replace_schema_metadata(None)) == r


@pytest.mark.parametrize("final", [True, False])
def test_images_are_bytes_and_next_values_are_stored_once(final: bool) -> None:
    r = image_rollout(final)
    table = ta.to_arrow(r)  # "auto": an image makes it compact
    layout = json.loads(table.schema.metadata[b"trajkit"])
    assert layout["style"] == "compact"
    (image, vector) = layout["fields"]["obses"]["leaves"]
    assert (image["binary"], vector["binary"]) == (True, True)  # every leaf with a shape
    assert table.column("obs.image").type == pa.binary(1024)
    assert table.column("obs.vector").type == pa.binary(16)
    assert table.column("reward").type == pa.float32()
    T, B = r.num_steps, r.batch_size
    ends = (r.dones[1:] == 1).reshape(-1)
    last = np.arange(T * B) >= (T - 1) * B
    assert table.column("next_obs.image").type == pa.large_binary()  # nulls take no memory
    stored = ~np.array(table.column("next_obs.image").is_null().to_pylist())
    assert stored.tolist() == ((ends & final) | last).tolist()
    assert table.column("next_out.critic").null_count == 0  # scalars: as readable
    assert table.column("next_out.actor").null_count == (T - 1) * B
    assert ta.from_arrow(table) == r
    assert ta.to_arrow(r, layout="readable").column("obs.image").type.list_size == 16


def test_a_binary_cell_is_bytes_plus_a_reshape() -> None:
    r = image_rollout()
    table = ta.to_arrow(r, layout="compact")
    cells = table.column("obs.image").to_pylist()
    dtype = json.loads(table.schema.metadata[b"trajkit"])["fields"]["obses"]["leaves"][0]["dtype"]
    images = np.frombuffer(b"".join(cells), dtype).reshape(-1, 16, 16, 4)
    assert isinstance(r.obses, dict)
    np.testing.assert_array_equal(images, r.obses["image"][:-1].reshape(-1, 16, 16, 4))


@pytest.mark.parametrize("type_", [pa.binary(6), pa.binary(), pa.large_binary()], ids=str)
def test_a_slice_of_a_bytes_column_is_read_from_its_own_offset(type_: Any) -> None:
    # A slice shares its parent's buffers: its first cell is the parent's row `offset`, and
    # the offsets of a variable-size column count bytes from the parent's first row.
    from trajkit.arrow._cells import binary_values

    values = np.arange(7 * 3, dtype=np.int16).reshape(7, 3)
    column = pa.array([row.tobytes() for row in values], type_)
    for start, stop in [(0, 7), (2, 5), (6, 7), (3, 3)]:
        got = binary_values(column.slice(start, stop - start), np.dtype(np.int16), (3,))
        np.testing.assert_array_equal(got, values[start:stop])


@pytest.mark.parametrize("dtype", [np.bool_, np.float32, np.int64])
def test_a_slice_of_a_number_column_is_read_from_its_own_offset(dtype: Any) -> None:
    # Booleans are bits: a slice starting mid-byte unpacks from its own bit.
    from trajkit.arrow._buffers import to_numpy

    values = (np.arange(19) ** 2 % 7 < 3).astype(dtype)  # no period a slice could hide in
    column = pa.array(values)
    for start, stop in [(0, 19), (3, 12), (9, 10), (5, 5)]:
        got = to_numpy(column.slice(start, stop - start))
        assert got.dtype == values.dtype
        np.testing.assert_array_equal(got, values[start:stop])


def test_other_tools_read_the_bytes_with_the_documented_reshape(tmp_path: Path) -> None:
    r = image_rollout()
    path = tmp_path / "run.parquet"
    ta.write_parquet(r, path, layout="compact")
    assert isinstance(r.obses, dict)
    expected = r.obses["image"][:-1].reshape(-1, 16, 16, 4)
    pl = pytest.importorskip("polars")
    frame = pl.read_parquet(path)
    images = np.frombuffer(b"".join(frame["obs.image"]), np.uint8).reshape(-1, 16, 16, 4)
    np.testing.assert_array_equal(images, expected)
    duckdb = pytest.importorskip("duckdb")
    rows = duckdb.sql(f"SELECT \"obs.image\" FROM '{path}' ORDER BY step, env").fetchall()
    images = np.frombuffer(b"".join(v for (v,) in rows), np.uint8).reshape(-1, 16, 16, 4)
    np.testing.assert_array_equal(images, expected)
    pd = pytest.importorskip("pandas")
    frame = pd.read_parquet(path)
    images = np.frombuffer(b"".join(frame["obs.image"]), np.uint8).reshape(-1, 16, 16, 4)
    np.testing.assert_array_equal(images, expected)
    datasets = pytest.importorskip("datasets")
    data = datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "cache"))
    batch = data.with_format("numpy")[0:8]["obs.image"]
    images = np.frombuffer(batch.tobytes(), np.uint8).reshape(-1, 16, 16, 4)
    np.testing.assert_array_equal(images, expected[:8])
    data.to_parquet(str(tmp_path / "hf.parquet"))
    assert ta.read_parquet(tmp_path / "hf.parquet") == [r]


def test_hf_datasets_batches_a_readable_image_recording(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    torch = pytest.importorskip("torch")
    r = image_rollout(num_steps=12)
    ta.write_parquet(r, tmp_path / "run.parquet", layout="readable")
    data = datasets.Dataset.from_parquet(
        str(tmp_path / "run.parquet"), cache_dir=str(tmp_path / "cache")
    )
    batch = data.with_format("numpy")[0:32]
    assert batch["reset_obs.image"].shape == (32, 16, 16, 4)
    assert batch["next_obs.vector"].shape == (32, 4)
    tensors = data.with_format("torch")[0:32]
    assert isinstance(tensors["reset_obs.image"], torch.Tensor)
    uint8 = data.with_format("numpy", dtype=np.uint8)[0:32]["obs.image"]  # as docs say
    assert uint8.dtype == np.uint8


def test_row_groups_are_bounded_and_read_back(tmp_path: Path) -> None:
    r = image_rollout(num_steps=40)
    path = tmp_path / "run.parquet"
    ta.write_parquet([r, r], path, row_group_bytes=10_000)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups > 2
    assert all(meta.row_group(i).num_rows % r.batch_size == 0 for i in range(meta.num_row_groups))
    assert ta.read_parquet(path) == [r, r]
    with pytest.raises(ValueError, match=r"^row_group_bytes must be a positive int, got 0$"):
        ta.write_parquet(r, path, row_group_bytes=0)
    with pytest.raises(ValueError, match=r"^layout must be 'auto', 'readable' or 'compact'"):
        ta.write_parquet(r, path, layout="small")  # type: ignore[arg-type]


def _lying_footer(path: Path, declared: int) -> None:
    """Rewrite the file's footer so that FileMetaData.num_rows says `declared`."""
    data = path.read_bytes()
    size = int.from_bytes(data[-8:-4], "little")
    footer = data[-8 - size : -8]
    rows = pq.ParquetFile(path).metadata.num_rows

    def field3(n: int) -> bytes:  # thrift compact: field 3 (delta 1), i64 zigzag varint
        z, out = (n << 1) ^ (n >> 63), bytearray([0x16])
        while True:
            out.append((z & 0x7F) | (0x80 if z > 0x7F else 0))
            z >>= 7
            if not z:
                return bytes(out)

    assert field3(rows) in footer
    patched = footer.replace(field3(rows), field3(declared), 1)
    path.write_bytes(data[: -8 - size] + patched + len(patched).to_bytes(4, "little") + b"PAR1")


def test_max_rows_counts_the_rows_read_not_the_rows_declared(tmp_path: Path) -> None:
    r = example_rollout(num_steps=3001, num_envs=1, keys=("critic",))
    path = tmp_path / "lies.parquet"
    ta.write_parquet(r, path)
    _lying_footer(path, 10)
    assert pq.ParquetFile(path).metadata.num_rows == 10
    with pytest.raises(
        ValueError,
        match=re.escape(
            "the file holds more than max_rows=1000 rows (its footer declares 10); pass a "
            "larger max_rows (or None) to read it"
        ),
    ):
        ta.read_parquet(path, max_rows=1000)
    with pytest.raises(ValueError, match=r"^the file declares 10 rows but holds 3001$"):
        ta.read_parquet(path, max_rows=None)


def _declare(table: Any, change: Any) -> Any:
    layout = json.loads(table.schema.metadata[b"trajkit"])
    change(layout)
    text = json.dumps(layout)
    column = pa.array([text] + [None] * (table.num_rows - 1), pa.string())
    table = table.set_column(table.column_names.index("trajkit_layout"), "trajkit_layout", column)
    return table.replace_schema_metadata({b"trajkit": text.encode()})


def test_a_declared_dtype_that_would_round_the_values_is_refused() -> None:
    r = example_rollout(num_steps=3, num_envs=2)
    table = ta.to_arrow(r)
    half = _declare(table, lambda m: m["fields"]["obses"]["leaves"][0].update(dtype="<f2"))
    with pytest.raises(
        ValueError,
        match=r"^obses \(column 'obs'\) holds .* at \(t=0, b=0, 0\), which the layout's dtype "
        r"float16 cannot hold exactly \(it would become .*\); the layout must declare a dtype",
    ):
        ta.from_arrow(half)
    critic = next(
        i
        for i, o in enumerate(json.loads(table.schema.metadata[b"trajkit"])["model_outs"])
        if o["key"] == "critic"
    )
    half = _declare(table, lambda m: m["model_outs"][critic].update(dtype="<f2"))
    with pytest.raises(ValueError, match=r"^model_outs\['critic'\] .* cannot hold exactly"):
        ta.from_arrow(half)
    exact = r.replace(obses=r.obses.astype(np.float16).astype(np.float32))
    (back,) = [
        ta.from_arrow(
            _declare(
                ta.to_arrow(exact), lambda m: m["fields"]["obses"]["leaves"][0].update(dtype="<f2")
            )
        )
    ]
    assert back.obses.dtype == np.float16


@pytest.mark.parametrize("dtype", ["<f16", "<c8", "|O"])
def test_a_declared_dtype_trajkit_cannot_store_is_refused(dtype: str) -> None:
    table = ta.to_arrow(example_rollout(num_steps=3, num_envs=2))
    bad = _declare(table, lambda m: m["fields"]["obses"]["leaves"][0].update(dtype=dtype))
    with pytest.raises(
        ValueError,
        match=rf"^the table's trajkit layout is inconsistent: leaf obses has dtype "
        rf"'{re.escape(dtype)}'; trajkit stores bool, int8, .*, float64$",
    ):
        ta.from_arrow(bad)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (
            lambda m: m.update(style="tiny"),
            "'style' must be 'readable' or 'compact' \\(or absent\\), got 'tiny'",
        ),
        (
            lambda m: m.pop("style"),
            "leaf obses\\['image'\\] has 'binary': True; only a leaf with a shape, in the "
            "compact layout",
        ),
        # each flag on the kind of leaf or output it is for, and with the value it takes
        (
            lambda m: m["model_outs"][0].update(binary=True),
            "model output 'critic' has 'binary': True; only a leaf with a shape",
        ),
        (
            lambda m: m["fields"]["obses"]["leaves"][0].update(binary=1),
            "leaf obses\\['image'\\] has 'binary': 1; only a leaf with a shape",
        ),
        (
            lambda m: m["model_outs"][0].update(binary=0),
            "model output 'critic' has 'binary': 0; only a leaf with a shape",
        ),
        (
            lambda m: m["fields"]["obses"]["leaves"][1].update(per_step=True),
            "each leaf of 'obses' must have 'column', 'next', 'path', 'dtype' and 'shape'$",
        ),
        (
            lambda m: m["model_outs"][1].update(per_step=False),
            "each of 'model_outs' must be \\{'key': str, ",
        ),
    ],
)
def test_an_inconsistent_compact_layout_is_refused(change: Any, match: str) -> None:
    bad = _declare(ta.to_arrow(image_rollout()), change)
    with pytest.raises(ValueError, match="^the table's trajkit layout is inconsistent: " + match):
        ta.from_arrow(bad)


@pytest.mark.parametrize(
    ("name", "cell"),
    [
        ("obs.image", "fixed_size_binary[1024] (|u1 of shape [16, 16, 4])"),
        ("state", "fixed_size_binary[8] (<f4 of shape [2])"),
        ("out.actor", "fixed_size_binary[12] (<f4 of shape [3])"),
    ],
)
def test_variable_size_bytes_are_for_next_columns_only(name: str, cell: str) -> None:
    # A column with a value on every row holds fixed-size bytes, whether a leaf's or a model
    # output's; only the mostly-null `next_` columns may hold variable-size ones.
    table = ta.to_arrow(image_rollout(final=False), layout="compact")
    values = pa.array(table.column(name).to_pylist(), pa.large_binary())
    bad = table.set_column(table.column_names.index(name), name, values)
    message = f"column {name!r} has type large_binary; the layout stores it as bytes, {cell}"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ta.from_arrow(bad)


def test_compact_next_values_where_the_layout_has_none_are_refused() -> None:
    r = image_rollout(final=False)
    table = ta.to_arrow(r, layout="compact")
    values = table.column("next_obs.image").to_pylist()
    i = table.column_names.index("next_obs.image")
    values[-1] = b"\0" * 1000
    short = table.set_column(i, "next_obs.image", pa.array(values, pa.large_binary()))
    T, B = r.num_steps, r.batch_size
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"column 'next_obs.image' holds 1000 bytes at step {T - 1}, env {B - 1} (row "
            f"{T * B - 1}), where the layout's cell (|u1 of shape [16, 16, 4]) has 1024"
        ),
    ):
        ta.from_arrow(short)
    values[-1] = b"\0" * 1024
    values[0] = b"\0" * 1024
    bad = table.set_column(i, "next_obs.image", pa.array(values, pa.binary(1024)))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "column 'next_obs.image' holds a value at step 0, env 0 (row 0), which is no last "
            "step (the compact layout stores the 'next_' bytes of a leaf on the last step only)"
        ),
    ):
        ta.from_arrow(bad)
    image = table.column("obs.image")
    short = pa.array(image.to_pylist(), pa.binary(1000 + 24))
    assert (
        ta.from_arrow(table.set_column(table.column_names.index("obs.image"), "obs.image", short))
        == r
    )
    wrong = pa.array([b"x" * 8] * table.num_rows, pa.binary(8))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "column 'obs.image' has type fixed_size_binary[8]; the layout stores it as bytes, "
            "fixed_size_binary[1024] (|u1 of shape [16, 16, 4])"
        ),
    ):
        ta.from_arrow(table.set_column(table.column_names.index("obs.image"), "obs.image", wrong))


def test_export_of_a_folder_streams_its_files_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trajkit.cli import main

    rs = [example_rollout(num_steps=3, num_envs=2, seed=s) for s in range(11)]
    (tmp_path / "runs" / "later").mkdir(parents=True)
    for i, r in enumerate(rs[:10]):
        trajkit.save(r, tmp_path / "runs" / f"r{i}.npz")  # r10 after r9: numbers as numbers
    trajkit.save(rs[10], tmp_path / "runs" / "later" / "r0.npz")  # subfolders after files
    out = tmp_path / "runs.parquet"
    assert main(["export", str(tmp_path / "runs"), "--out", str(out), "--layout", "compact"]) == 0
    assert capsys.readouterr().out == f"{out}: 11 rollout(s), 66 rows\n"
    assert ta.read_parquet(out) == rs
    (tmp_path / "runs" / "r5.npz").write_bytes(b"not a zip")
    out.unlink()
    assert main(["export", str(tmp_path / "runs"), "--out", str(out)]) == 1
    assert "r5.npz: invalid:" in capsys.readouterr().err
    assert not out.exists()
    assert main(["export", str(tmp_path / "missing"), "--out", str(out)]) == 1
    assert "missing: invalid: no such file or directory" in capsys.readouterr().err


def test_rollouts_from_a_generator_are_written_as_they_come(tmp_path: Path) -> None:
    rs = [example_rollout(num_steps=3, num_envs=2, seed=s) for s in range(3)]
    taken: list[int] = []

    def lazily() -> Any:
        for i, r in enumerate(rs):
            taken.append(i)
            yield r

    ta.write_parquet(lazily(), tmp_path / "runs.parquet")
    assert taken == [0, 1, 2]
    assert ta.read_parquet(tmp_path / "runs.parquet") == rs
    with pytest.raises(ValueError, match=r"^write_parquet needs at least one rollout$"):
        ta.write_parquet(iter([]), tmp_path / "none.parquet")
    assert not (tmp_path / "none.parquet").exists()
    trajkit.save(rs[0], tmp_path / "r.npz")
    mapped = trajkit.load(tmp_path / "r.npz", mmap=True)
    with pytest.raises(ValueError, match=r"^cannot write to .*r.npz: it is also an input"):
        ta.write_parquet(iter([mapped]), tmp_path / "r.npz")


def test_bytes_are_read_from_the_file_in_batches_whatever_the_row_order(tmp_path: Path) -> None:
    rs = [image_rollout(num_steps=30, seed=s) for s in range(2)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, row_group_bytes=20_000)
    assert ta.read_parquet(path) == rs
    table = pq.read_table(path)
    shuffled = table.take(np.random.default_rng(0).permutation(table.num_rows))
    pq.write_table(shuffled, tmp_path / "shuffled.parquet")
    assert ta.read_parquet(tmp_path / "shuffled.parquet") == rs
    by_rollout = table.take(np.argsort(table.column("env").to_numpy(), kind="stable"))
    pq.write_table(by_rollout, tmp_path / "env-major.parquet", row_group_size=50)
    assert ta.read_parquet(tmp_path / "env-major.parquet") == rs


def test_a_null_image_is_refused_naming_its_step(tmp_path: Path) -> None:
    r = image_rollout(num_steps=30)
    table = ta.to_arrow(r)
    images = table.column("obs.image").to_pylist()
    images[40] = None
    i = table.column_names.index("obs.image")
    pq.write_table(
        table.set_column(i, "obs.image", pa.array(images, pa.binary(1024))),
        tmp_path / "hole.parquet",
        row_group_size=16,
    )
    with pytest.raises(
        ValueError,
        match=re.escape(
            "column 'obs.image' is null at step 13, env 1 (row 40); a rollout has a value at "
            "every step"
        ),
    ):
        ta.read_parquet(tmp_path / "hole.parquet")


# ------------------------------------------------------------------ issue 42's Parquet doors


@pytest.mark.parametrize(
    ("shape", "cell"),
    [([2**64], 2**64), ([2**32, 2**32], 2**64), ([2**63], 2**63), ([3, 2**62], 3 * 2**62)],
)
def test_a_cell_numpy_cannot_hold_is_refused_by_the_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: list[int], cell: int
) -> None:
    """2**64 escaped as OverflowError; 2**32 x 2**32 wrapped to a cell of 0 bytes."""
    from trajkit.cli import main

    table = ta.to_arrow(image_rollout(final=False), layout="compact")
    bad = _declare(table, lambda m: m["fields"]["obses"]["leaves"][0].update(shape=shape))
    message = (
        f"the table's trajkit layout is inconsistent: leaf obses['image'] has shape {shape}: a "
        f"cell of {cell} bytes, more than a NumPy array can hold (9223372036854775807)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ta.from_arrow(bad)
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ta.read_parquet(tmp_path / "bad.parquet")
    assert main(["import", str(tmp_path / "bad.parquet"), "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == f"{tmp_path / 'bad.parquet'}: invalid: {message}\n"


def test_a_cell_numpy_can_hold_is_refused_by_its_column_type() -> None:
    table = ta.to_arrow(image_rollout(final=False), layout="compact")
    largest = 2**63 - 1  # uint8: the largest cell NumPy holds
    bad = _declare(table, lambda m: m["fields"]["obses"]["leaves"][0].update(shape=[largest]))
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"column 'obs.image' has type fixed_size_binary[1024]; the layout stores it as "
            f"bytes, fixed_size_binary[{largest}] (|u1 of shape [{largest}])"
        ),
    ):
        ta.from_arrow(bad)


def _bool_image(final: bool) -> trajkit.Rollout:
    r = image_rollout(final=final)
    assert isinstance(r.obses, dict)
    obses = {**r.obses, "image": np.asarray(r.obses["image"]) > 128}
    finals = r.final_obses
    if isinstance(finals, dict):
        finals = {**finals, "image": np.asarray(finals["image"]) > 128}
    return r.replace(obses=obses, final_obses=finals)


def _with_byte(table: Any, name: str, row: int, byte: int) -> Any:
    """`table` whose column `name` holds `byte` as the first byte of its value at `row`."""
    column = table.column(name).combine_chunks()
    values = column.to_pylist()
    values[row] = bytes([byte]) + values[row][1:]
    i = table.column_names.index(name)
    return table.set_column(i, name, pa.array(values, column.type))


@pytest.mark.parametrize(
    ("name", "row", "where"),
    [
        ("obs.image", 4, "step 1, env 1 (row 4)"),
        ("next_obs.image", 25, "step 8, env 1 (row 25)"),  # the bootstrap row
        ("reset_obs.image", None, None),  # at an end on the last step, if any
    ],
)
def test_a_bool_byte_other_than_0_and_1_is_refused_on_import(
    tmp_path: Path, name: str, row: int | None, where: str | None
) -> None:
    """It imported, and then `save` refused it: what trajkit reads, trajkit writes."""
    r = _bool_image(final=True)
    table = ta.to_arrow(r, layout="compact")
    if row is None:
        values = table.column(name).to_pylist()
        if all(v is None for v in values):
            pytest.skip("no episode ends on the last step")
        row = next(i for i, v in enumerate(values) if v is not None)
        where = f"step {row // 3}, env {row % 3} (row {row})"
    bad = _with_byte(table, name, row, 2)
    message = (
        f"column {name!r} holds the byte 2 in a bool cell at {where}; a bool is stored as "
        "the byte 0 or 1 (as trajkit's file format stores it)"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ta.from_arrow(bad)
    pq.write_table(bad, tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        ta.read_parquet(tmp_path / "bad.parquet")
    back = ta.from_arrow(_with_byte(table, name, row, 1))  # 1: a bool the file format stores
    trajkit.save(back, tmp_path / "back.npz")
