"""Plain, uncompressed Parquet pages of a compact leaf, read straight into a rollout's arrays.

A compact leaf's column (`fixed_size_binary`, one cell's bytes per row) written without
compression or dictionary (as `write_parquet(..., compression="none")` writes it) holds its
rows' bytes as they lie in the rollout's array, a page at a time behind each page's header.
pyarrow would read each page, copy its values into an Arrow array, which the reader then
copies into the rollout: here the values are read from the file into the rollout's array
directly (`os.preadv`), one copy as the native `load` makes, and each page's CRC-32 is
checked on them (zlib-ng's when installed) before the rollout is handed out.

The pages of a rollout's plain columns are read by a thread (`Prefetch`) while the reader
makes the rollout's plan from its small columns, into buffers that become the rollout's
arrays (when the first rows tell its envs); a refusal the thread meets is raised where
reading the rows in order would have raised it.

A rollout's plan is made from its small columns (`step`, `env` and its flags): written
plain, their values are integers or bits as NumPy holds them, and are read so too
(`number_columns`, `BitColumn`), at about ten times pyarrow's speed for such columns, where
every column chunk's statistics say it holds no null (a null is then named by its row of
the file, not by its step and env as the plan would: files with nulls go through pyarrow).

The first pass reads the `rollout` column so, and the layout column, strings most of whose
rows are null (`TextColumn`: each page's levels and values read whole).

Only what such a column can hold is read here: data pages (v1 or v2) of PLAIN values whose
definition levels say no row is null, in row groups with no dictionary. Anything else (a
column a tool rewrote with compression or a dictionary, a file read from a URL) is decoded
by pyarrow as before, column by column (`plain_columns` decides once per file). A page
header is read by a small reader of Thrift's compact protocol, which Parquet's headers use;
a header that does not parse, a page that does not fit its column chunk, a page whose sizes
disagree with its values, or one whose checksum does not match is refused as a damaged file.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Literal

import numpy as np
from typing_extensions import Self

from trajkit._base.types import AnyArray
from trajkit._io.crc import crc32

__all__ = [
    "BitColumn",
    "NullColumn",
    "PageColumn",
    "Prefetch",
    "Prefetched",
    "TextColumn",
    "null_columns",
    "number_columns",
    "plain_columns",
    "text_column",
]

_PLAIN_ENCODINGS = frozenset({"PLAIN", "RLE", "BIT_PACKED"})
_MAX_HEADER = 16 << 20  # pyarrow's own limit on a page header's size
_FIRST_READ = 256  # bytes read for a header first (a compact leaf's has no statistics)
_MAX_DEPTH = 32  # nested structs and lists in a header (a hostile one could nest deeper)

# Parquet's enums (parquet.thrift)
_DATA_PAGE, _DATA_PAGE_V2 = 0, 3
_PLAIN, _RLE = 0, 3

# Thrift compact protocol field types
_TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)

_V1 = {1: None, 2: None, 3: None, 4: None}  # num_values, encoding, def and rep level encodings
_V2 = {1: None, 2: None, 3: None, 4: None, 5: None, 6: None}  # ... nulls, rows, level lengths
_HEADER: dict[int, Any] = {1: None, 2: None, 3: None, 4: None, 5: _V1, 8: _V2}

Where = Callable[[int], str]


class DamagedPageError(ValueError):
    """A page of a plain column that cannot be what the file says it is."""


def plain_columns(
    file: Any, names: Iterable[str], widths: dict[str, int], fd: int
) -> dict[str, PageColumn]:
    """The columns among `names` whose pages can be read straight into a rollout.

    `widths`: each compact leaf column's cell size in bytes. A column qualifies when it is
    `FIXED_LEN_BYTE_ARRAY` of that width, never repeated, and every row group holds it
    uncompressed, without a dictionary, in plain values; `fd` reads the file.
    """
    found: dict[str, PageColumn] = {}
    for column, chunks in _plain(file, names, "any"):
        name = column.path
        if column.physical_type == "FIXED_LEN_BYTE_ARRAY" and column.length == widths.get(name):
            found[name] = PageColumn(fd, name, chunks, widths[name], column.max_definition_level)
    return found


def number_columns(file: Any, names: Iterable[str], fd: int) -> dict[str, PageColumn]:
    """The columns among `names` of plain numbers (or booleans) that count no nulls.

    As `plain_columns`, for columns of 32- or 64-bit integers or floats, or booleans, whose
    Arrow type is the one their values have (not a narrower integer, a date, ...), and
    whose every column chunk declares, in its statistics, that it holds no null. Their
    values are read into NumPy arrays of that type (`take`; booleans unpacked from bits).
    """
    arrow = file.schema_arrow
    found: dict[str, PageColumn] = {}
    for column, chunks in _plain(file, names, "none"):
        name, kind = column.path, column.physical_type
        if kind in _NUMBERS and str(arrow.field(name).type) == _NUMBERS[kind][0]:
            dtype, levels = _NUMBERS[kind][1], column.max_definition_level
            make = BitColumn if dtype == np.bool_ else PageColumn
            found[name] = make(fd, name, chunks, dtype.itemsize, levels)
    return found


def null_columns(file: Any, names: Iterable[str], fd: int) -> dict[str, NullColumn]:
    """The columns among `names`, of any type, whose every chunk counts only nulls.

    As `plain_columns`, where each column chunk's statistics say all its values are null
    (a rollout's `info` without infos, its `next_obs` without final observations): their
    pages' definition levels are read, and checked to say so (`NullColumn`).
    """
    found: dict[str, NullColumn] = {}
    for column, chunks in _plain(file, names, "all"):
        found[column.path] = NullColumn(fd, column.path, chunks, 0, 1)
    return found


def text_column(file: Any, name: str, fd: int) -> TextColumn | None:
    """Column `name` where it is plain strings (at most one level of nulls), else `None`."""
    for column, chunks in _plain(file, [name], "any"):
        if column.physical_type == "BYTE_ARRAY" and str(file.schema_arrow.field(name).type) in (
            "string",
            "large_string",
        ):
            return TextColumn(fd, name, chunks, 0, column.max_definition_level)
    return None


_NUMBERS: dict[str, tuple[str, np.dtype[Any]]] = {
    "INT32": ("int32", np.dtype(np.int32)),
    "INT64": ("int64", np.dtype(np.int64)),
    "FLOAT": ("float", np.dtype(np.float32)),
    "DOUBLE": ("double", np.dtype(np.float64)),
    "BOOLEAN": ("bool", np.dtype(np.bool_)),
}
"""Parquet's physical types of numbers: the Arrow type read as is, and its values' dtype."""

Nulls = Literal["any", "none", "all"]
"""What each chunk's statistics must say of a column's nulls: anything, none, all values."""


def _plain(
    file: Any, names: Iterable[str], nulls: Nulls
) -> Iterator[tuple[Any, list[tuple[int, int, int]]]]:
    """The top-level columns among `names`, never repeated, plain in every row group.

    Each with its schema and its chunks (`_chunks`), where each chunk's statistics count
    its `nulls`.
    """
    metadata, schema, wanted = file.metadata, file.schema, set(names)
    for j in range(metadata.num_columns):
        column = schema.column(j)
        if (
            column.path not in wanted
            or column.max_repetition_level != 0
            or column.max_definition_level > 1
            or (nulls == "all" and column.max_definition_level != 1)
        ):
            continue
        chunks = _chunks(metadata, j, nulls)
        if chunks is not None:
            yield column, chunks


def _chunks(metadata: Any, j: int, nulls: Nulls = "any") -> list[tuple[int, int, int]] | None:
    """Column `j`'s chunks as `(start, end, values)`, or `None` if one is not plain.

    `None` also where a chunk's statistics do not count its `nulls`, or where it holds
    another number of values than its row group has rows (pyarrow would refuse it).
    """
    chunks = []
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        chunk = group.column(j)
        if (
            chunk.compression != "UNCOMPRESSED"
            or chunk.has_dictionary_page
            or not set(chunk.encodings) <= _PLAIN_ENCODINGS
            or chunk.num_values != group.num_rows
            or not _counted(chunk, nulls)
        ):
            return None
        start = chunk.data_page_offset
        chunks.append((start, start + chunk.total_compressed_size, chunk.num_values))
    return chunks


def _counted(chunk: Any, nulls: Nulls) -> bool:
    """Whether a column chunk's statistics count its `nulls` (anything for `"any"`)."""
    if nulls == "any":
        return True
    statistics = chunk.statistics
    if statistics is None or not statistics.has_null_count:
        return False
    return bool(statistics.null_count == (0 if nulls == "none" else chunk.num_values))


class PageColumn:
    """One plain column of a file, its rows read in order into the arrays given (`take`)."""

    _ENCODINGS: tuple[int, ...] = (_PLAIN,)  # of its values

    def __init__(
        self, fd: int, name: str, chunks: list[tuple[int, int, int]], width: int, levels: int
    ) -> None:
        self.name, self.width, self.levels = name, width, levels
        self._fd = fd
        self._chunks = deque(chunks)
        self._at = self._end = 0  # the next page's header, and the end of its column chunk
        self._expected = 0  # values the current column chunk still owes
        self._left = 0  # values of the current page not read yet
        self._pos = 0  # where they start in the file
        self._crc = 0  # of the current page so far
        self._want: int | None = None  # its checksum, when it has one
        self._page = 0  # where its header starts (named in messages)
        self._encoding: Any = _PLAIN  # of its values
        self._null: int | None = None  # a null among its values left (index among them)
        self.taken = 0  # rows taken so far
        self.refused_at = 0  # the row (counted as `taken`) of the last refusal

    def part(self, k: int, n: int) -> Self:
        """The same column, of its row groups k, k + n, ... only (none read yet)."""
        return type(self)(self._fd, self.name, list(self._chunks)[k::n], self.width, self.levels)

    def take(self, into: AnyArray, rows: Where) -> None:
        """Fill `into` (`[n, *shape]`, C-contiguous, `width` bytes a row) with the next rows.

        `rows(i)` names row i of `into` in messages. A refusal is at a row (`refused_at`):
        reading the rows in any other pieces refuses them at that row too (where the pieces
        reach it).
        """
        target = _flat(into).data
        count, done = len(into), 0
        at = 0  # the row a refusal now would be at: a page's first, a null, a page's last
        try:
            while done < count:
                at = done
                if not self._left:
                    self._next_page()
                n = min(self._left, count - done)
                if self._null is not None and self._null < n:
                    if self._null:  # the rows before the null are read first
                        n = self._null
                    else:
                        raise ValueError(
                            f"column {self.name!r} is null at {rows(done)}; a rollout has a "
                            "value at every step"
                        )
                self._values(target, done, n)
                self._left -= n
                done += n
                if self._null is not None:
                    self._null -= n
                if not self._left:
                    at = done - 1
                    self._check_crc()
        except ValueError:
            self.refused_at = self.taken + at
            raise
        finally:
            self.taken += done

    def _values(self, target: memoryview, done: int, n: int) -> None:
        """Read the next `n` values of the page into `target` (flat bytes), from row `done`."""
        part = target[done * self.width : (done + n) * self.width]
        self._read(part)
        self._crc = crc32(part, self._crc)
        self._pos += len(part)

    def cells(self, rows: int) -> AnyArray:
        """`[rows, width]` bytes to take the next `rows` rows into."""
        return np.empty((rows, self.width), np.uint8)

    def end(self) -> None:
        """Refuse pages or row groups left once every row was taken."""
        if self._left or self._at < self._end or self._chunks:
            raise ValueError("the file's columns hold more rows than its index columns")
        if self._expected:
            raise self._damaged(f"its column chunk ends {self._expected} values short")

    def _read(self, part: memoryview) -> None:
        got = 0
        while got < len(part):
            count = os.preadv(self._fd, [part[got:]], self._pos + got)
            if not count:
                raise self._damaged("ends before the page's values")
            got += count

    def _next_page(self) -> None:
        """Read the next page's header and levels; its values start at `_pos`."""
        while self._at >= self._end:
            if self._expected:
                raise self._damaged(f"its column chunk ends {self._expected} values short")
            if not self._chunks:
                raise ValueError("the file's columns hold fewer rows than its index columns")
            self._at, self._end, self._expected = self._chunks.popleft()
        self._page = self._at
        header, size = _header(self._fd, self._at, self._end - self._at)
        body = self._at + size  # (within the chunk: `_header` reads no further)
        self._at = body + _int(header, 3, self._damaged)
        if self._at > self._end or _int(header, 2, self._damaged) != self._at - body:
            raise self._damaged("its sizes do not fit its column chunk (or it is compressed)")
        crc = header.get(4)
        self._want = None if crc is None else crc & 0xFFFFFFFF
        kind = header.get(1)
        if kind == _DATA_PAGE and isinstance(header.get(5), dict):
            values, levels = self._v1(header[5], body)
        elif kind == _DATA_PAGE_V2 and isinstance(header.get(8), dict):
            values, levels = self._v2(header[8], body)
        else:
            raise self._damaged(f"a page of type {kind}, not a data page of plain values")
        if values > self._expected or not self._fits(values, self._at - body - levels):
            raise self._damaged(f"its {values} values do not fill its {self._at - body} bytes")
        self._expected -= values
        self._left, self._pos = values, body + levels
        self._page_read(values)

    def _fits(self, values: int, size: int) -> bool:
        """Whether `values` values fill `size` bytes.

        A page with nulls stores fewer values: it is refused at its first null instead.
        """
        return self._null is not None or values * self.width == size

    def _page_read(self, values: int) -> None:
        """A page's header and levels were read: its values are read by `take`."""

    def _v1(self, page: dict[int, Any], body: int) -> tuple[int, int]:
        """A v1 data page's values and the bytes of its levels (length-prefixed), checked."""
        values = _int(page, 1, self._damaged)
        self._encoding = page.get(2)
        if self._encoding not in self._ENCODINGS or page.get(4) not in (_RLE, 4):
            raise self._damaged("its values are not plain")
        if not self.levels:
            self._crc, self._null = 0, None
            return values, 0
        if page.get(3) != _RLE:
            raise self._damaged("its definition levels are not RLE")
        prefix = self._bytes(body, 4)
        length = int.from_bytes(prefix, "little")
        levels = self._bytes(body + 4, length)
        self._crc = crc32(levels, crc32(prefix))
        self._null = self._first_null(levels, values)
        return values, 4 + length

    def _v2(self, page: dict[int, Any], body: int) -> tuple[int, int]:
        """A v2 data page's values and the bytes of its levels, checked."""
        values = _int(page, 1, self._damaged)
        length, repeated = _int(page, 5, self._damaged), _int(page, 6, self._damaged)
        self._encoding = page.get(4)
        if self._encoding not in self._ENCODINGS or repeated or (length and not self.levels):
            raise self._damaged("its values are not plain")
        levels = self._bytes(body, length)
        self._crc = crc32(levels)
        self._null = self._first_null(levels, values) if length else None
        if _int(page, 2, self._damaged) and self._null is None:
            raise self._damaged("it counts nulls its levels do not have")
        return values, length

    def _first_null(self, levels: bytes, values: int) -> int | None:
        """The first null among a page's `values` (by its definition levels), if any."""
        return _first_null(levels, values, self._damaged)

    def _bytes(self, at: int, count: int) -> bytes:
        if at + count > self._at:
            raise self._damaged("its levels run past its end")
        data = os.pread(self._fd, count, at)
        if len(data) != count:
            raise self._damaged("the file ends inside it")
        return data

    def _check_crc(self) -> None:
        if self._want is not None and self._crc & 0xFFFFFFFF != self._want:
            raise self._damaged("CRC checksum verification failed")

    def _damaged(self, why: str) -> DamagedPageError:
        return DamagedPageError(
            f"not a readable Parquet file: column {self.name!r}, the page at byte "
            f"{self._page}: {why}"
        )


class BitColumn(PageColumn):
    """A column of booleans: plain (bits, 8 to a byte, the first the lowest) or RLE.

    Each page's values are read whole when its header is (a page holds a row group's
    booleans in a few KB), checked, and unpacked; `take` hands them out as bools. Data
    pages v2 store booleans RLE-encoded (a 4-byte length, then runs and bit-packed groups).
    """

    _ENCODINGS = (_PLAIN, _RLE)
    _bits: AnyArray

    def _fits(self, values: int, size: int) -> bool:
        return self._null is not None or self._encoding == _RLE or -(-values // 8) == size

    def _page_read(self, values: int) -> None:
        stored = values if self._null is None else self._null  # (refused at the null)
        data = self._bytes(self._pos, self._at - self._pos)
        self._crc = crc32(data, self._crc)
        try:
            if self._encoding == _RLE:
                length = int.from_bytes(data[:4], "little")  # (past the end: `_hybrid` fails)
                self._bits = _hybrid(data[4 : 4 + length], stored)
            else:
                packed = np.frombuffer(data, np.uint8)
                self._bits = np.unpackbits(packed, bitorder="little", count=stored)
        except (IndexError, ValueError):
            raise self._damaged("its values do not parse") from None
        self._used = 0

    def _values(self, target: memoryview, done: int, n: int) -> None:
        target[done : done + n] = self._bits[self._used : self._used + n].data
        self._used += n


class NullColumn(PageColumn):
    """A column whose statistics say it holds only nulls: its levels are read to check it.

    `skip` goes over its next rows (pyarrow would decode each row group's pages into an
    array of nulls, at about 0.4 ms a row group); a level that says a value is there, or a
    page that stores values, is refused as a damaged file.
    """

    def skip(self, count: int) -> None:
        """Go over the next `count` rows, each null (checked)."""
        done = 0
        while done < count:
            if not self._left:
                self._next_page()
            n = min(self._left, count - done)
            self._left -= n
            done += n
            if not self._left:
                self._check_crc()
        self.taken += done

    def _fits(self, values: int, size: int) -> bool:
        return size == 0

    def _first_null(self, levels: bytes, values: int) -> int | None:
        if _levels(levels, values, self._damaged).any():
            raise self._damaged("its statistics count only nulls, its levels hold a value")
        return 0


class TextColumn(PageColumn):
    """A column of strings, most of its rows null (the layout column): its values as bytes.

    Each page's levels and values (a 4-byte length, then the bytes, for each value that is
    not null) are read whole when its header is; `texts` gives the values of the next rows.
    """

    _present: AnyArray | None = None  # the current page's levels, as they are read
    _rows: AnyArray  # the current page's rows that hold a value (1) or are null (0)
    _held: list[bytes]  # its values
    _row = _value = 0  # its next row, and the value of the first that holds one

    def texts(self, count: int) -> list[bytes]:
        """The values of the next `count` rows that are not null, in order."""
        got: list[bytes] = []
        done = 0
        while done < count:
            if not self._left:
                self._next_page()
            n = min(self._left, count - done)
            held = int(np.count_nonzero(self._rows[self._row : self._row + n]))
            got += self._held[self._value : self._value + held]
            self._row, self._value = self._row + n, self._value + held
            self._left -= n
            done += n
            if not self._left:
                self._check_crc()
        self.taken += done
        return got

    def _fits(self, values: int, size: int) -> bool:
        return True  # (checked as its values are parsed)

    def _first_null(self, levels: bytes, values: int) -> int | None:
        self._present = _levels(levels, values, self._damaged)
        return None if self._present.all() else int(np.argmin(self._present))

    def _page_read(self, values: int) -> None:
        present = self._present  # (`None` for a required column: no levels)
        self._rows = np.ones(values, np.uint8) if present is None else present
        data = self._bytes(self._pos, self._at - self._pos)
        self._crc = crc32(data, self._crc)
        self._held, pos = [], 0
        for _ in range(int(np.count_nonzero(self._rows))):
            length = int.from_bytes(data[pos : pos + 4], "little")
            self._held.append(data[pos + 4 : pos + 4 + length])
            pos += 4 + length  # (past the end: refused below)
        if pos != len(data):
            raise self._damaged(f"its values do not fill its {len(data)} bytes")
        self._row = self._value = 0
        self._present = None


class Prefetch:
    """The next `count` rows of plain columns, read by a thread while the caller plans them.

    A rollout's plan (its T and B, the order of its rows) comes from its small columns,
    read first; its plain columns' pages need none of it. So a thread reads them meanwhile,
    `step` rows of each column in turn, each into a buffer of its own: `count + spare` rows,
    so that with `spare` = B a buffer is a leaf's whole array, `[(T+1) * B, *shape]` with its
    bootstrap row last (`Prefetched.storage`), and its rows are read straight into place.

    `columns[name].take` hands the rows out in order as `PageColumn.take` does, and refuses
    them at the same row: a refusal the thread met waits until the rows taken reach it. Rows
    are copied unless they are taken into their own buffer. Where the thread stopped early
    (a refusal in another column), the rest is read in the caller's thread. Rows are named
    in messages by `name_rows`, set once the plan is known (the thread waits for it to name
    one). `close` stops the thread and waits for it: leave a `with` block, or call it.
    """

    def __init__(self, columns: dict[str, PageColumn], count: int, spare: int, step: int):
        self.count, self._step = count, max(1, step)
        self._shared = _Shared(ended=not columns)  # (no thread without columns)
        self.columns = {
            name: Prefetched(self._shared, c, count + spare) for name, c in columns.items()
        }
        self._thread: threading.Thread | None = None
        if self.columns:
            self._thread = threading.Thread(
                target=self._run, name="trajkit-parquet-pages", daemon=True
            )
            self._thread.start()

    def name_rows(self, where: Where) -> None:
        """How row i (of the `count` rows) is named in messages."""
        self._shared.where = where
        self._shared.named.set()

    def _run(self) -> None:
        shared = self._shared
        try:
            for start in range(0, self.count, self._step):
                stop = min(self.count, start + self._step)
                for column in self.columns.values():
                    if shared.stop or not column.read_ahead(stop):
                        return
                    with shared.moved:
                        shared.moved.notify_all()
        finally:
            with shared.moved:
                shared.ended = True
                shared.moved.notify_all()

    def close(self) -> None:
        """Stop the thread (after the rows it is reading) and wait for it."""
        self._shared.stop = True
        self._shared.named.set()  # (a refusal it is naming is named by row)
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Shared:
    """What a `Prefetch`'s thread and its columns share.

    Nothing here refers back to the `Prefetch`: no reference cycle holds its buffers, which
    are a rollout's arrays, once the rollout is let go.
    """

    def __init__(self, ended: bool) -> None:
        self.where: Where | None = None
        self.named = threading.Event()
        self.moved = threading.Condition()
        self.stop, self.ended = False, ended

    def name(self, row: int) -> str:
        """Row `row` in a message (from the thread: once `name_rows` has said how)."""
        self.named.wait()
        return f"row {row}" if self.where is None else self.where(row)

    def wait(self, column: Prefetched, rows: int) -> None:
        """Until the thread has read `rows` rows of `column`, or has stopped."""
        with self.moved:
            while column.done < rows and column.error is None and not self.ended:
                self.moved.wait()


class Prefetched:
    """One column of a `Prefetch`: its buffer, and its rows handed out in order (`take`)."""

    def __init__(self, shared: _Shared, column: PageColumn, rows: int) -> None:
        self.name, self.width = column.name, column.width
        self.buffer: AnyArray = np.empty(rows * column.width, np.uint8)
        self._shared, self._column, self._first = shared, column, column.taken
        self.done = 0  # rows in the buffer (written by the thread)
        self.given = 0  # rows handed out
        self.error: BaseException | None = None  # the thread's refusal, at row `done`

    def read_ahead(self, stop: int) -> bool:
        """(The thread) read rows up to `stop` into the buffer; False once refused."""
        start, width = self.done, self.width
        cells = self.buffer[start * width : stop * width].reshape(stop - start, width)
        try:
            self._column.take(cells, lambda i: self._shared.name(start + i))
        except BaseException as exc:  # raised where the rows taken reach it
            at = self._column.refused_at if isinstance(exc, ValueError) else self._column.taken
            self.done, self.error = at - self._first, exc
            return False
        self.done = stop
        return True

    def cells(self, rows: int) -> AnyArray:
        """`[rows, width]` bytes to take the next `rows` rows into.

        The buffer's own where none was taken yet (the rows are then read into place, not
        copied), else new ones.
        """
        if self.given:
            return np.empty((rows, self.width), np.uint8)
        return self.buffer[: rows * self.width].reshape(rows, self.width)

    def storage(self, rows: int) -> AnyArray | None:
        """The buffer, to hold a leaf's `rows` rows, if that is its size and none was taken."""
        return self.buffer if not self.given and len(self.buffer) == rows * self.width else None

    def take(self, into: AnyArray, rows: Where) -> None:
        """Fill `into` with the next rows, as `PageColumn.take` does (`rows` names them)."""
        flat = _flat(into)
        start, stop, width = self.given, self.given + len(into), self.width
        self._shared.wait(self, stop)
        if self.error is not None and stop > self.done:
            raise self.error
        ready = min(self.done, stop)
        if ready > start and flat.ctypes.data != self.buffer.ctypes.data + start * width:
            flat[: (ready - start) * width] = self.buffer[start * width : ready * width]
        if ready < stop:  # the thread stopped before them: read here
            self._column.take(into[ready - start :], lambda i: rows(ready - start + i))
            self.done = stop
        self.given = stop


def _flat(into: AnyArray) -> AnyArray:
    """`into`'s bytes, flat: a view, so that what is written there lands in `into`."""
    if not into.flags.c_contiguous:  # (its reshape would be a copy, filled in vain)
        raise ValueError("rows are read into a C-contiguous array only")
    flat: AnyArray = into.reshape(-1).view(np.uint8)
    return flat


def _int(fields: dict[int, Any], key: int, damaged: Callable[[str], DamagedPageError]) -> int:
    """A header's integer field, required and not negative."""
    value = fields.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise damaged(f"its header lacks field {key}, or holds {value!r} there")
    return value


def _first_null(
    levels: bytes, values: int, damaged: Callable[[str], DamagedPageError]
) -> int | None:
    """The first null among `values` definition levels (bit width 1, RLE/bit-packed hybrid)."""
    decoded = _levels(levels, values, damaged)
    return None if decoded.all() else int(np.argmin(decoded))


def _levels(levels: bytes, values: int, damaged: Callable[[str], DamagedPageError]) -> AnyArray:
    """`values` definition levels decoded (1: a value, 0: null), or refused as damaged."""
    try:
        return _hybrid(levels, values)
    except (IndexError, ValueError):
        raise damaged("its definition levels do not parse") from None


def _hybrid(data: bytes, values: int) -> AnyArray:
    """`values` values of bit width 1 (0 or 1), RLE/bit-packed hybrid encoded, as bytes.

    Raises `ValueError` or `IndexError` where `data` is not such an encoding.
    """
    decoded = np.empty(values, np.uint8)
    pos = seen = 0
    while seen < values:
        head, pos = _varint(data, pos)
        count = head >> 1
        if head & 1:  # bit-packed: `count` groups of 8 values, a byte each
            if not count:
                raise ValueError
            packed = np.frombuffer(data, np.uint8, count, pos)  # ValueError past the end
            bits = np.unpackbits(packed, bitorder="little")[: values - seen]
            decoded[seen : seen + len(bits)] = bits
            pos, seen = pos + count, seen + len(bits)
        else:  # a run of `count` times one value, in a byte
            if not count or data[pos] > 1:
                raise ValueError
            run = min(count, values - seen)
            decoded[seen : seen + run] = data[pos]
            pos, seen = pos + 1, seen + run
    return decoded


# ------------------------------------------------------------------ Thrift compact protocol


def _header(fd: int, at: int, room: int) -> tuple[dict[int, Any], int]:
    """The page header at byte `at` (within `room` bytes) and its size."""
    size = min(_FIRST_READ, room)
    while True:
        data = os.pread(fd, size, at)
        try:
            fields, end = _struct(data, 0, _HEADER, 0)
        except IndexError:  # ran past what was read
            if size >= min(room, _MAX_HEADER) or len(data) < size:
                raise DamagedPageError(
                    f"not a readable Parquet file: the page header at byte {at} does not parse"
                ) from None
            size = min(4 * size, room, _MAX_HEADER)
            continue
        except ValueError as exc:
            raise DamagedPageError(
                f"not a readable Parquet file: the page header at byte {at} does not parse ({exc})"
            ) from None
        return fields, end


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 64 bits")


def _struct(
    data: bytes, pos: int, wanted: dict[int, Any], depth: int
) -> tuple[dict[int, Any], int]:
    """A struct's `wanted` fields (an int, or a dict of a struct's own `wanted`); skips others."""
    if depth > _MAX_DEPTH:
        raise ValueError("nested too deeply")
    fields: dict[int, Any] = {}
    field = 0
    while True:
        head = data[pos]
        pos += 1
        if not head:
            return fields, pos
        kind, delta = head & 0x0F, head >> 4
        if delta:
            field += delta
        else:
            raw, pos = _varint(data, pos)
            field = (raw >> 1) ^ -(raw & 1)
        want = wanted.get(field, False)
        if want is None and kind in (_I16, _I32, _I64):
            raw, pos = _varint(data, pos)
            fields[field] = (raw >> 1) ^ -(raw & 1)
        elif isinstance(want, dict) and kind == _STRUCT:
            fields[field], pos = _struct(data, pos, want, depth + 1)
        else:
            pos = _skip(data, pos, kind, depth)


def _skip(data: bytes, pos: int, kind: int, depth: int) -> int:
    """The position after a value of `kind` at `pos` (a field's; bools hold no byte there)."""
    if depth > _MAX_DEPTH:
        raise ValueError("nested too deeply")
    if kind in (_TRUE, _FALSE):
        return pos
    if kind == _BYTE:
        return pos + 1
    if kind in (_I16, _I32, _I64):
        return _varint(data, pos)[1]
    if kind == _DOUBLE:
        return pos + 8
    if kind == _BINARY:  # (one past the data read: the next byte read raises IndexError)
        length, pos = _varint(data, pos)
        return pos + length
    if kind in (_LIST, _SET):
        return _skip_list(data, pos, depth)
    if kind == _STRUCT:
        return _struct(data, pos, {}, depth + 1)[1]
    raise ValueError(f"a field of type {kind}")


def _skip_list(data: bytes, pos: int, depth: int) -> int:
    """The position after a list (or set) at `pos`."""
    head = data[pos]
    count, item = head >> 4, head & 0x0F
    pos += 1
    if count == 15:
        count, pos = _varint(data, pos)
    if item in (_TRUE, _FALSE):  # a list's bools are a byte each
        item = _BYTE
    if count > len(data) - pos:  # every item takes a byte at least
        raise IndexError
    for _ in range(count):
        pos = _skip(data, pos, item, depth + 1)
    return pos
