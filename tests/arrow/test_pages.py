"""Plain pages read into place (`trajkit.arrow._pages`): the same rollouts and refusals.

A compact leaf's column written uncompressed is read from the file straight into the
rollout's arrays; anything else goes through pyarrow. Both ways give the same rollouts, and
a bad value is refused with the same message; a damaged page or header is refused as a
damaged file, never read as other values.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Callable, Iterator
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
import trajkit.arrow._ahead as _ahead  # noqa: E402
import trajkit.arrow._import as reader  # noqa: E402
from tests.arrow.helpers import image_rollout  # noqa: E402
from trajkit.arrow import _pages  # noqa: E402
from trajkit.arrow._buffers import to_numpy  # noqa: E402
from trajkit.arrow._pages import (  # noqa: E402
    BitColumn,
    DamagedPageError,
    NullColumn,
    PageColumn,
    Prefetch,
    TextColumn,
    null_columns,
    number_columns,
    plain_columns,
    text_column,
)
from trajkit.arrow._plan import PLAN_COLUMNS  # noqa: E402
from trajkit.testing import ACTION_KINDS, rollouts  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "preadv"), reason="no os.preadv here"),
    pytest.mark.usefixtures("read_ahead"),
]


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


def test_cells_read_into_place_take_no_room_in_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch holds about BATCH_BYTES of the cells pyarrow decodes; a leaf read from its
    # pages into the rollout takes none, so such a file is read in fewer, larger batches.
    rows: list[int] = []
    real = _ahead.Batches

    def batches(file: Any, reopen: Any, names: list[str], count: int, merging: Any) -> Any:
        rows.append(count)
        return real(file, reopen, names, count, merging)

    monkeypatch.setattr(reader, "Batches", batches)
    rs = [image_rollout(num_steps=6, seed=s) for s in range(2)]
    for compression in ("zstd", "none"):
        ta.write_parquet(rs, tmp_path / f"{compression}.parquet", compression=compression)
        assert ta.read_parquet(tmp_path / f"{compression}.parquet") == rs
    layout = json.loads(
        pq.read_table(tmp_path / "none.parquet").column("trajkit_layout")[0].as_py()
    )
    direct = ["obs.image", "obs.vector", "out.actor", "state"]
    assert rows == [reader._batch_rows(layout), reader._batch_rows(layout, direct)]
    assert rows[1] > 4 * rows[0]


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
        (bytes([32 << 1, 1, (1 << 1) | 1, 0b00011111]), 37, None),  # the same after a run
    ],
)
def test_definition_levels_say_where_the_first_null_is(
    levels: bytes, values: int, first: int | None
) -> None:
    def damaged(why: str) -> DamagedPageError:
        return DamagedPageError(why)

    assert _pages._first_null(levels, values, damaged) == first


@pytest.mark.parametrize(
    "levels",
    [
        bytes([40 << 1, 2]),
        bytes([0, 1]),
        bytes([(3 << 1) | 1, 0xFF]),
        bytes([10 << 1]),
        bytes([1, 0xFF]),
    ],
    ids=["level-2", "empty-run", "packed-short", "run-short", "packed-empty"],
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


# ------------------------------------------------------------------ pages made by hand
# Page headers written here field by field (Thrift's compact protocol), so that every
# refusal of `PageColumn` can be reached: pyarrow writes only well-formed pages.


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _thrift(fields: dict[int, int | dict[int, Any]]) -> bytes:
    """A struct of i32 fields and struct fields, ids ascending, then its stop byte."""
    out, last = bytearray(), 0
    for field in sorted(fields):
        value = fields[field]
        kind = 12 if isinstance(value, dict) else 5
        out.append(((field - last) << 4) | kind)
        if isinstance(value, dict):
            out += _thrift(value)
        else:
            out += _varint((value << 1) ^ (value >> 63))  # zigzag
        last = field
    return bytes(out) + b"\x00"


def _page(
    values: bytes,
    count: int,
    levels: bytes | None = None,
    *,
    v2: dict[int, int] | None = None,
    checksum: bool = True,
    drop: tuple[int, ...] = (),
    drop_page: tuple[int, ...] = (),
    **edits: int,
) -> bytes:
    """A data page (v1, or v2 with `v2`'s fields over the defaults): header, levels, values.

    `levels`: the definition levels (RLE hybrid), `None` for a column that is required.
    `edits`: header fields over the defaults (`kind`, `size`, `raw`, `encoding`, ...).
    """
    import zlib

    if v2 is None:
        prefix = b"" if levels is None else len(levels).to_bytes(4, "little") + levels
        page = {1: count, 2: edits.get("encoding", 0), 3: edits.get("defs", 3)}
        page[4] = edits.get("reps", 3)
        key = 5
    else:
        prefix = levels or b""
        page = {1: count, 2: 0, 3: count, 4: 0, 5: len(prefix), 6: 0, **v2}
        key = 8
    body = prefix + values
    header: dict[int, Any] = {
        1: edits.get("kind", 0 if v2 is None else 3),
        2: edits.get("raw", len(body)),
        3: edits.get("size", len(body)),
        key: page,
    }
    if checksum:
        header[4] = edits.get("crc", zlib.crc32(body))
        if header[4] >= 1 << 31:
            header[4] -= 1 << 32  # an i32, as Parquet writes it
    for field in drop:
        del header[field]
    for field in drop_page:
        del page[field]
    return _thrift(header) + body


def _cells(rows: int, first: int = 0) -> bytes:
    return np.arange(first, first + rows, dtype=np.int32).tobytes()


ONES = bytes([40 << 1, 1])  # an RLE run of 40 present values


@pytest.fixture
def pages(tmp_path: Path) -> Iterator[Any]:
    """`pages(data, chunk_values, levels)`: a `PageColumn` of 4-byte cells over `data`."""
    fds: list[int] = []

    def make(
        data: bytes, chunk: int | None = None, levels: int = 1, end: int | None = None
    ) -> PageColumn:
        path = tmp_path / f"pages{len(fds)}.bin"
        path.write_bytes(data)
        fds.append(os.open(path, os.O_RDONLY))
        return PageColumn(fds[-1], "x", [(0, end or len(data), chunk or 40)], 4, levels)

    yield make
    for fd in fds:
        os.close(fd)


def _read(column: PageColumn, rows: int = 40) -> list[int]:
    got = np.empty((rows, 4), np.uint8)
    column.take(got, _rows)
    return list(got.reshape(-1).view(np.int32))


@pytest.mark.parametrize("crc", [True, False])
def test_hand_made_pages_read_back(pages: Any, crc: bool) -> None:
    halves = _page(_cells(20), 20, checksum=crc) + _page(_cells(20, 20), 20, checksum=crc)
    required = pages(halves, levels=0)
    assert _read(required) == list(range(40))
    required.end()
    nullable = pages(_page(_cells(40), 40, ONES, checksum=crc))
    assert _read(nullable) == list(range(40))
    packed = bytes([(2 << 1) | 1, 0xFF, 0xFF, 24 << 1, 1])  # 16 bit-packed, then a run of 24
    assert _read(pages(_page(_cells(40), 40, packed))) == list(range(40))
    v2 = pages(_page(_cells(40), 40, ONES, v2={}))
    assert _read(v2) == list(range(40))
    empty = _page(b"", 0, b"", checksum=crc)  # a page of no values first
    assert _read(pages(empty + _page(_cells(40), 40, ONES))) == list(range(40))


def test_reads_the_system_cuts_short_are_resumed(
    pages: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.preadv

    def short(fd: int, buffers: list[memoryview], offset: int) -> int:
        return real(fd, [buffers[0][:3]], offset)  # 3 bytes at most, wherever asked

    monkeypatch.setattr(os, "preadv", short)
    assert _read(pages(_page(_cells(40), 40, ONES))) == list(range(40))


@pytest.mark.parametrize(
    ("levels", "null"),
    [
        (bytes([10 << 1, 1, 1 << 1, 0, 29 << 1, 1]), 10),  # runs: 10 present, a null, ...
        (bytes([(1 << 1) | 1, 0xFF, (1 << 1) | 1, 0b11110111, 24 << 1, 1]), 11),  # bit-packed
    ],
)
@pytest.mark.parametrize("v2", [None, {2: 1}])
def test_a_null_is_refused_at_its_row(
    pages: Any, levels: bytes, null: int, v2: dict[int, int] | None
) -> None:
    column = pages(_page(_cells(39), 40, levels, v2=v2))
    got = np.empty((40, 4), np.uint8)
    column.take(got[:5], _rows)  # the rows before the null read
    with pytest.raises(ValueError, match=rf"^column 'x' is null at row {null - 5}; a rollout"):
        column.take(got[5:], _rows)
    assert list(got[:5].reshape(-1).view(np.int32)) == list(range(5))


def _damaged(why: str) -> str:
    return rf"^not a readable Parquet file: column 'x', the page at byte \d+: {why}"


@pytest.mark.parametrize(
    ("page", "chunk", "why"),
    [
        (_page(_cells(40), 40, ONES, crc=12345), 40, "CRC checksum verification failed"),
        (_page(_cells(40), 40, ONES, encoding=2), 40, "its values are not plain"),
        (_page(_cells(40), 40, ONES, defs=4), 40, "its definition levels are not RLE"),
        (_page(_cells(40), 40, ONES, kind=2), 40, "a page of type 2, not a data page"),
        (_page(_cells(40), 40, ONES, raw=10), 40, "its sizes do not fit its column chunk"),
        (_page(_cells(40), 40, ONES, size=1000), 40, "its sizes do not fit its column chunk"),
        (_page(_cells(40), 40, ONES, size=-1), 40, "its header lacks field 3, or holds -1"),
        (_page(_cells(40), 40, ONES), 41, "its column chunk ends 1 values short"),
        (_page(_cells(40), 40, ONES), 39, "its 40 values do not fill its 166 bytes"),
        (_page(_cells(40), 40, bytes([40 << 1, 2])), 40, "its definition levels do not parse"),
        (_page(_cells(40), 40, ONES, v2={2: 1}), 40, "it counts nulls its levels do not have"),
        (_page(_cells(40), 40, ONES, v2={6: 1}), 40, "its values are not plain"),
        (_page(_cells(40), 40, ONES, v2={4: 1}), 40, "its values are not plain"),
        (_page(_cells(40), 40, ONES, drop=(2,)), 40, "its header lacks field 2, or holds None"),
        (_page(_cells(40), 40, ONES, drop_page=(1,)), 40, "its header lacks field 1, or holds"),
        (_page(_cells(40), 40, ONES, v2={}, drop_page=(1,)), 40, "its header lacks field 1"),
        (_page(_cells(40), 40, ONES, v2={}, drop_page=(2,)), 40, "its header lacks field 2"),
        (_page(_cells(40), 40, ONES, v2={}, drop_page=(5,)), 40, "its header lacks field 5"),
        (_page(_cells(40), 40, ONES, v2={}, drop_page=(6,)), 40, "its header lacks field 6"),
        (_page(_cells(40), 40, bytes([40 << 1, 2]), v2={}), 40, "its definition levels do not"),
        (_page(_cells(40), 40, ONES, reps=0), 40, "its values are not plain"),
    ],
    ids=[
        "crc",
        "encoding",
        "defs",
        "kind",
        "raw",
        "size",
        "negative",
        "short",
        "long",
        "levels",
        "nulls",
        "repeated",
        "v2-encoding",
        "no-raw",
        "no-values",
        "v2-no-values",
        "v2-no-nulls",
        "v2-no-defs",
        "v2-no-reps",
        "v2-levels",
        "reps-plain",
    ],
)
def test_a_damaged_hand_made_page_is_refused(pages: Any, page: bytes, chunk: int, why: str) -> None:
    column = pages(page, chunk)
    with pytest.raises(DamagedPageError, match=_damaged(why)):
        _read_all(column)


def _read_all(column: PageColumn) -> None:
    _read(column)
    column.end()


def test_levels_past_the_page_and_a_file_cut_short_are_refused(pages: Any) -> None:
    page = _page(_cells(40), 40, ONES)
    head = len(page) - 4 - len(ONES) - 160  # the header's size
    long_levels = page[:head] + (163).to_bytes(4, "little") + page[head + 4 :]
    with pytest.raises(DamagedPageError, match=_damaged("its levels run past its end")):
        _read(pages(long_levels))
    last = page[:head] + (162).to_bytes(4, "little") + page[head + 4 :]  # to the page's end
    with pytest.raises(DamagedPageError, match=_damaged("its 40 values do not fill its 166")):
        _read(pages(last))
    cut = pages(page[: head + 5], end=len(page))  # the file ends inside the levels
    with pytest.raises(DamagedPageError, match=_damaged("the file ends inside it")):
        _read(cut)
    cut = pages(page[:-8], end=len(page))  # the file ends inside the values
    with pytest.raises(DamagedPageError, match=_damaged("ends before the page's values")):
        _read(cut)
    required = pages(_page(_cells(40), 40, None, v2={}), levels=0)
    assert _read(required) == list(range(40))
    with pytest.raises(DamagedPageError, match=_damaged("its values are not plain")):
        _read(pages(_page(_cells(40), 40, ONES, v2={}), levels=0))  # levels in a required one


def test_rows_ending_on_a_page_boundary_with_pages_left_are_refused(pages: Any) -> None:
    column = pages(_page(_cells(20), 20, bytes([20 << 1, 1])) * 2)
    _read(column, 20)
    with pytest.raises(ValueError, match=r"^the file's columns hold more rows than its index"):
        column.end()


def test_a_column_read_into_a_strided_array_is_refused(pages: Any) -> None:
    column = pages(_page(_cells(40), 40, ONES))
    with pytest.raises(ValueError, match=r"^rows are read into a C-contiguous array only$"):
        column.take(np.empty((40, 8), np.uint8)[:, :4], _rows)


def test_lists_are_skipped_in_their_long_form_and_nest_no_deeper_than_allowed(
    pages: Any,
) -> None:
    long_list = bytes([0x19, 0xF3]) + _varint(19) + b"\x05" * 19  # 19 bytes (count > 14)
    fields, end = _pages._struct(long_list + b"\x00", 0, {}, 0)
    assert (fields, end) == ({}, len(long_list) + 1)
    exactly = bytes([0x19, 0x33, 1, 2, 3, 0])  # 3 bytes, then the stop: all the data left
    assert _pages._struct(exactly, 0, {}, 0) == ({}, 6)
    deep = bytes([0x19]) + bytes([0x19]) * 40  # lists of lists, deeper than _MAX_DEPTH
    with pytest.raises(ValueError, match="nested too deeply"):
        _pages._struct(deep + b"\x00" * 60, 0, {}, 0)
    with pytest.raises(DamagedPageError, match=r"does not parse \(a field of type 13\)"):
        _pages._header(pages(bytes([0x1D, 0]))._fd, 0, 2)


def test_other_repetition_level_encodings_are_read(pages: Any) -> None:
    assert _read(pages(_page(_cells(40), 40, ONES, reps=4))) == list(range(40))  # BIT_PACKED


def test_a_null_just_past_the_rows_asked_for_waits_for_them(pages: Any) -> None:
    levels = bytes([10 << 1, 1, 1 << 1, 0, 29 << 1, 1])
    column = pages(_page(_cells(39), 40, levels))
    assert _read(column, 10) == list(range(10))
    with pytest.raises(ValueError, match=r"^column 'x' is null at row 0; a rollout has"):
        _read(column, 30)


def test_a_chunk_whose_pages_end_early_is_refused_when_read_past(pages: Any) -> None:
    column = pages(_page(_cells(40), 40, ONES), 41)
    with pytest.raises(DamagedPageError, match=_damaged("its column chunk ends 1 values short")):
        _read(column, 41)


@pytest.mark.parametrize("first", [True, False])
def test_a_header_cut_by_its_chunk_does_not_parse(pages: Any, first: bool) -> None:
    """The chunk ends inside a header (the file does not): of its first page, or a later one."""
    half = _page(_cells(20), 20, bytes([20 << 1, 1]))
    end = 5 if first else len(half) + 5
    column = pages(half * 2, end=end)
    with pytest.raises(DamagedPageError, match=r"^not a readable Parquet file: the page header"):
        _read(column)


def _nested(levels: int, list_head: bool) -> bytes:
    """A header field nested `levels` deep: structs in structs, or lists of lists."""
    if list_head:  # a list field, lists of one list, and the last list empty
        return bytes([0x19]) + bytes([0x19]) * (levels - 1) + bytes([0x03]) + b"\x00"
    return bytes([0x1C]) * levels + b"\x00" * (levels + 1)


@pytest.mark.parametrize("lists", [False, True])
def test_headers_nest_as_deep_as_allowed_and_no_deeper(pages: Any, lists: bool) -> None:
    deepest = _pages._MAX_DEPTH + lists  # (a list's items are one level below it)
    ok = _nested(deepest, lists)
    assert _pages._header(pages(ok)._fd, 0, 1000) == ({}, len(ok))
    too_deep = pages(_nested(deepest + 1, lists))
    with pytest.raises(DamagedPageError, match=r"does not parse \(nested too deeply\)"):
        _pages._header(too_deep._fd, 0, 1000)


def test_varints_hold_64_bits_and_no_more(pages: Any) -> None:
    ten = b"\xff" * 9 + b"\x01"  # 64 bits
    assert _pages._varint(ten, 0) == ((1 << 64) - 1, 10)
    column = pages(bytes([0x15]) + b"\xff" * 10 + b"\x01\x00")  # 71 bits
    with pytest.raises(DamagedPageError, match=r"\(a varint longer than 64 bits\)"):
        _pages._header(column._fd, 0, 100)


def test_field_ids_are_read_as_zigzag_and_unwanted_ints_skipped() -> None:
    assert _pages._struct(bytes([0x05, 0x01, 0x04, 0x00]), 0, {1: None}, 0) == ({}, 4)
    assert _pages._struct(b"\x15\x04\x15\x06\x00", 0, {1: None}, 0) == ({1: 2}, 5)


def test_structs_inside_a_wanted_struct_count_towards_the_nesting_limit(pages: Any) -> None:
    """The data page header (wanted) holding statistics (skipped) nested to the limit."""

    def nested(depth: int) -> bytes:  # the header is depth 0, its field 5 depth 1, ...
        inner: dict[int, Any] = {1: 0}
        for _ in range(depth - 1):
            inner = {5: inner}
        return _thrift({1: 0, 5: inner})

    assert _pages._header(pages(nested(_pages._MAX_DEPTH))._fd, 0, 1000)[0][1] == 0
    with pytest.raises(DamagedPageError, match=r"does not parse \(nested too deeply\)"):
        _pages._header(pages(nested(_pages._MAX_DEPTH + 1))._fd, 0, 1000)


# ------------------------------------------------------------------- pages read ahead
# `Prefetch`: a thread reads a rollout's plain columns while its plan is made. The rows
# come out as `PageColumn.take` gives them, and a refusal at the same take.


def _pieces(take: Callable[[Any, Any], None], rows: int, piece: int) -> tuple[list[int], str]:
    """Rows taken `piece` at a time until all are in or one is refused: those got, and why."""
    got: list[int] = []
    for start in range(0, rows, piece):
        cells = np.empty((min(piece, rows - start), 4), np.uint8)
        try:
            take(cells, lambda i, first=start: f"row {first + i}")
        except ValueError as exc:
            return got, str(exc)
        got += cells.reshape(-1).view(np.int32).tolist()
    return got, ""


def _prefetch(columns: dict[str, PageColumn], rows: int, step: int, spare: int = 0) -> Prefetch:
    ahead = Prefetch(columns, rows, spare, step)
    ahead.name_rows(lambda row: f"row {row}")
    return ahead


_NULL_AT_7 = bytes([7 << 1, 1, 1 << 1, 0, 12 << 1, 1])  # 7 present, a null, 12 present
_THIRD_PAGES = {
    "none": _page(_cells(20, 40), 20, ONES),
    "crc": _page(_cells(20, 40), 20, ONES, crc=12345),
    "null": _page(_cells(19, 40), 20, _NULL_AT_7),
    "header": _page(_cells(20, 40), 20, ONES, kind=2),
}


@pytest.mark.parametrize("defect", list(_THIRD_PAGES))
@pytest.mark.parametrize("piece", [1, 7, 20, 60])
@pytest.mark.parametrize("step", [1, 13, 60])
def test_rows_read_ahead_come_and_are_refused_as_read_in_order(
    pages: Any, defect: str, piece: int, step: int
) -> None:
    data = _page(_cells(20), 20, ONES) + _page(_cells(20, 20), 20, ONES) + _THIRD_PAGES[defect]
    expected = _pieces(pages(data, 60).take, 60, piece)
    with _prefetch({"x": pages(data, 60)}, 60, step) as ahead:
        assert _pieces(ahead.columns["x"].take, 60, piece) == expected
    why = {
        "none": "",
        "crc": _damaged_text(data, "CRC checksum verification failed"),
        "null": "column 'x' is null at row 47; a rollout has a value at every step",
        "header": _damaged_text(data, "a page of type 2, not a data page of plain values"),
    }
    assert expected[1] == why[defect]
    # Refused at the row reading in order reaches it: the page's last row for its checksum,
    # the null's own row, its first row for its header. The pieces before it were handed out.
    refused_at = {"none": 60, "crc": 59, "null": 47, "header": 40}[defect]
    assert len(expected[0]) == (60 if defect == "none" else refused_at // piece * piece)


def _damaged_text(data: bytes, why: str) -> str:
    third = len(_page(_cells(20), 20, ONES)) * 2
    return f"not a readable Parquet file: column 'x', the page at byte {third}: {why}"


def test_a_column_goes_on_where_the_thread_stopped_at_another_columns_refusal(
    pages: Any,
) -> None:
    fine = _page(_cells(30), 30, ONES) + _page(_cells(30, 30), 30, ONES)
    damaged = _page(_cells(20), 20, ONES, crc=12345) + _page(_cells(40, 20), 40, ONES)
    with _prefetch({"y": pages(damaged, 60), "x": pages(fine, 60)}, 60, 10) as ahead:
        x, y = ahead.columns["x"], ahead.columns["y"]
        assert _pieces(y.take, 10, 10) == (list(range(10)), "")  # before the page's end
        # The thread stops at y's refusal (row 19), having read 10 rows of x: the other 50
        # are read here, in order.
        assert _pieces(x.take, 60, 25) == (list(range(60)), "")
        assert _pieces(y.take, 10, 10)[1].endswith("CRC checksum verification failed")


def test_a_buffer_of_the_leafs_size_becomes_its_array(pages: Any) -> None:
    data = _page(_cells(20), 20, ONES) + _page(_cells(20, 20), 20, ONES)
    with _prefetch({"x": pages(data)}, 40, 7, spare=3) as ahead:
        column = ahead.columns["x"]
        assert column.storage(42) is None  # another size
        buffer = column.storage(43)
        assert buffer is not None
        values = buffer.view(np.int32)
        column.take(values[:25].reshape(25, 1).view(np.uint8), _rows)  # read into place
        assert values[:25].tolist() == list(range(25))
        assert column.storage(43) is None  # no longer whole
        rest = np.empty((15, 4), np.uint8)
        column.take(rest, _rows)
        assert rest.reshape(-1).view(np.int32).tolist() == list(range(25, 40))
        with pytest.raises(ValueError, match=r"^rows are read into a C-contiguous array only$"):
            column.take(np.empty((4, 8), np.uint8)[:, :4], _rows)


def test_closing_ends_the_thread_even_before_rows_are_named(pages: Any) -> None:
    """A null met before the plan said how to name rows: closing lets the thread end."""
    ahead = Prefetch({"x": pages(_page(_cells(19), 20, _NULL_AT_7), 20)}, 20, 0, 20)
    ahead.close()
    assert not [t for t in threading.enumerate() if t.name == "trajkit-parquet-pages"]
    assert ahead.columns["x"].error is not None or ahead.columns["x"].done == 20
    with Prefetch({}, 20, 0, 20) as idle:  # no columns: no thread
        assert idle.columns == {}


def _damage_values(path: Path, column: str, group: int) -> None:
    """Flip a byte of `column`'s values near the end of row group `group`: a checksum fails."""
    metadata = pq.ParquetFile(path).metadata
    names = [metadata.schema.column(j).path for j in range(metadata.num_columns)]
    chunk = metadata.row_group(group).column(names.index(column))
    at = chunk.data_page_offset + chunk.total_compressed_size - 100  # in its last page's values
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damaged_first", [True, False])
def test_a_page_read_ahead_is_refused_in_its_place_among_the_files_refusals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spy: Spy, damaged_first: bool
) -> None:
    # The thread meets the damaged page first, whatever its place; a wrong episode id in an
    # earlier row is still the refusal reported, and one in a later row is not.
    monkeypatch.setattr(reader, "BATCH_BYTES", 3_000)
    table = ta.to_arrow(image_rollout(num_steps=12), layout="compact")
    ids = table.column("episode_id").to_pylist()
    ids[table.num_rows - 1 if damaged_first else 1] += 100
    edited = table.set_column(
        table.column_names.index("episode_id"), "episode_id", pa.array(ids, pa.int64())
    )
    path = tmp_path / "both.parquet"
    pq.write_table(
        edited,
        path,
        compression="none",
        use_dictionary=False,
        write_page_checksum=True,
        row_group_size=table.num_rows // 4,
    )
    groups = pq.ParquetFile(path).metadata.num_row_groups
    _damage_values(path, "obs.image", 0 if damaged_first else groups - 1)
    if damaged_first:
        match = r"^not a readable Parquet file: column 'obs.image', the page at byte \d+: CRC"
    else:
        match = r"^column 'episode_id' of rollout 0 holds \d+ at step 0, env 1,"
    with pytest.raises(ValueError, match=match):
        ta.read_parquet(path)
    assert "obs.image" in spy.direct[0]
    assert not _page_threads()


