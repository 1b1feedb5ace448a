"""Plain pages read into place (`trajkit.arrow._pages`): the same rollouts and refusals.

A compact leaf's column written uncompressed is read from the file straight into the
rollout's arrays; anything else goes through pyarrow. Both ways give the same rollouts, and
a bad value is refused with the same message; a damaged page or header is refused as a
damaged file, never read as other values.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
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
import trajkit.arrow._import as reader  # noqa: E402
from tests.arrow.helpers import image_rollout  # noqa: E402
from trajkit.arrow import _pages  # noqa: E402
from trajkit.arrow._pages import DamagedPageError, PageColumn, plain_columns  # noqa: E402
from trajkit.testing import ACTION_KINDS, rollouts  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "preadv"), reason="no os.preadv here")


class Spy:
    """Records which columns each file read had read into place."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, off: bool = False) -> None:
        self.direct: list[list[str]] = []
        real = _pages.plain_columns

        def spy(*args: Any) -> dict[str, PageColumn]:
            found = {} if off else real(*args)
            self.direct.append(sorted(found))
            return found

        monkeypatch.setattr(reader, "plain_columns", spy)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    return Spy(monkeypatch)


def _both(path: Path) -> tuple[Any, Any, list[list[str]]]:
    """`read_parquet` of `path` with pages read into place, and through pyarrow only.

    Each is the rollouts, or the message of the ValueError that refused the file.
    """
    got: list[Any] = []
    spies = []
    for off in (False, True):
        with pytest.MonkeyPatch.context() as patch:
            spy = Spy(patch, off=off)
            try:
                got.append(ta.read_parquet(path))
            except ValueError as exc:
                got.append(str(exc))
            spies.append(spy.direct)
    return got[0], got[1], spies[0]


# -------------------------------------------------------------------- the same rollouts


@settings(max_examples=25, deadline=None)
@given(
    rollouts(action_kinds=ACTION_KINDS, nested=None, truncation=None, min_steps=1, final_obs=None),
    st.sampled_from(["1.0", "2.0"]),
    st.sampled_from([64, 1 << 20]),
    st.integers(1, 3),
)
def test_plain_pages_read_the_same_rollouts(
    r: trajkit.Rollout, version: str, page: int, copies: int
) -> None:
    import tempfile

    rs = [r] * copies
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.parquet"
        ta.write_parquet(
            rs,
            path,
            layout="compact",
            compression="none",
            data_page_version=version,
            data_page_size=page,
            row_group_bytes=700,
        )
        direct, through, _ = _both(path)
    assert direct == rs
    assert through == rs


@pytest.mark.parametrize("version", ["1.0", "2.0"])
def test_image_columns_are_read_into_place_across_pages_and_row_groups(
    tmp_path: Path, spy: Spy, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "BATCH_BYTES", 3_000)  # batches that end inside pages
    rs = [image_rollout(num_steps=6, seed=s) for s in range(3)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(
        rs,
        path,
        compression="none",
        data_page_size=5_000,
        row_group_bytes=20_000,
        data_page_version=version,
    )
    assert pq.ParquetFile(path).metadata.num_row_groups > 3
    assert ta.read_parquet(path) == rs
    assert spy.direct == [["obs.image", "obs.vector", "out.actor", "state"]]


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"compression": "snappy"}, "compressed"),
        ({"compression": "none", "use_dictionary": True}, "a dictionary"),
    ],
)
def test_other_columns_go_through_pyarrow(
    tmp_path: Path, spy: Spy, options: dict[str, Any], why: str
) -> None:
    rs = [image_rollout(num_steps=3, seed=s) for s in range(2)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, **options)
    assert ta.read_parquet(path) == rs
    assert spy.direct == [[]], why


def test_rows_in_another_order_are_taken_in_order(tmp_path: Path, spy: Spy) -> None:
    """A tool that reversed a rollout's rows: its plain pages are read, then taken in order."""
    r = image_rollout(num_steps=5)
    table = ta.to_arrow(r, layout="compact")
    path = tmp_path / "reversed.parquet"
    pq.write_table(
        table.take(pa.array(np.arange(table.num_rows)[::-1])),
        path,
        compression="none",
        use_dictionary=False,
        write_page_checksum=True,
    )
    assert ta.read_parquet(path) == [r]
    assert spy.direct == [["obs.image", "obs.vector", "out.actor", "state"]]


