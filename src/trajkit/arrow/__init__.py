"""Rollouts as Arrow tables and Parquet files (needs `trajkit[arrow]`).

One row per transition: row `t * B + b` of a rollout is step `t` of env `b` (time-major),
T rows per env. A row holds what a data engineer expects of a transition, and the values
after it in `next_` columns, so the rollout's last observation row (the bootstrap row) is the
`next_` values of each env's last transition. The layout, column by column:

- `rollout`, `step`, `env` (int32): which rollout of the table, t and b;
- `episode_id` (int64): an id per episode; in a file of several rollouts (`write_parquet`),
  an episode that goes on into the next rollout (`dones[T]` is 0 for that env) keeps its id;
- `obs`, `obs.<key>...` (the leaf's dtype): the observation `obses[t]`; scalars, or nested
  fixed-size lists of the leaf's shape (`[84, 84, 4]` images read as such by pyarrow, polars,
  DuckDB, pandas and HF `datasets`);
- `action`: `model_outs['actions'][t]`, when the rollout has actions;
- `reward` (float32), `terminated` and `truncated` (bool): step t's reward and how it ended
  its episode (both false when the episode goes on);
- `next_obs...`: `obses[t + 1]`, the observation after the step; where the rollout keeps its
  true final observations (`final_obses`, as every recording does; the layout's
  `"final_obs": true`), a step that ended its episode has the true final observation here;
- `reset_obs...` (only with `"final_obs": true`): `obses[t + 1]`, the observation the env
  showed after the step: at a step that ended its episode, the one it reset to; elsewhere
  the next row's `obs` (never null, so that HF `datasets` batches it);
- `is_first` (bool): `dones[t]`, the observation `obs` starts an episode;
- `final_value` (float32): `final_values[t]`, when the rollout has truncation bootstraps;
- `out.<key>`: the other model outputs at t (`out.critic`, `out.log_probs`, ...);
- `state...`: env states at t (leaves with no values per row, such as empty states
  `(T+1, B, 0)`, are left out);
- `next_action`, `next_out.<key>`, `next_state...`: the same at t + 1;
- `info` (string): the step's info as JSON; null when empty;
- `trajkit_layout` (string): this layout as JSON, on the first row of each rollout (step 0,
  env 0), null elsewhere.

The compact layout (`layout="compact"`, or `"auto"` for a rollout with a leaf of at least
`AUTO_COMPACT_BYTES` bytes per step, such as an image) stores every leaf and model output
that has a shape (not the scalars) as bytes, one
`fixed_size_binary` value per row (`numpy.frombuffer(value, dtype).reshape(shape)` with the
layout's dtype and shape), and their `next_...` and `reset_obs...` columns as
`large_binary` values only where the next row cannot give them: on the last step, and for
`next_obs` under `"final_obs": true` at episode ends; null elsewhere.

The layout JSON (also in the schema's metadata, key `trajkit`) records what the column
names cannot: the exact tree paths of nested leaves, each leaf's dtype and shape, which
fields are present and the layout version, so that [`from_arrow`][trajkit.arrow.from_arrow]
rebuilds the same rollout (`==`), dtypes and shapes included, even from a file that polars,
DuckDB or HF `datasets` rewrote (they drop schema metadata, and keep the column).

Examples:
    >>> import trajkit.arrow
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=4, num_envs=2)
    >>> table = trajkit.arrow.to_arrow(r)
    >>> table.num_rows, table.column("obs").type
    (8, FixedSizeListType(fixed_size_list<item: float>[4]))
    >>> trajkit.arrow.from_arrow(table) == r
    True
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections.abc import Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit._io.atomic import atomic_write, same_file
from trajkit._io.mapped import mapped_files
from trajkit._io.remote import is_url
from trajkit._models.rollout import Rollout
from trajkit._models.rules import named_arrays
from trajkit.arrow._export import (
    ROW_GROUP_BYTES,
    EpisodeIds,
    resolve_style,
    rollout_table,
    rollout_tables,
)
from trajkit.arrow._import import iter_file, read_table
from trajkit.arrow._layout import (
    AUTO_COMPACT_BYTES,
    LAYOUT_COLUMN,
    LAYOUT_VERSION,
    LayoutChoice,
    TensorType,
    load_pyarrow,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "AUTO_COMPACT_BYTES",
    "LAYOUT_COLUMN",
    "LAYOUT_VERSION",
    "MAX_ROWS",
    "ROW_GROUP_BYTES",
    "from_arrow",
    "iter_parquet",
    "read_parquet",
    "to_arrow",
    "write_parquet",
]

MAX_ROWS = 1 << 24
"""The most rows [`from_arrow`][trajkit.arrow.from_arrow] and
[`iter_parquet`][trajkit.arrow.iter_parquet] (and so
[`read_parquet`][trajkit.arrow.read_parquet]) read unless told otherwise (16,777,216): a
Parquet file of constant rows compresses to almost nothing, so its declared row count is
checked against this budget before anything is read."""


def to_arrow(
    rollout: Rollout,
    *,
    index: int = 0,
    tensor_type: TensorType = "list",
    layout: LayoutChoice = "auto",
) -> pa.Table:
    """Return a rollout as an Arrow table in the documented layout (see the module).

    Args:
        rollout: The rollout, of at least one step; its model outputs must be complete.
        index: The value of the `rollout` column (to tell rollouts apart in one table).
        tensor_type: How leaves with a trailing shape are stored: `"list"` (nested
            fixed-size lists, which every tool reads) or `"extension"` (Arrow's canonical
            `arrow.fixed_shape_tensor`, which HF `datasets` cannot read).
        layout: `"readable"`, `"compact"` (large leaves as bytes, `next_` values stored
            once; see the module), or `"auto"`: compact when a leaf's cell holds at least
            `AUTO_COMPACT_BYTES` bytes (an image), readable otherwise.

    Returns:
        A `pyarrow.Table` of `T * B` rows, with trajkit's layout in its schema metadata and
        its `trajkit_layout` column.

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If the rollout has no steps, its model outputs are still being built,
            two leaves would share a column name, an info value cannot be stored as JSON
            exactly (as for `trajkit.save`), or `layout` is none of the three.

    Examples:
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> table = trajkit.arrow.to_arrow(example_rollout(num_steps=3, num_envs=2))
        >>> table.column_names[:7]
        ['rollout', 'step', 'env', 'episode_id', 'obs', 'action', 'reward']
        >>> images = example_rollout(num_steps=3, num_envs=2, obs_shape=(84, 84))
        >>> images.obses.dtype, trajkit.arrow.to_arrow(images).column("obs").type
        (dtype('float32'), FixedSizeBinaryType(fixed_size_binary[28224]))
    """
    return rollout_table(rollout, index, None, tensor_type, resolve_style(rollout, layout))


def from_arrow(table: pa.Table, *, max_rows: int | None = MAX_ROWS) -> Rollout:
    """Rebuild the rollout that [`to_arrow`][trajkit.arrow.to_arrow] turned into `table`.

    Rows may come in any order (they are sorted by step, then env); the table must hold one
    rollout, every (step, env) of T steps by B envs exactly once. The layout comes from the
    schema metadata (key `trajkit`) or, when a tool dropped it, from the `trajkit_layout`
    column; where both are there they must agree. The structure is checked before anything
    the size of the rollout is built:

    - every column of the layout is present (`final_value` when the layout records
      truncations, `reset_obs...` when it records final observations), and no other
      column: trajkit never drops data it does not know;
    - numbers and flags are in numeric or boolean columns (timestamps, strings, ... are
      refused), cells of the layout's shape as nested lists (fixed-size or not) or
      fixed-shape tensors, with no nulls (`info` may be null anywhere: an empty info);
    - `terminated` or `truncated` is true exactly where the next row's `is_first` is, never
      both, `truncated` only when the layout records truncations;
    - each `next_` column equals its column one step later (`next_obs` at step t is `obs` at
      step t+1), so that the last step's is the bootstrap row; under `"final_obs": true`,
      `next_obs` at an episode end is the final observation instead, and `reset_obs` holds
      a value exactly there, equal to the next row's `obs` (the bootstrap row's at the last
      step);
    - `episode_id` is one id per episode as `is_first` cuts them, a different one for each;
    - values are stored in the dtype the layout records for each leaf only where no value
      changes (no wrap, no truncation, no overflow to inf), under the rules every door
      applies (finite observations, 0/1 flags, ...);
    - infos are checked by the rule `trajkit.save` applies, so an imported rollout saves.

    Args:
        table: A table in trajkit's layout.
        max_rows: The most rows to accept (`None`: no limit); see `MAX_ROWS`.

    Returns:
        The rollout.

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: Naming the column (and the step and env) for anything above.

    Examples:
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=3, num_envs=2, nested=True)
        >>> table = trajkit.arrow.to_arrow(r)
        >>> trajkit.arrow.from_arrow(table) == r
        True
        >>> trajkit.arrow.from_arrow(table.replace_schema_metadata(None)) == r  # as polars writes
        True
        >>> trajkit.arrow.from_arrow(table.drop_columns(["step"]))
        Traceback (most recent call last):
        ...
        ValueError: the table has no column 'step', which trajkit's layout needs
    """
    return read_table(table, max_rows)


def write_parquet(
    rollouts: Rollout | Iterable[Rollout],
    path: str | os.PathLike[str],
    *,
    tensor_type: TensorType = "list",
    layout: LayoutChoice = "auto",
    row_group_bytes: int = ROW_GROUP_BYTES,
    **options: Any,
) -> None:
    """Write one rollout or several to a Parquet file, in the layout of `to_arrow`.

    Rollouts are numbered by the `rollout` column in the order given. They must share their
    structure (fields, leaves, dtypes and model-output keys); T and B may differ. Episode
    ids run across the rollouts: consecutive rollouts of one recorder (an env's episode
    going on from one into the next) give that episode one id.

    The rollouts are taken one at a time: an iterable that is not a sequence (a generator
    loading files) is read as the file is written, and a rollout read from `path` (by
    identity, as below) is refused when it comes. The file is written as it is built, one row
    group at a time: whole steps of one rollout,
    about `row_group_bytes` of leaf values each, made from views of the rollout's arrays
    (zero-copy for the compact layout's bytes) and freed once written. So the memory it takes
    is about two row groups besides the rollouts, whatever their size (memory-mapped rollouts,
    as `trajkit.load(..., mmap=True)` gives, are read from disk as they are written).

    The file is written atomically: into a temporary file next to `path`
    (`.trajkit-XXXXXXXX.tmp`), fsynced, then renamed over `path`, so that an existing file
    is replaced whole or not at all, even if the process is killed midway. A file the
    rollouts are memory-mapped from (`trajkit.load(..., mmap=True)`) is refused as `path`,
    by identity (hard links and symlinks included; found where the system lists a process's
    memory maps, as Linux does). A URL (`s3://...`) is handed to pyarrow as it is.

    Args:
        rollouts: A rollout, or an iterable of rollouts.
        path: The Parquet file to write; an existing regular file is replaced.
        tensor_type: How leaves with a trailing shape are stored (see `to_arrow`).
        layout: `"readable"`, `"compact"` or `"auto"` (see `to_arrow`; `"auto"` decides
            by the first rollout, and the file has one layout).
        row_group_bytes: About how many bytes of leaf values go in one row group (at least
            one step of one rollout per row group).
        **options: Passed to `pyarrow.parquet.ParquetWriter` (e.g. `compression="zstd"`
            for smaller files, `compression="none"` for the fastest reads: `read_parquet`
            reads the compact layout's uncompressed bytes straight into the rollout).
            Unless given, every page is written with its checksum (`write_page_checksum`,
            which `read_parquet` verifies), and the compact layout without dictionaries and
            without statistics of its bytes (all cost, no use there).

    Raises:
        ImportError: If pyarrow is not installed.
        ValueError: If no rollout is given, the rollouts differ in structure, one has no
            steps, `layout` is none of the three, or `path` is a file the rollouts are read
            from.
        OSError: If `path` is a folder, a FIFO, a device or a socket, or cannot be written.

    Examples:
        >>> import os, tempfile
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> rs = [example_rollout(num_steps=4, num_envs=2, seed=s) for s in range(3)]
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "runs.parquet")
        ...     trajkit.arrow.write_parquet(rs, path, layout="compact")
        ...     trajkit.arrow.read_parquet(path) == rs
        True
    """
    load_pyarrow()
    parquet = require("pyarrow.parquet", "arrow", "trajkit.arrow")
    items: Iterable[Rollout] = [rollouts] if isinstance(rollouts, Rollout) else rollouts
    if type(row_group_bytes) is not int or row_group_bytes < 1:
        raise ValueError(f"row_group_bytes must be a positive int, got {row_group_bytes!r}")
    if layout not in ("auto", "readable", "compact"):
        raise ValueError(f"layout must be 'auto', 'readable' or 'compact', got {layout!r}")
    where = os.fspath(path)
    lazy = not isinstance(items, Sequence)
    if not lazy and not items:
        raise ValueError("write_parquet needs at least one rollout")

    def write(file: Any, filesystem: Any = None) -> None:
        writer = _Writer(parquet, file, filesystem, options)
        try:
            numbering, style = EpisodeIds(), None
            for i, r in enumerate(items):
                if lazy and not is_url(where):
                    _refuse_target(where, r)
                style = style or resolve_style(r, layout)
                ids = numbering.next(r.dones)
                for table in rollout_tables(r, i, ids, tensor_type, style, row_group_bytes):
                    writer.write(table, i)
        finally:
            writer.close()
        if writer.writer is None:
            raise ValueError("write_parquet needs at least one rollout")

    if is_url(where):
        filesystem, inside = require("pyarrow.fs", "arrow", "trajkit.arrow").FileSystem.from_uri(
            where
        )
        write(inside, filesystem)
        return
    sources = [] if lazy else mapped_files(leaf for r in items for leaf in _rollout_arrays(r))
    atomic_write(where, write, inputs=sources, verb="write", by="write_parquet()")


class _Writer:
    """A `ParquetWriter` made on the first table, that checks each next table's schema."""

    def __init__(self, parquet: Any, file: Any, filesystem: Any, options: dict[str, Any]):
        self.parquet, self.file, self.filesystem, self.options = parquet, file, filesystem, options
        self.writer: Any = None

    def write(self, table: Any, index: int) -> None:
        """Write `table` (of rollout `index`) as one row group."""
        if self.writer is None:
            settings = _writer_options(table.schema, self.options)
            self.writer = self.parquet.ParquetWriter(
                self.file, table.schema, filesystem=self.filesystem, **settings
            )
        elif not table.schema.equals(self.writer.schema, check_metadata=True):
            raise ValueError(
                f"rollout {index} differs in structure from rollout 0 (fields, leaves, "
                "dtypes or model outputs); write such rollouts to separate files"
            )
        self.writer.write_table(table, row_group_size=table.num_rows)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _refuse_target(where: str, rollout: Rollout) -> None:
    """Refuse to write over a file `rollout` is memory-mapped from (as `atomic_write` does)."""
    for source in mapped_files(_rollout_arrays(rollout)):
        if same_file(where, source):
            raise ValueError(
                f"cannot write to {where}: it is also an input ({source}); write to another path"
            )


# The most rows a page of `write_parquet` holds, where pyarrow lets it say so: its pages are
# then cut by their size (`data_page_size`, 1 MiB unless given), not at pyarrow's 20,000 rows
# (80 KB of a column of int32). A page's header costs its reader about 40 µs, what 40 KB of
# values cost at 1 GB/s: reads of the columns of numbers cost about a third of what they did.
_PAGE_ROWS = 1 << 20


def _writer_options(schema: Any, options: dict[str, Any]) -> dict[str, Any]:
    """`options`; page checksums; for the compact layout, no dictionaries, no statistics of bytes.

    Without checksums, about 3 % of single bit flips in a file read back as other values.
    Dictionary encoding doubles the cost of writing a compact file (measured); its columns
    of bytes have no useful minimum or maximum. Pages hold up to `_PAGE_ROWS` rows.
    """
    pa = load_pyarrow()
    plain = [f.name for f in schema if not pa.types.is_fixed_size_binary(f.type)]
    defaults: dict[str, Any] = {"write_page_checksum": True, **_page_rows()}
    if len(plain) < len(schema):
        defaults |= {"use_dictionary": False, "write_statistics": plain}
    return {**defaults, **options}


@functools.cache
def _page_rows() -> dict[str, int]:
    """`max_rows_per_page=_PAGE_ROWS` where the installed pyarrow has it, else nothing."""
    writer = require("pyarrow.parquet", "arrow", "trajkit.arrow").ParquetWriter
    known = "max_rows_per_page" in inspect.signature(writer.__init__).parameters
    return {"max_rows_per_page": _PAGE_ROWS} if known else {}


def _rollout_arrays(rollout: Rollout) -> Iterator[AnyArray]:
    """Every array of `rollout`: the fields' (tree leaves included) and the model outputs."""
    return (array for _, array in named_arrays(rollout))


def iter_parquet(
    path: str | os.PathLike[str], *, max_rows: int | None = MAX_ROWS
) -> Generator[Rollout, None, None]:
    """Read the rollouts of a Parquet file in trajkit's layout one at a time (see `write_parquet`).

    Each rollout is validated and yielded before the next one is read, so the memory it takes
    is one rollout and the reader's batches, whatever the size of the file: a report or a
    conversion can go over a file larger than memory. The file is read in two passes. The
    first reads its `rollout` column (and the layout column), counting the rows against
    `max_rows` as they come: a file is refused as soon as it has given more, whatever its
    footer declares (its declared count is checked first, too). It keeps only which rows make
    which rollout (a range per rollout), before anything the size of a rollout is built. The
    second reads each rollout in turn: first its small columns (`step`, `env` and the episode
    flags), which give its T and B and its `dones`, then its other columns a batch of rows
    at a time: each batch's values become NumPy arrays straight from Arrow's buffers, are
    checked as [`from_arrow`][trajkit.arrow.from_arrow] checks a table, and are copied into
    the rollout's arrays; a `next_` column is checked against the rows after it as they come,
    and the `episode_id` column against the numbering `write_parquet` gives the rollouts.
    Two threads decode the row groups in turn, a batch ahead of the checks (8 MiB of values
    each). A compact leaf's column written uncompressed without a dictionary
    (`write_parquet(..., compression="none")`) is read from a local file straight into the
    rollout's arrays instead, page by page, each page's checksum checked on the values; a
    rollout of 1 MiB of such cells or more has them read by a thread while its small columns
    are read and checked (a damaged page is still refused where its rows come). Columns of
    numbers and flags written so are read from their pages into NumPy arrays too, where
    their statistics say they hold no null (and columns of only nulls have their levels
    checked): pyarrow decodes them at about a tenth of that speed. A
    file that polars, DuckDB or HF `datasets` rewrote (without the schema metadata) reads
    back the same, through its `trajkit_layout` column.

    The bound holds for files in `write_parquet`'s order, where each rollout's rows are
    consecutive and the rollouts come in the order of their `rollout` id (a rollout whose own
    rows were shuffled is taken in order, a rollout's worth at a time). A file rewritten in
    another order (rollouts sorted otherwise, or their rows interleaved) is read whole, as
    `read_parquet` reads it, then its rollouts are yielded one at a time.

    Page checksums are verified where the file has them (as `write_parquet` writes it): a
    damaged page is refused, never read as other values. The file stays open until the
    iterator is exhausted or closed (a `for` loop left early closes it when the iterator is
    let go; `contextlib.closing` closes it at once); its reading threads end with it.

    Args:
        path: The Parquet file.
        max_rows: The most rows the file may hold (`None`: no limit); see `MAX_ROWS`.

    Yields:
        The rollouts, validated, in the order of their `rollout` column.

    Raises:
        ImportError: If pyarrow is not installed (raised by the call).
        OSError: If the file cannot be read.
        ValueError: If the file is not Parquet or is damaged (a page whose checksum does not
            match, a header that does not parse), has more rows than `max_rows`, or is not in
            trajkit's layout (see `from_arrow`). Raised when the iteration comes to it: the
            rollouts yielded before it were read and checked whole.

    Examples:
        >>> import os, tempfile
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> rs = [example_rollout(num_steps=4 + s, num_envs=2, seed=s) for s in range(3)]
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "runs.parquet")
        ...     trajkit.arrow.write_parquet(rs, path)
        ...     steps = [r.num_steps for r in trajkit.arrow.iter_parquet(path)]
        >>> steps
        [4, 5, 6]
    """
    pa = load_pyarrow()
    parquet = require("pyarrow.parquet", "arrow", "trajkit.arrow")
    fs = require("pyarrow.fs", "arrow", "trajkit.arrow")
    return _rollouts(pa, parquet, fs, os.fspath(path), max_rows)


def _rollouts(
    pa: Any, parquet: Any, fs: Any, where: str, max_rows: int | None
) -> Generator[Rollout, None, None]:
    """`iter_parquet`'s generator: the file opened, read, and closed when it ends."""
    filesystem = fs.LocalFileSystem()
    if is_url(where):
        filesystem, where = fs.FileSystem.from_uri(where)

    def reader(source: Any, metadata: Any = None) -> Any:
        return parquet.ParquetFile(source, metadata=metadata, page_checksum_verification=True)

    try:
        with (
            _descriptor(where) as fd,
            filesystem.open_input_file(where) as source,
            reader(source) as file,
        ):
            same = fd if fd is not None and _names(where, fd) else None
            yield from iter_file(
                pa, file, lambda metadata: reader(source, metadata), max_rows, same
            )
    except pa.ArrowException as exc:
        raise ValueError(f"not a readable Parquet file: {exc}") from None
    except OSError as exc:
        if exc.errno is not None:  # the system's: the file cannot be read
            raise
        # pyarrow's: the file's bytes are not what they say (a page checksum, a header)
        raise ValueError(f"not a readable Parquet file: {exc}") from None


@contextlib.contextmanager
def _descriptor(where: str) -> Iterator[int | None]:
    """A descriptor of the local file `where`, for its plain pages, opened before pyarrow's.

    `None` for a URL, or where there is no `os.preadv` (Windows).
    """
    if is_url(where) or not hasattr(os, "preadv"):
        yield None
        return
    try:
        fd = os.open(where, os.O_RDONLY)
    except OSError:  # (pyarrow's open says why)
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _names(where: str, fd: int) -> bool:
    """Whether the path `where` still names the file `fd` reads (so pyarrow opened it too)."""
    try:
        named, opened = os.stat(where), os.fstat(fd)
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def read_parquet(path: str | os.PathLike[str], *, max_rows: int | None = MAX_ROWS) -> list[Rollout]:
    """Read the rollouts of a Parquet file in trajkit's layout (see `write_parquet`).

    The rollouts of [`iter_parquet`][trajkit.arrow.iter_parquet], as a list: the file is
    read and checked as it reads it, so the memory it takes is the file's rollouts and a few
    batches besides.

    Args:
        path: The Parquet file.
        max_rows: The most rows the file may hold (`None`: no limit); see `MAX_ROWS`.

    Returns:
        The rollouts, validated, in the order of their `rollout` column.

    Raises:
        ImportError: If pyarrow is not installed.
        OSError: If the file cannot be read.
        ValueError: If the file is not Parquet or is damaged, has more rows than `max_rows`,
            or is not in trajkit's layout (see `iter_parquet` and `from_arrow`).

    Examples:
        >>> import os, tempfile
        >>> import trajkit.arrow
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "run.parquet")
        ...     trajkit.arrow.write_parquet(example_rollout(), path)
        ...     [r.num_steps for r in trajkit.arrow.read_parquet(path)]
        [4]
    """
    return list(iter_parquet(path, max_rows=max_rows))