def _page_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "trajkit-parquet-pages"]


def test_plain_columns_are_read_into_the_rollouts_own_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Read ahead into buffers of a leaf's size (the plan's B guessed from the first rows):
    # those buffers are the rollout's arrays, no copy made.
    given: list[Any] = []
    real = _pages.Prefetched.storage

    def storage(self: _pages.Prefetched, rows: int) -> Any:
        buffer = real(self, rows)
        given.append(buffer)
        return buffer

    monkeypatch.setattr(_pages.Prefetched, "storage", storage)
    monkeypatch.setattr(reader, "PREFETCH_BYTES", 0)
    rs = [image_rollout(num_steps=6, seed=s) for s in range(2)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, compression="none")
    got = ta.read_parquet(path)
    assert got == rs
    assert len(given) == 2 * 4  # each leaf of each rollout
    assert all(buffer is not None for buffer in given)
    for r in got:
        assert isinstance(r.obses, dict)
        assert any(np.shares_memory(r.obses["image"], buffer) for buffer in given)


@pytest.mark.parametrize("guess", [0, 1, 3, 4], ids=["unknown", "fewer", "right", "more"])
def test_a_wrong_guess_of_the_envs_only_costs_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guess: int
) -> None:
    # Unknown envs (no step ends in the first rows): read in turn, as a buffer of the
    # wrong size could only be copied.
    monkeypatch.setattr(reader, "_envs", lambda first: guess)
    monkeypatch.setattr(reader, "PREFETCH_BYTES", 0)
    threads = _spy_prefetch(monkeypatch)
    rs = [image_rollout(num_steps=6, num_envs=3, seed=s) for s in range(2)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, compression="none")
    assert ta.read_parquet(path) == rs
    assert threads == [0, 0] if not guess else [4, 4]