def test_a_url_or_a_replaced_path_is_read_through_pyarrow(tmp_path: Path) -> None:
    """No descriptor for a URL; none used when the path names another file than it opened."""
    path = tmp_path / "a.bin"
    path.write_bytes(b"a")
    with ta._descriptor("memory://x.parquet") as fd:
        assert fd is None
    with ta._descriptor(str(tmp_path / "gone.parquet")) as fd:
        assert fd is None
    with ta._descriptor(str(path)) as fd:
        assert fd is not None
        assert ta._names(str(path), fd)
        assert os.pread(fd, 1, 0) == b"a"
        other = tmp_path / "b.bin"
        other.write_bytes(b"b")
        other.replace(path)  # the path now names another file
        assert not ta._names(str(path), fd)
        path.unlink()
        assert not ta._names(str(path), fd)


def test_a_file_replaced_while_opened_is_read_through_pyarrow(
    tmp_path: Path, spy: Spy, monkeypatch: pytest.MonkeyPatch
) -> None:
    rs = [image_rollout(num_steps=3)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, compression="none")
    monkeypatch.setattr(ta, "_names", lambda where, fd: False)
    assert ta.read_parquet(path) == rs
    assert spy.direct == []  # iter_file got no descriptor: plain_columns was not asked


# ------------------------------------------------------------------- the same refusals


def _rewritten(tmp_path: Path, table: Any, **options: Any) -> Path:
    path = tmp_path / "edited.parquet"
    options = {"compression": "none", "use_dictionary": False, "write_page_checksum": True}
    pq.write_table(table, path, **options)
    return path


def test_a_null_image_is_refused_naming_its_place_either_way(tmp_path: Path) -> None:
    r = image_rollout(num_steps=4)
    table = ta.to_arrow(r, layout="compact")
    column = table.column("obs.image").combine_chunks()
    mask = np.zeros(len(column), bool)
    mask[7] = True
    nulled = pa.FixedSizeBinaryArray.from_buffers(
        column.type, len(column), [pa.array(~mask).buffers()[1], column.buffers()[1]]
    )
    table = table.set_column(table.column_names.index("obs.image"), "obs.image", nulled)
    direct, through, used = _both(_rewritten(tmp_path, table))
    assert direct == through
    assert "obs.image" in used[0]
    assert direct == (
        "column 'obs.image' is null at step 2, env 1 (row 7); a rollout has a value at every step"
    )


def test_a_stray_bool_byte_is_refused_naming_its_place_either_way(tmp_path: Path) -> None:
    r = image_rollout(num_steps=4, final=False)
    assert isinstance(r.obses, dict)
    r = r.replace(obses={**r.obses, "image": r.obses["image"] > 128})
    table = ta.to_arrow(r, layout="compact")
    column = table.column("obs.image").combine_chunks()
    data = bytearray(column.buffers()[1].to_pybytes())
    data[5 * 1024 + 3] = 2  # row 5's fourth byte
    edited = pa.FixedSizeBinaryArray.from_buffers(
        column.type, len(column), [None, pa.py_buffer(bytes(data))]
    )
    table = table.set_column(table.column_names.index("obs.image"), "obs.image", edited)
    direct, through, used = _both(_rewritten(tmp_path, table))
    assert "obs.image" in used[0]
    assert direct == through
    assert direct == (
        "column 'obs.image' holds the byte 2 in a bool cell at step 1, env 2 (row 5); a bool "
        "is stored as the byte 0 or 1 (as trajkit's file format stores it)"
    )


# ---------------------------------------------------------------------- damaged pages


def _plain_file(
    tmp_path: Path, rows: int = 40, nullable: bool = True, **options: Any
) -> tuple[Path, bytes]:
    """A file of one plain column `x` (4-byte cells: the row number), and its bytes."""
    cells = np.arange(rows, dtype=np.int32).view(np.uint8)
    column = pa.FixedSizeBinaryArray.from_buffers(pa.binary(4), rows, [None, pa.py_buffer(cells)])
    schema = pa.schema([pa.field("x", pa.binary(4), nullable=nullable)])
    path = tmp_path / "plain.parquet"
    base = {"compression": "none", "use_dictionary": False, "write_page_checksum": True}
    pq.write_table(pa.table([column], schema=schema), path, **{**base, **options})
    return path, path.read_bytes()


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[tuple[Path, Any]]:
    """Open a plain file's column `x` (`opened[1](path)` gives its `PageColumn`)."""
    fds: list[int] = []

    def open_column(path: Path) -> PageColumn:
        fd = os.open(path, os.O_RDONLY)
        fds.append(fd)
        return plain_columns(pq.ParquetFile(path), ["x"], {"x": 4}, fd)["x"]

    yield tmp_path, open_column
    for fd in fds:
        os.close(fd)