def test_the_envs_are_guessed_from_the_first_step(tmp_path: Path) -> None:
    table = ta.to_arrow(image_rollout(num_steps=3, num_envs=5), layout="compact")
    assert reader._envs(table.to_batches()[0]) == 5
    assert reader._envs(table.slice(0, 4).to_batches()[0]) == 0  # not a whole step in it
    nulled = pa.table({"step": pa.array([0, None, 1], pa.int32())})
    assert reader._envs(nulled.to_batches()[0]) == 0


def test_no_thread_is_left_when_a_read_stops(tmp_path: Path) -> None:
    rs = [image_rollout(num_steps=4, seed=s) for s in range(3)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, compression="none")
    for r in ta.iter_parquet(path):
        assert r == rs[0]
        break
    assert not _page_threads()
    table = pq.read_table(path)
    steps = table.column("step").to_numpy().copy()
    steps[5] = 7  # the plan refuses the first rollout, its pages being read meanwhile
    broken = table.set_column(table.column_names.index("step"), "step", pa.array(steps))
    pq.write_table(broken, path, compression="none", use_dictionary=False)
    with pytest.raises(ValueError, match="not a full grid"):
        ta.read_parquet(path)
    assert not _page_threads()


@pytest.mark.parametrize("more", [0, 1])
def test_rollouts_from_prefetch_bytes_of_plain_cells_are_read_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, more: int
) -> None:
    threads = _spy_prefetch(monkeypatch)
    r = image_rollout(num_steps=6)  # plain cells: obs.image, obs.vector, out.actor, state
    path = tmp_path / "run.parquet"
    ta.write_parquet([r], path, compression="none")
    layout = json.loads(pq.read_table(path).column("trajkit_layout")[0].as_py())
    cells = sum(reader._widths(layout).values())  # bytes of a row
    monkeypatch.setattr(reader, "PREFETCH_BYTES", r.num_steps * r.batch_size * cells + more)
    assert ta.read_parquet(path) == [r]
    assert threads == [4 if not more else 0]