def _rows(i: int) -> str:
    return f"row {i}"


def test_a_plain_column_reads_its_rows_in_any_pieces(opened: tuple[Path, Any]) -> None:
    tmp_path, open_column = opened
    path, _ = _plain_file(tmp_path, data_page_size=32, row_group_size=13)
    column = open_column(path)
    got = np.empty((40, 4), np.uint8)
    for a, b in [(0, 1), (1, 9), (9, 30), (30, 40)]:
        column.take(got[a:b], _rows)
    column.end()
    assert got.reshape(-1).view(np.int32).tolist() == list(range(40))


def test_rows_left_over_or_missing_are_refused(opened: tuple[Path, Any]) -> None:
    tmp_path, open_column = opened
    path, _ = _plain_file(tmp_path)
    column = open_column(path)
    column.take(np.empty((39, 4), np.uint8), _rows)
    with pytest.raises(ValueError, match=r"^the file's columns hold more rows than its index"):
        column.end()
    with pytest.raises(ValueError, match=r"^the file's columns hold fewer rows than its index"):
        column.take(np.empty((2, 4), np.uint8), _rows)


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (lambda d, v: d[:v] + bytes([d[v] ^ 0x01]) + d[v + 1 :], "CRC checksum verification"),
        (lambda d, v: d[:4] + b"\x00" + d[5:], "its header lacks field 3"),
        (lambda d, v: d[:4] + bytes([0x15, 0x06]) + d[6:], "of type 3, not a data page|sizes"),
    ],
    ids=["value", "stop", "kind"],
)
def test_a_damaged_page_is_refused_as_a_damaged_file(
    opened: tuple[Path, Any], edit: Any, why: str
) -> None:
    tmp_path, open_column = opened
    path, data = _plain_file(tmp_path)
    values = data.index(np.arange(40, dtype=np.int32).tobytes())
    path.write_bytes(edit(data, values + 17))
    column = open_column(path)
    with pytest.raises(DamagedPageError, match=f"^not a readable Parquet file: .*({why})"):
        column.take(np.empty((40, 4), np.uint8), _rows)


@pytest.mark.parametrize(
    ("nullable", "why"),
    [(False, "its 41 values do not fill its 160 bytes"), (True, "definition levels do not")],
)
def test_pages_whose_sizes_disagree_are_refused(
    opened: tuple[Path, Any], nullable: bool, why: str
) -> None:
    """A header saying one value more than its bytes (or its levels) hold."""
    tmp_path, open_column = opened
    path, data = _plain_file(tmp_path, nullable=nullable)
    column = open_column(path)
    assert column.levels == int(nullable)
    header, size = _pages._header(column._fd, 4, 1000)
    assert header[5][1] == 40
    assert size < 64
    edited = data.replace(bytes([0x15, 80]), bytes([0x15, 82]), 1)  # num_values 40 -> 41
    path.write_bytes(edited)
    with pytest.raises(DamagedPageError, match=why):
        column.take(np.empty((40, 4), np.uint8), _rows)


# ------------------------------------------------------------ Thrift's compact protocol