def _spy_prefetch(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The columns each rollout's `Prefetch` was given (0: read in turn), as they come."""
    threads: list[int] = []

    def prefetch(columns: dict[str, PageColumn], *args: Any) -> Prefetch:
        threads.append(len(columns))
        return Prefetch(columns, *args)

    monkeypatch.setattr(reader, "Prefetch", prefetch)
    return threads


_NULL_AT_47 = _page(_cells(20), 20, ONES) + _page(_cells(20, 20), 20, ONES) + _THIRD_PAGES["null"]


def test_a_refusal_met_before_the_rows_are_named_waits_for_their_names(pages: Any) -> None:
    # The thread meets the null (row 47) before the plan says how rows are named: the rows
    # before it are handed out meanwhile, and the refusal names its row as the plan says.
    ahead = Prefetch({"x": pages(_NULL_AT_47, 60)}, 60, 0, 10)
    with ahead:
        x = ahead.columns["x"]
        got = np.empty((47, 4), np.uint8)
        x.take(got[:40], _rows)  # the thread is held at row 47, naming it
        assert [t.daemon for t in _page_threads()] == [True]
        ahead.name_rows(lambda row: f"step {row}")
        x.take(got[40:], _rows)
        assert got.reshape(-1).view(np.int32).tolist() == list(range(47))
        with pytest.raises(ValueError, match=r"^column 'x' is null at step 47; a rollout"):
            x.take(np.empty((1, 4), np.uint8), _rows)


def _recorded(column: PageColumn, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Each `take` of `column`: the thread that made it, and its rows."""
    calls: list[tuple[str, int]] = []
    real = column.take

    def take(into: Any, rows: Any) -> None:
        calls.append((threading.current_thread().name, len(into)))
        real(into, rows)

    monkeypatch.setattr(column, "take", take)
    return calls


def test_rows_the_thread_did_not_reach_are_read_here_and_named_by_the_take(
    pages: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    damaged = _page(_cells(20), 20, ONES, crc=12345) + _page(_cells(40, 20), 40, ONES)
    x = pages(_NULL_AT_47, 60)
    calls = _recorded(x, monkeypatch)
    with _prefetch({"y": pages(damaged, 60), "x": x}, 60, 10) as ahead:
        got = np.empty((47, 4), np.uint8)
        ahead.columns["x"].take(got[:5], _rows)  # read by the thread
        with pytest.raises(ValueError, match=r"^column 'x' is null at row 47; a rollout"):
            ahead.columns["x"].take(np.empty((55, 4), np.uint8), lambda i: f"row {5 + i}")
    # The thread stopped at y's refusal (row 19), after x's first 10 rows: the rest, here.
    assert calls == [("trajkit-parquet-pages", 10), ("MainThread", 50)]


def test_the_thread_reads_step_rows_at_a_time_and_stops_when_closed(
    pages: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    column = pages(_page(_cells(40), 40, ONES))
    calls: list[int] = []
    box: list[Prefetch] = []
    real, made, held = column.take, threading.Event(), threading.Event()

    def take(into: Any, rows: Any) -> None:
        calls.append(len(into))
        if len(calls) == 2:  # held until closed (nothing else names rows)
            held.set()
            made.wait()
            box[0]._shared.named.wait()
        real(into, rows)

    monkeypatch.setattr(column, "take", take)
    box.append(Prefetch({"x": column}, 40, 0, 10))
    made.set()
    held.wait()
    box[0].close()
    assert calls == [10, 10]  # the rows it was reading when closed, then none
    assert box[0].columns["x"].done == 20
    assert not _page_threads()
    one_at_a_time = pages(_page(_cells(40), 40, ONES))
    calls2 = _recorded(one_at_a_time, monkeypatch)
    with _prefetch({"x": one_at_a_time}, 3, 0) as ahead:  # a step of 0 reads a row at a time
        ahead.columns["x"].take(np.empty((3, 4), np.uint8), _rows)
    assert calls2 == [("trajkit-parquet-pages", 1)] * 3


def test_a_column_read_ahead_after_rows_taken_is_refused_at_the_same_row(pages: Any) -> None:
    data = _page(_cells(20), 20, ONES) * 2 + _THIRD_PAGES["crc"]
    in_order = pages(data, 60)
    in_order.take(np.empty((20, 4), np.uint8), _rows)
    expected = _pieces(in_order.take, 40, 1)
    column = pages(data, 60)
    column.take(np.empty((20, 4), np.uint8), _rows)  # an earlier rollout's rows
    with _prefetch({"x": column}, 40, 40) as ahead:
        assert _pieces(ahead.columns["x"].take, 40, 1) == expected
    assert len(expected[0]) == 39


def test_a_failed_read_ahead_is_raised_where_its_rows_are_taken(
    pages: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = _page(_cells(20), 20, ONES) + _page(_cells(20, 20), 20, ONES) + _THIRD_PAGES["none"]
    third, real = 2 * len(_page(_cells(20), 20, ONES)), os.preadv

    def failing(fd: int, buffers: list[memoryview], offset: int) -> int:
        if offset >= third:
            raise OSError("the disk is gone")
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", failing)
    with _prefetch({"x": pages(data, 60)}, 60, 60) as ahead:
        got = np.empty((40, 4), np.uint8)
        ahead.columns["x"].take(got, _rows)  # the rows before the failed read
        assert got.reshape(-1).view(np.int32).tolist() == list(range(40))
        with pytest.raises(OSError, match="the disk is gone"):
            ahead.columns["x"].take(np.empty((1, 4), np.uint8), _rows)


def test_a_refusal_met_while_closing_is_named_by_its_row(
    pages: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    column = pages(_page(_cells(19), 20, _NULL_AT_7), 20)
    real, held = column.take, threading.Event()

    def take(into: Any, rows: Any) -> None:
        held.set()
        real(into, rows)

    monkeypatch.setattr(column, "take", take)
    ahead = Prefetch({"x": column}, 20, 0, 20)
    held.wait()
    ahead.close()  # before a plan named the rows: named by their number
    x = ahead.columns["x"]
    assert (x.done, str(x.error)) == (
        7,
        "column 'x' is null at row 7; a rollout has a value at every step",
    )


def test_rows_taken_into_their_buffer_elsewhere_are_copied_there(pages: Any) -> None:
    data = _page(_cells(20), 20, ONES) + _page(_cells(20, 20), 20, ONES)
    with _prefetch({"x": pages(data)}, 40, 40) as ahead:
        column = ahead.columns["x"]
        column.take(np.empty((8, 4), np.uint8), _rows)
        elsewhere = column.buffer[2:18].reshape(4, 4)  # (at byte 2: 8 rows / 4 bytes a row)
        column.take(elsewhere, _rows)
        assert elsewhere.reshape(-1).view(np.int32).tolist() == list(range(8, 12))


def test_cells_to_take_rows_into_are_the_buffers_own_until_rows_are_taken(pages: Any) -> None:
    # (A rollout whose rows are in another order takes its plain rows whole, as cells.)
    data = _page(_cells(20), 20, ONES) + _page(_cells(20, 20), 20, ONES)
    with _prefetch({"x": pages(data)}, 40, 40, spare=2) as ahead:
        column = ahead.columns["x"]
        cells = column.cells(30)
        assert cells.shape == (30, 4)
        assert np.shares_memory(cells, column.buffer)
        column.take(cells, _rows)
        assert cells.reshape(-1).view(np.int32).tolist() == list(range(30))
        rest = column.cells(10)
        assert rest.shape == (10, 4)
        assert not np.shares_memory(rest, column.buffer)  # rows were taken: new ones
        column.take(rest, _rows)
        assert rest.reshape(-1).view(np.int32).tolist() == list(range(30, 40))
    plain = pages(data)
    assert plain.cells(3).shape == (3, 4)


# ------------------------------------------------------------- number and boolean columns

NUMBERS = {
    "i": pa.int32(),
    "l": pa.int64(),
    "f": pa.float32(),
    "d": pa.float64(),
    "b": pa.bool_(),
}


def _numbers_file(tmp_path: Path, rows: int, nullable: bool, **options: Any) -> tuple[Path, Any]:
    """A file of one column of each type `number_columns` reads, and its table."""
    rng = np.random.default_rng(rows)
    values = {
        "i": rng.integers(-(2**31), 2**31, rows, dtype=np.int32),
        "l": rng.integers(-(2**63), 2**63 - 1, rows, dtype=np.int64),
        "f": rng.standard_normal(rows).astype(np.float32),
        "d": rng.standard_normal(rows),
        "b": rng.random(rows) < 0.4,
    }
    fields = [pa.field(name, kind, nullable=nullable) for name, kind in NUMBERS.items()]
    table = pa.table(list(values.values()), schema=pa.schema(fields))
    path = tmp_path / "numbers.parquet"
    base = {"compression": "none", "use_dictionary": False, "write_page_checksum": True}
    pq.write_table(table, path, **{**base, **options})
    return path, table


def _number_columns(path: Path, fds: list[int]) -> dict[str, PageColumn]:
    fds.append(os.open(path, os.O_RDONLY))
    file = pq.ParquetFile(path)
    return number_columns(file, file.schema_arrow.names, fds[-1])


@pytest.fixture
def fds() -> Iterator[list[int]]:
    """File descriptors to close after the test."""
    opened: list[int] = []
    yield opened
    for fd in opened:
        os.close(fd)


@pytest.mark.parametrize("version", ["1.0", "2.0"])  # (v2 stores booleans RLE-encoded)
@pytest.mark.parametrize("nullable", [True, False], ids=["nullable", "required"])
def test_number_columns_read_what_pyarrow_reads_in_any_pieces(
    tmp_path: Path, fds: list[int], version: str, nullable: bool
) -> None:
    path, table = _numbers_file(
        tmp_path, 40, nullable, data_page_version=version, data_page_size=20, row_group_size=13
    )
    columns = _number_columns(path, fds)
    assert sorted(columns) == sorted(NUMBERS)
    assert isinstance(columns["b"], BitColumn)
    for name, column in columns.items():
        got = np.empty(40, table.schema.field(name).type.to_pandas_dtype())
        for a, b in [(0, 1), (1, 9), (9, 30), (30, 40)]:
            column.take(got[a:b], _rows)
        column.end()
        np.testing.assert_array_equal(got, table.column(name).to_numpy())


def test_only_numbers_read_as_they_are_counting_no_nulls_qualify(
    tmp_path: Path, fds: list[int]
) -> None:
    rows = 6
    table = pa.table(
        {
            "i": pa.array(range(rows), pa.int32()),
            "narrow": pa.array(range(rows), pa.int8()),  # stored as INT32, read as int8
            "date": pa.array(range(rows), pa.date32()),  # stored as INT32, read as dates
            "null": pa.array([1, None, 3, 4, 5, 6], pa.int32()),  # counts a null
            "text": pa.array(["a"] * rows),
            "fixed": pa.array([b"abcd"] * rows, pa.binary(4)),
            "list": pa.array([[1, 2]] * rows, pa.list_(pa.int32(), 2)),
        }
    )
    path = tmp_path / "kinds.parquet"
    pq.write_table(table, path, compression="none", use_dictionary=False)
    assert sorted(_number_columns(path, fds)) == ["i"]
    pq.write_table(table, path, compression="none", use_dictionary=["i"])
    assert sorted(_number_columns(path, fds)) == []
    pq.write_table(table, path, compression="snappy", use_dictionary=False)
    assert sorted(_number_columns(path, fds)) == []
    pq.write_table(table, path, compression="none", use_dictionary=False, write_statistics=False)
    assert sorted(_number_columns(path, fds)) == []  # (nulls not counted)


def _rollout_file(
    tmp_path: Path,
    nulls: bool,
    column: str = "is_first",
    row: int = 5,
    steps: int = 3,
    **options: Any,
) -> tuple[Path, Any]:
    """A compact rollout of 2 envs written plain, `column` null at `row` where `nulls`.

    Rewritten by pyarrow with `options` where `nulls`. Returns its path and its table.
    """
    r = trajkit.testing.example_rollout(num_steps=steps, num_envs=2)
    path = tmp_path / "rollout.parquet"
    ta.write_parquet(r, path, layout="compact", compression="none")
    table = pq.read_table(path)
    if nulls:
        values = table.column(column).to_pylist()
        values[row] = None
        i = table.column_names.index(column)
        kind = table.schema.field(column).type
        table = table.set_column(i, column, pa.array(values, kind))
        pq.write_table(table, path, compression="none", use_dictionary=False, **options)
    return path, table


def _hide_nulls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every column chunk's statistics say it holds no null (statistics that lie)."""
    real = _pages._counted
    monkeypatch.setattr(_pages, "_counted", lambda c, nulls: nulls == "none" or real(c, nulls))


def _calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[tuple[tuple[Any, ...], Any]]:
    """Each call of the reader's `name` (a function of `_pages`): its arguments, its result."""
    calls: list[tuple[tuple[Any, ...], Any]] = []
    real = getattr(_pages, name)

    def spy(*args: Any) -> Any:
        calls.append((args, real(*args)))
        return calls[-1][1]

    monkeypatch.setattr(reader, name, spy)
    return calls


def _runs_file(tmp_path: Path) -> tuple[Path, list[trajkit.Rollout]]:
    """Three compact rollouts written plain, a row group or more each; and the rollouts."""
    rs = [trajkit.testing.example_rollout(num_steps=3, num_envs=2, seed=s) for s in range(3)]
    path = tmp_path / "runs.parquet"
    ta.write_parquet(rs, path, layout="compact", compression="none", row_group_bytes=100)
    return path, rs


def test_a_rollouts_plan_is_read_from_its_pages_where_they_count_no_nulls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _calls(monkeypatch, "number_columns")

    def read() -> list[list[str]]:  # the plan's columns found, at each read
        return [sorted(found) for (_, names, _), found in calls if names == PLAN_COLUMNS]

    path, _ = _rollout_file(tmp_path, nulls=False)
    ta.read_parquet(path)
    assert read() == [sorted(PLAN_COLUMNS)]
    path, _ = _rollout_file(tmp_path, nulls=True)  # counted: pyarrow reads them, as before
    with pytest.raises(ValueError, match=r"^column 'is_first' is null at step 2, env 1 \(row 5\);"):
        ta.read_parquet(path)
    assert read()[-1] == sorted(set(PLAN_COLUMNS) - {"is_first"})


def test_a_null_the_statistics_do_not_count_is_refused_at_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = _rollout_file(tmp_path, nulls=True)
    _hide_nulls(monkeypatch)
    with pytest.raises(
        ValueError,
        match=r"^column 'is_first' is null at row 5 of the file; a rollout has a value at every",
    ):
        ta.read_parquet(path)


@pytest.fixture
def bits(tmp_path: Path) -> Iterator[Any]:
    """`bits(data, levels)`: a `BitColumn` of 40 booleans over `data`."""
    fds: list[int] = []

    def make(data: bytes, levels: int = 1) -> BitColumn:
        path = tmp_path / f"bits{len(fds)}.bin"
        path.write_bytes(data)
        fds.append(os.open(path, os.O_RDONLY))
        return BitColumn(fds[-1], "x", [(0, len(data), 40)], 1, levels)

    yield make
    for fd in fds:
        os.close(fd)


FLAGS = [i % 3 == 0 for i in range(40)]
PACKED = np.packbits(FLAGS, bitorder="little").tobytes()  # 5 bytes


def _hybrid_of(flags: list[bool]) -> bytes:
    """`flags` RLE-encoded as a data page v2 stores booleans: a 4-byte length, then groups."""
    groups = bytes([(5 << 1) | 1]) + np.packbits(flags, bitorder="little").tobytes()
    return len(groups).to_bytes(4, "little") + groups


def _read_bits(column: BitColumn, pieces: tuple[int, ...] = (0, 7, 8, 40)) -> list[bool]:
    got = np.empty(40, np.bool_)
    for a, b in itertools.pairwise(pieces):
        column.take(got[a:b], _rows)
    column.end()
    return got.tolist()


def test_hand_made_boolean_pages_read_back(bits: Any) -> None:
    assert _read_bits(bits(_page(PACKED, 40, ONES))) == FLAGS
    assert _read_bits(bits(_page(PACKED, 40, None), levels=0)) == FLAGS
    assert _read_bits(bits(_page(_hybrid_of(FLAGS), 40, ONES, v2={4: 3}))) == FLAGS
    assert _read_bits(bits(_page(_hybrid_of(FLAGS), 40, ONES, encoding=3))) == FLAGS
    runs = bytes([20 << 1, 1, 20 << 1, 0])  # 20 trues, 20 falses
    page = _page(len(runs).to_bytes(4, "little") + runs, 40, ONES, v2={4: 3})
    assert _read_bits(bits(page)) == [True] * 20 + [False] * 20
    halves = _page(PACKED[:2], 16, bytes([16 << 1, 1])) + _page(
        np.packbits(FLAGS[16:], bitorder="little").tobytes(), 24, bytes([24 << 1, 1])
    )
    assert _read_bits(bits(halves), (0, 15, 17, 40)) == FLAGS  # pieces across pages


@pytest.mark.parametrize(
    ("page", "why"),
    [
        (_page(PACKED + b"\x00", 40, ONES), "its 40 values do not fill its 12 bytes"),
        (_page(PACKED, 40, ONES, crc=1), "CRC checksum verification failed"),
        (_page(PACKED, 40, ONES, encoding=2), "its values are not plain"),
        (_page((9).to_bytes(4, "little") + PACKED, 40, ONES, v2={4: 3}), "its values do not"),
        (_page(bytes(4), 40, ONES, v2={4: 3}), "its values do not parse"),  # no groups
        (_page(_hybrid_of(FLAGS)[:-1], 40, ONES, v2={4: 3}), "its values do not parse"),
        (_page(b"\x02\x00\x00\x00" + bytes([40 << 1, 2]), 40, ONES, v2={4: 3}), "its values do"),
    ],
    ids=["size", "crc", "encoding", "length", "empty", "cut", "run-of-2"],
)
def test_a_damaged_boolean_page_is_refused(bits: Any, page: bytes, why: str) -> None:
    with pytest.raises(DamagedPageError, match=_damaged(why)):
        _read_bits(bits(page))


def test_a_null_among_booleans_is_refused_at_its_row(bits: Any) -> None:
    levels = bytes([10 << 1, 1, 1 << 1, 0, 29 << 1, 1])  # the value at row 10 is null
    column = bits(_page(np.packbits(FLAGS[:39], bitorder="little").tobytes(), 40, levels))
    got = np.empty(40, np.bool_)
    column.take(got[:4], _rows)
    with pytest.raises(ValueError, match=r"^column 'x' is null at row 6; a rollout"):
        column.take(got[4:], _rows)
    assert got[:4].tolist() == FLAGS[:4]


def _page_count(path: Path, name: str) -> int:
    """The data pages of column `name` in the file's first row group, by their headers."""
    file = pq.ParquetFile(path)
    j = file.schema_arrow.names.index(name)
    chunk = file.metadata.row_group(0).column(j)
    at = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    end, pages = at + chunk.total_compressed_size, 0
    fd = os.open(path, os.O_RDONLY)
    try:
        while at < end:
            header, size = _pages._header(fd, at, end - at)
            at, pages = at + size + header[3], pages + (header[1] != 2)  # (2: a dictionary)
    finally:
        os.close(fd)
    return pages


def test_pages_are_cut_by_their_size_not_at_20000_rows(tmp_path: Path) -> None:
    if not ta._page_rows():
        pytest.skip("this pyarrow's ParquetWriter has no max_rows_per_page")
    r = trajkit.testing.example_rollout(num_steps=2499, num_envs=20)  # 50,000 rows
    path = tmp_path / "pages.parquet"
    for layout in ("compact", "readable"):
        ta.write_parquet(r, path, layout=layout, compression="none")
        assert _page_count(path, "step") == 1  # 200 KB: one page
        assert _page_count(path, "is_first") == 1
    ta.write_parquet(r, path, layout="compact", compression="none", max_rows_per_page=20000)
    assert _page_count(path, "step") == 3  # (the caller's option first)
    assert ta.read_parquet(path) == [r]


def test_pages_keep_pyarrows_rows_where_it_cannot_be_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Writer:
        def __init__(self, where: str, schema: Any, *, compression: str = "snappy") -> None:
            pass

    parquet = type("parquet", (), {"ParquetWriter": Writer})
    ta._page_rows.cache_clear()
    try:
        with monkeypatch.context() as patched:
            patched.setattr(ta, "require", lambda *args: parquet)
            assert ta._page_rows() == {}
    finally:
        ta._page_rows.cache_clear()
    assert ta._page_rows() == {"max_rows_per_page": 1 << 20}


def test_only_columns_counting_only_nulls_qualify_as_null_columns(
    tmp_path: Path, fds: list[int]
) -> None:
    rows = 6
    table = pa.table(
        {
            "text": pa.nulls(rows, pa.string()),
            "bytes": pa.nulls(rows, pa.binary()),
            "number": pa.nulls(rows, pa.float32()),
            "some": pa.array([None, "a", None, None, None, None]),  # one value
            "none": pa.array(["a"] * rows),
            "list": pa.nulls(rows, pa.list_(pa.int32())),  # nested: its levels go deeper
        }
    )
    path = tmp_path / "nulls.parquet"
    pq.write_table(table, path, compression="none", use_dictionary=False)
    fds.append(os.open(path, os.O_RDONLY))
    file = pq.ParquetFile(path)
    found = null_columns(file, file.schema_arrow.names, fds[-1])
    assert sorted(found) == ["bytes", "number", "text"]
    for column in found.values():
        column.skip(2)
        column.skip(4)
        column.end()
    pq.write_table(table, path, compression="none", use_dictionary=False, write_statistics=False)
    assert null_columns(pq.ParquetFile(path), ["text"], fds[-1]) == {}


@pytest.fixture
def nulls(tmp_path: Path) -> Iterator[Any]:
    """`nulls(data)`: a `NullColumn` of 40 rows over `data`."""
    fds: list[int] = []

    def make(data: bytes) -> NullColumn:
        path = tmp_path / f"nulls{len(fds)}.bin"
        path.write_bytes(data)
        fds.append(os.open(path, os.O_RDONLY))
        return NullColumn(fds[-1], "x", [(0, len(data), 40)], 0, 1)

    yield make
    for fd in fds:
        os.close(fd)


ABSENT = bytes([40 << 1, 0])  # an RLE run of 40 nulls


def test_hand_made_pages_of_nulls_are_gone_over_and_checked(nulls: Any) -> None:
    column = nulls(_page(b"", 40, ABSENT))
    column.skip(40)
    column.end()
    halves = nulls(_page(b"", 25, bytes([25 << 1, 0]), v2={2: 25}) + _page(b"", 15, bytes([30, 0])))
    halves.skip(10)
    halves.skip(30)
    halves.end()
    with pytest.raises(DamagedPageError, match=_damaged("its statistics count only nulls, its")):
        nulls(_page(_cells(1), 40, bytes([(5 << 1) | 1]) + b"\x00" * 4 + b"\x01")).skip(40)
    with pytest.raises(DamagedPageError, match=_damaged("its 40 values do not fill its 10 bytes")):
        nulls(_page(b"\x00" * 4, 40, ABSENT)).skip(40)
    with pytest.raises(DamagedPageError, match=_damaged("its definition levels do not parse")):
        nulls(_page(b"", 40, bytes([40 << 1, 2]))).skip(40)
    with pytest.raises(DamagedPageError, match=_damaged("CRC checksum verification failed")):
        nulls(_page(b"", 40, ABSENT, crc=7)).skip(40)


def test_a_null_among_numbers_the_statistics_do_not_count_is_refused_at_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = _rollout_file(tmp_path, True, "reward", 3)
    with pytest.raises(ValueError, match=r"^column 'reward' is null at step 1, env 1 \(row 3\)"):
        ta.read_parquet(path)  # counted: read by pyarrow, named by the rollout's grid
    _hide_nulls(monkeypatch)
    with pytest.raises(ValueError, match=r"^column 'reward' is null at row 3 of the file; a"):
        ta.read_parquet(path)


def test_the_first_pass_reads_the_rollout_and_layout_columns_from_their_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    numbers, texts = _calls(monkeypatch, "number_columns"), _calls(monkeypatch, "text_column")
    path, rs = _runs_file(tmp_path)
    assert ta.read_parquet(path) == rs
    assert (["rollout"], ["rollout"]) in [(list(args[1]), list(found)) for args, found in numbers]
    assert [type(column) for _, column in texts] == [TextColumn]


def test_a_null_in_the_rollout_column_is_refused_once_the_columns_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = _runs_file(tmp_path)
    table = pq.read_table(path)
    ids = table.column("rollout").to_pylist()
    ids[7] = None
    i = table.column_names.index("rollout")
    table = table.set_column(i, "rollout", pa.array(ids, pa.int32()))
    pq.write_table(table, path, compression="none", use_dictionary=False, row_group_size=5)
    with pytest.raises(ValueError, match=r"^column 'rollout' is null at row 7$"):
        ta.read_parquet(path)  # counted: pyarrow's, as before
    _hide_nulls(monkeypatch)
    with pytest.raises(ValueError, match=r"^column 'rollout' is null at row 7 of the file; a"):
        ta.read_parquet(path)
    extra = table.append_column("obs.extra", pa.array(np.zeros(table.num_rows)))
    pq.write_table(extra, path, compression="none", use_dictionary=False, row_group_size=5)
    with pytest.raises(ValueError, match=r"^the table has a column 'obs.extra'"):
        ta.read_parquet(path)  # (the columns are checked before the null is refused)


def test_a_damaged_page_of_the_rollout_column_is_refused_at_once(tmp_path: Path) -> None:
    r = trajkit.testing.example_rollout(num_steps=3, num_envs=2)
    path = tmp_path / "runs.parquet"
    ta.write_parquet(r, path, layout="compact", compression="none")
    table = pq.read_table(path).append_column("obs.extra", pa.array(np.zeros(6)))
    pq.write_table(table, path, compression="none", use_dictionary=False, write_page_checksum=True)
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)  # `rollout`
    data = bytearray(path.read_bytes())
    data[chunk.data_page_offset + chunk.total_compressed_size - 1] ^= 1  # a value's bit
    path.write_bytes(bytes(data))
    with pytest.raises(
        DamagedPageError, match=r"^not a readable Parquet file: column 'rollout', the page at"
    ):
        ta.read_parquet(path)  # before the extra column is refused


def test_a_null_among_rle_booleans_is_refused_at_its_row(bits: Any) -> None:
    levels = bytes([10 << 1, 1, 1 << 1, 0, 29 << 1, 1])  # the value at row 10 is null
    runs = bytes([39 << 1, 1])  # the 39 values stored: a run of trues, no more
    column = bits(_page(len(runs).to_bytes(4, "little") + runs, 40, levels, v2={2: 1, 4: 3}))
    got = np.empty(40, np.bool_)
    with pytest.raises(ValueError, match=r"^column 'x' is null at row 10; a rollout"):
        column.take(got, _rows)
    assert got[:10].tolist() == [True] * 10


def test_statistics_that_do_not_count_nulls_count_as_unknown() -> None:
    def chunk(has: bool, nulls: int, values: int = 5) -> Any:
        statistics = type("S", (), {"has_null_count": has, "null_count": nulls})()
        return type("C", (), {"statistics": statistics, "num_values": values})()

    assert _pages._counted(chunk(True, 0), "none")
    assert not _pages._counted(chunk(False, 0), "none")
    assert _pages._counted(chunk(True, 5), "all")
    assert not _pages._counted(chunk(False, 5), "all")
    assert not _pages._counted(chunk(True, 4), "all")
    assert not _pages._counted(type("C", (), {"statistics": None, "num_values": 5})(), "none")
    assert _pages._counted(chunk(False, 0), "any")


def test_the_plan_reads_its_first_rows_first(
    tmp_path: Path, fds: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, table = _numbers_file(tmp_path, 40, nullable=True)
    columns = _number_columns(path, fds)
    monkeypatch.setattr(reader, "FIRST_ROWS", 16)
    pages = reader._Pages(pa, [table.schema.field(name) for name in columns], columns)
    batches = list(pages.take(40))
    assert [batch.num_rows for batch in batches] == [16, 24]
    joined = pa.Table.from_batches(batches)
    for name in columns:  # each column of numbers one array, both batches slices of it
        parts = [to_numpy(batch.column(name)) for batch in batches]
        whole = to_numpy(joined.column(name))
        assert whole.tolist() == np.concatenate(parts).tolist()
        if whole.dtype != np.bool_:  # (booleans are packed into bits in between)
            assert all(np.shares_memory(whole, part) for part in parts), name
    columns = _number_columns(path, fds)
    pages = reader._Pages(pa, [table.schema.field(name) for name in columns], columns)
    assert [batch.num_rows for batch in pages.take(16)] == [16]
    assert [batch.num_rows for batch in pages.take(24)] == [16, 8]


def test_a_hidden_null_in_a_later_row_group_is_named_by_its_row_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The other columns' numbers are read by the threads that decode the rest, each its own
    # row groups: a row is named by where its row group starts.
    path, _ = _rollout_file(tmp_path, True, "reward", 13, steps=9, row_group_size=5)
    _hide_nulls(monkeypatch)
    with pytest.raises(ValueError, match=r"^column 'reward' is null at row 13 of the file; a"):
        ta.read_parquet(path)


# -------------------------------------------------------------------------- columns of text


def _text_values(*texts: bytes) -> bytes:
    """Plain BYTE_ARRAY values: each a 4-byte length, then its bytes."""
    return b"".join(len(t).to_bytes(4, "little") + t for t in texts)


@pytest.fixture
def text(tmp_path: Path) -> Iterator[Any]:
    """`text(data, rows)`: a `TextColumn` of `rows` rows over `data`."""
    fds: list[int] = []

    def make(data: bytes, rows: int = 40, levels: int = 1) -> TextColumn:
        path = tmp_path / f"text{len(fds)}.bin"
        path.write_bytes(data)
        fds.append(os.open(path, os.O_RDONLY))
        return TextColumn(fds[-1], "x", [(0, len(data), rows)], 0, levels)

    yield make
    for fd in fds:
        os.close(fd)


FIRST_ONLY = bytes([(1 << 1) | 1, 0b00000001, 32 << 1, 0])  # row 0 holds a value, 39 nulls


def test_hand_made_pages_of_text_read_back_in_any_pieces(text: Any) -> None:
    column = text(_page(_text_values(b"layout"), 40, FIRST_ONLY))
    assert column.texts(1) == [b"layout"]
    assert column.texts(39) == []
    column.end()
    two = _page(_text_values(b"a"), 20, bytes([(1 << 1) | 1, 1, 12 << 1, 0]))
    two += _page(_text_values(b"b", b"c"), 20, bytes([(1 << 1) | 1, 0b101, 12 << 1, 0]), v2={})
    column = text(two)
    assert column.texts(19) == [b"a"]
    assert column.texts(3) == [b"b"]  # rows 19-21: the second page's first value at row 20
    assert column.texts(18) == [b"c"]
    column.end()
    required = text(_page(_text_values(b"a", b"", b"bc"), 3, None), 3, levels=0)
    assert required.texts(2) == [b"a", b""]
    assert required.texts(1) == [b"bc"]


@pytest.mark.parametrize(
    ("page", "why"),
    [
        (_page(_text_values(b"layout") + b"x", 40, FIRST_ONLY), "its values do not fill its 11"),
        (_page(_text_values(b"layout")[:-1], 40, FIRST_ONLY), "its values do not fill its 9"),
        (_page(b"", 40, FIRST_ONLY), "its values do not fill its 0 bytes"),
        (_page(_text_values(b"layout"), 40, bytes([40 << 1, 2])), "its definition levels do"),
        (_page(_text_values(b"layout"), 40, FIRST_ONLY, crc=3), "CRC checksum verification"),
    ],
    ids=["long", "short", "none", "levels", "crc"],
)
def test_a_damaged_page_of_text_is_refused(text: Any, page: bytes, why: str) -> None:
    with pytest.raises(DamagedPageError, match=_damaged(why)):
        text(page).texts(40)


def test_only_plain_strings_qualify_as_text(tmp_path: Path, fds: list[int]) -> None:
    table = pa.table(
        {
            "s": pa.array(["a", None, None]),
            "b": pa.array([b"a", None, None]),
            "n": pa.array([1, 2, 3], pa.int32()),
        }
    )
    path = tmp_path / "text.parquet"
    pq.write_table(table, path, compression="none", use_dictionary=False)
    fds.append(os.open(path, os.O_RDONLY))
    file = pq.ParquetFile(path)
    assert isinstance(text_column(file, "s", fds[-1]), TextColumn)
    assert text_column(file, "b", fds[-1]) is None  # bytes, not text
    assert text_column(file, "n", fds[-1]) is None
    pq.write_table(table, path, compression="none", use_dictionary=True)
    assert text_column(pq.ParquetFile(path), "s", fds[-1]) is None


def test_a_layout_read_from_its_pages_is_checked_to_be_utf8(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _calls(monkeypatch, "text_column")
    path, _ = _runs_file(tmp_path)
    table = pq.read_table(path)  # the first row's layout rewritten, its first byte not UTF-8
    layouts = table.column("trajkit_layout").to_pylist()
    layouts[0] = "\udcff" + layouts[0][1:]
    i = table.column_names.index("trajkit_layout")
    bad = pa.array([None if t is None else t.encode("utf-8", "surrogateescape") for t in layouts])
    pq.write_table(
        table.set_column(i, "trajkit_layout", bad.cast(pa.binary()).view(pa.string())),
        path,
        compression="none",
        use_dictionary=False,
    )
    with pytest.raises(ValueError, match=r"^not a readable Parquet file: .*(UTF-?8|utf-?8)"):
        ta.read_parquet(path)
    assert type(calls[-1][1]) is TextColumn