def test_headers_skip_what_they_do_not_need() -> None:
    """Fields of every type but the wanted ones are skipped; ids are deltas or zigzag i16s."""
    data = b"".join(
        [
            b"\x15\x04",  # field 1, i32: 2
            b"\x11",  # field 2, bool true (in the type)
            b"\x18\x02ab",  # field 3, binary "ab"
            b"\x19\x31\x01\x02\x01",  # field 4, list of 3 bools: a byte each
            b"\x1c\x15\x02\x00",  # field 5, struct {1: i32 1}
            b"\x17" + b"\x00" * 8,  # field 6, double
            b"\x13\x7f",  # field 7, byte
            b"\x05\x20\x06",  # field 16 (its id a zigzag i16 varint), i32: 3
            b"\x00",
        ]
    )
    fields, end = _pages._struct(data, 0, {1: None, 5: {1: None}, 16: None}, 0)
    assert fields == {1: 2, 5: {1: 1}, 16: 3}
    assert end == len(data)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (bytes([0x19, 0xF8, 0xFF, 0xFF, 0xFF, 0x0F]), IndexError),  # a list longer than its data
        (bytes([0x1D]) + b"\x00", ValueError),  # a field of type 13
        (bytes([0x15]) + b"\xff" * 11, ValueError),  # a varint over 64 bits
        (bytes([0x1C] * 40), ValueError),  # structs nested too deeply
        (bytes([0x15, 0x04]), IndexError),  # no stop
    ],
    ids=["long-list", "type-13", "varint", "deep", "no-stop"],
)
def test_headers_that_do_not_parse_raise(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        _pages._struct(data, 0, {}, 0)


@pytest.mark.parametrize(
    ("levels", "values", "first"),
    [
        (bytes([40 << 1, 1]), 40, None),  # one run of 40 ones
        (bytes([3 << 1, 1, 2 << 1, 0]), 5, 3),  # 3 ones, then 2 nulls
        (bytes([(2 << 1) | 1, 0xFF, 0b11101111]), 16, 12),  # bit-packed, a null at 12
        (bytes([(1 << 1) | 1, 0b00011111]), 5, None),  # bit-packed, bits past the end unread
    ],
)
def test_definition_levels_say_where_the_first_null_is(
    levels: bytes, values: int, first: int | None
) -> None:
    assert _pages._scan_levels(levels, values) == first


@pytest.mark.parametrize(
    "levels",
    [bytes([40 << 1, 2]), bytes([0, 1]), bytes([(3 << 1) | 1, 0xFF]), bytes([10 << 1])],
    ids=["level-2", "empty-run", "packed-short", "run-short"],
)
def test_definition_levels_that_do_not_parse_are_refused(levels: bytes) -> None:
    def damaged(why: str) -> DamagedPageError:
        return DamagedPageError(why)

    with pytest.raises(DamagedPageError, match="definition levels do not parse"):
        _pages._first_null(levels, 40, damaged)


# ------------------------------------------------------------------- which columns qualify


def _columns_of(path: Path, widths: dict[str, int]) -> list[str]:
    fd = os.open(path, os.O_RDONLY)
    try:
        file = pq.ParquetFile(path)
        return sorted(plain_columns(file, file.schema_arrow.names, widths, fd))
    finally:
        os.close(fd)


def test_only_plain_fixed_size_columns_of_their_cell_width_qualify(tmp_path: Path) -> None:
    rows = 6
    cells = pa.py_buffer(np.arange(rows * 4, dtype=np.uint8))
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(4), rows, [None, cells])
    table = pa.table(
        {
            "a": fixed,
            "b": fixed,  # asked for with another width
            "c": pa.array([b"abcd"] * rows, pa.binary()),  # variable-size bytes
            "d": pa.array([[1, 2]] * rows, pa.list_(pa.int16(), 2)),  # a repeated column
            "e": pa.array([{"x": b"abcd"}] * rows, pa.struct([("x", pa.binary(4))])),  # nested
            "f": fixed,  # not asked for
        }
    )
    path = tmp_path / "kinds.parquet"
    pq.write_table(table, path, compression="none", use_dictionary=False)
    widths = {"a": 4, "b": 3, "c": 4, "d": 4, "e": 4, "e.x": 4}
    assert _columns_of(path, widths) == ["a"]
    pq.write_table(table, path, compression="none", use_dictionary=["a"])
    assert _columns_of(path, widths) == []
    pq.write_table(table, path, compression={"a": "zstd", "b": "none"}, use_dictionary=False)
    assert _columns_of(path, widths) == []


def test_headers_longer_than_the_first_read_are_read_whole(opened: tuple[Path, Any]) -> None:
    """Statistics of wide cells (min and max, 600 bytes each) make a header of over 1 KiB."""
    tmp_path, _ = opened
    rows, width = 5, 600
    data = np.random.default_rng(0).integers(0, 256, rows * width, dtype=np.uint8)
    column = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), rows, [None, pa.py_buffer(data)]
    )
    path = tmp_path / "wide.parquet"
    pq.write_table(
        pa.table({"x": column}),
        path,
        compression="none",
        use_dictionary=False,
        write_statistics=True,
        write_page_checksum=True,
    )
    fd = os.open(path, os.O_RDONLY)
    try:
        header, size = _pages._header(fd, 4, 1 << 20)
        assert size > 2 * _pages._FIRST_READ
        assert header[5][1] == rows
        page = plain_columns(pq.ParquetFile(path), ["x"], {"x": width}, fd)["x"]
        got = np.empty((rows, width), np.uint8)
        page.take(got, _rows)
        page.end()
        assert (got.reshape(-1) == data).all()
        with pytest.raises(DamagedPageError, match="page header at byte 4 does not parse"):
            _pages._header(fd, 4, size - 1)  # the header runs past the room it has
    finally:
        os.close(fd)
