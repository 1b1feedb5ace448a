"""Load rollout files: the checked reader of the trajkit rollout file format.

Loading checks the file as a whole (format, version, exact member set, sizes against a limit
before anything is allocated or inflated, every `.npy` header against the metadata, CRC-32s)
and then everything the `Rollout` constructor checks. Every refusal is a `RolloutFileError`.
The specification is `docs/file-format.md`.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any, NoReturn

import numpy as np
from pydantic import ValidationError

from trajkit._base.errors import RolloutFileError
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.atomic import PathLike, path_str
from trajkit._io.crc import crc32
from trajkit._io.defaults import DEFAULT_MAX_BYTES
from trajkit._io.infos import _all_empty as all_empty_infos
from trajkit._io.infos import (
    infos_from_json,
    sparse_infos_from_json,
    strict_json_loads,
)
from trajkit._io.jsonbudget import JSON_BUDGET_SHARE, MIN_JSON_BUDGET, JsonCost, json_budget
from trajkit._io.metadata import (
    FORMAT_NAME,
    FORMAT_VERSION,
    INFOS_MEMBER,
    MAX_METADATA_BYTES,
    METADATA_MEMBER,
    SPARSE_INFOS_VERSION,
    ArrayMember,
    RolloutFileMetadata,
    data_bytes,
    member_names,
)
from trajkit._io.npy import MAX_NPY_HEADER, holds_objects, read_npy_header
from trajkit._io.stream import IO_CHUNK, MemberStream
from trajkit._io.zipfmt import check_end, check_entry, data_start
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, stray_bool_byte

__all__ = ["DEFAULT_MAX_BYTES", "load", "load_with_metadata", "read_metadata", "read_metadata_from"]

_CHUNK = 16 << 20  # bytes per CRC step over a memory map

# Every exception reading a hostile file can raise inside the standard library and NumPy.
_READ_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    OSError,
    EOFError,
    ValueError,
    struct.error,
    zlib.error,
    NotImplementedError,
    RuntimeError,  # includes RecursionError; zipfile raises it for encrypted members
    MemoryError,
    OverflowError,
    KeyError,
    IndexError,
)


def read_metadata(
    path: PathLike, *, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> RolloutFileMetadata:
    """Read and check a rollout file's metadata, without reading any array.

    This reads the ZIP central directory and the `metadata.json` member only, and checks the
    format name and version, the exact member set, each member's size against the metadata,
    and the declared sizes against `max_bytes`. It is cheap: use it to inspect or pre-check
    many files (`trajkit validate --quick`). It does not check the arrays' headers or values:
    use [`load`][trajkit.load] for that.

    Args:
        path: The file.
        max_bytes: The limit on the declared size of the contents (array data, and all members
            uncompressed); `None` for no limit.

    Returns:
        The metadata.

    Raises:
        RolloutFileError: For any problem with the file, naming the file and the member.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "run.npz")
        ...     trajkit.save(example_rollout(num_steps=8, num_envs=3), path)
        ...     meta = trajkit.read_metadata(path)
        >>> meta.num_steps, meta.batch_size, meta.spec.obs_shape
        (8, 3, (4,))
    """
    with _Reader(path_str(path), max_bytes) as reader:
        return reader.metadata


def read_metadata_from(
    file: io.BufferedReader, size: int, *, name: str, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> RolloutFileMetadata:
    """`read_metadata` of an open file of `size` bytes, such as a remote one, named `name`.

    Only the ZIP directory and the `metadata.json` member are read, with seeks: over a
    network that is a few ranged reads, whatever the size of the file. The file is closed.
    """
    with _Reader(name, max_bytes, opened=(file, size)) as reader:
        return reader.metadata


def load(
    path: PathLike,
    *,
    mmap: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    verify: bool | None = None,
) -> Rollout:
    """Load a rollout saved by [`save`][trajkit.save], checking the file and the rollout.

    Besides everything the `Rollout` constructor validates, the file is checked: the format
    name and a supported version; no missing or unexpected members; no object dtypes or
    pickled data anywhere (nothing is ever unpickled); each `.npy` header's shape and dtype
    against the metadata; the declared sizes against `max_bytes` before anything is allocated
    or inflated (a deflate bomb is refused without inflating it); CRC-32 checksums; and
    damaged, truncated, empty or foreign files.

    Args:
        path: The file.
        mmap: Memory-map uncompressed members read-only instead of reading them, so that a
            multi-GB file opens without reading it all (compressed members are read). The
            arrays stay valid after the file is replaced or deleted.
        max_bytes: The limit on the declared size of the contents (array data, and all members
            uncompressed); `None` for no limit. Raise it to load files larger than 4 GiB. It
            also sets the budget of the JSON members, counted before they are decoded: an
            eighth of it, at least 64 MiB (512 MiB by default).
        verify: Check the CRC-32 of the uncompressed array members. Defaults to `True`, or to
            `False` with `mmap` (checking would read every byte). Compressed members and the
            JSON members are always checked.

    Returns:
        The rollout, with writable arrays (read-only memory maps with `mmap=True`). Arrays are
        little-endian; infos hold plain Python values.

    Raises:
        RolloutFileError: For every refusal, naming the file and, where it applies, the
            member. It is a `ValueError`; the original exception is its `__cause__`.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "run.npz")
        ...     trajkit.save(example_rollout(), path)
        ...     r = trajkit.load(path, mmap=True)
        ...     r.obses.flags.writeable
        False
        >>> trajkit.load("missing.npz")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        trajkit._base.errors.RolloutFileError: missing.npz: cannot open: ...
    """
    return load_with_metadata(path, mmap=mmap, max_bytes=max_bytes, verify=verify)[0]


def load_with_metadata(
    path: PathLike,
    *,
    mmap: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    verify: bool | None = None,
) -> tuple[Rollout, RolloutFileMetadata]:
    """`load` and `read_metadata` in one reading of the file (what lint and report need).

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "run.npz")
        ...     trajkit.save(example_rollout(num_steps=8), path)
        ...     rollout, meta = load_with_metadata(path)
        >>> rollout.num_steps == meta.num_steps == 8
        True
    """
    if verify is None:
        verify = not mmap
    name = path_str(path)
    with _Reader(name, max_bytes) as reader, reader.refusing(None):
        reader.check_layout()
        members = reader.arrays
        arrays = {m.name: reader.read_array(m, mmap=mmap, verify=verify) for m in members}
        infos = reader.read_infos()
        # Building and validating the rollout is guarded too: a MemoryError while checking
        # the values of a huge (declared within max_bytes) array is a refusal like any other.
        return _rollout(name, members, arrays, infos), reader.metadata


def _rollout(
    name: str,
    members: list[ArrayMember],
    arrays: dict[str, AnyArray],
    infos: list[list[dict[str, Any]]] | None,
) -> Rollout:
    fields: dict[str, Any] = {
        m.field: arrays[m.name] for m in members if m.key is None and not m.path
    }
    for field in (name for name, rule in FIELD_RULES.items() if rule.nested):
        pairs = [(m.path, arrays[m.name]) for m in members if m.field == field and m.path]
        if pairs:
            fields[field] = _tree.unflatten_paths(pairs)
    outs = {m.key: arrays[m.name] for m in members if m.key is not None}
    try:
        return Rollout(
            states=fields["states"],
            obses=fields["obses"],
            rews=fields["rews"],
            dones=fields["dones"],
            infos=infos,
            model_outs=outs,
            truncated=fields.get("truncated"),
            final_values=fields.get("final_values"),
            final_obses=fields.get("final_obses"),
            copy=False,
        )
    except ValidationError as exc:
        messages = "; ".join(str(err["msg"]).removeprefix("Value error, ") for err in exc.errors())
        locations = {loc[0] for err in exc.errors() for loc in [err["loc"]] if loc}
        member = next((m.name for m in members if m.field in locations), None)
        raise RolloutFileError(
            f"the arrays do not form a valid rollout: {messages}", path=name, member=member
        ) from exc


def _check_regular(mode: int, path: str) -> None:
    if not stat.S_ISREG(mode):  # a folder, or a FIFO or device that reading could block on
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise RolloutFileError(f"cannot open: {kind}", path=path)


def _some(names: list[str], shown: int = 8) -> str:
    """The first few names, and how many more: messages stay short for any archive."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "out of memory while reading"
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, zipfile.BadZipFile):
        return f"damaged or not a ZIP archive: {exc}"
    if isinstance(exc, EOFError):
        return f"truncated: {exc}" if str(exc) else "truncated"
    if isinstance(exc, zlib.error):
        return f"damaged compressed data: {exc}"
    if isinstance(exc, OSError) and exc.strerror:
        return f"cannot read: {exc.strerror}"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, ValueError) else f"{type(exc).__name__}: {text}"


class _Reader:
    """An open rollout file: its ZIP directory, checked metadata, and bounded member reads."""

    def __init__(
        self,
        path: str,
        max_bytes: int | None,
        *,
        opened: tuple[io.BufferedReader, int] | None = None,
    ) -> None:
        """Open `path`, or take `opened`: an open file (a remote one, say) and its size."""
        self.path = path
        self.max_bytes = max_bytes
        self._file: io.BufferedReader | None = None
        self._whole: np.memmap[Any, np.dtype[np.uint8]] | None = None  # the file, mapped
        self._starts: dict[str, int] = {}
        if opened is not None:
            self._file, self._size = opened
            self._read_directory()
            return
        try:
            _check_regular(os.stat(path).st_mode, path)  # before opening a device or FIFO
            # Non-blocking, in case a FIFO took the file's place since: checked again below.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            try:
                _check_regular(os.fstat(fd).st_mode, path)
            except BaseException:
                os.close(fd)
                raise
            self._file = open(fd, "rb")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise RolloutFileError(f"cannot open: {exc.strerror or exc}", path=path) from exc
        except RolloutFileError:
            raise
        except ValueError as exc:  # os.stat refuses a NUL byte in a path
            raise RolloutFileError("cannot open: the path holds a NUL byte", path=path) from exc
        try:
            with self.refusing(None):
                self._size = os.fstat(self._file.fileno()).st_size
        except BaseException:
            self.close()
            raise
        self._read_directory()

    def _read_directory(self) -> None:
        """Read the ZIP directory and the metadata; on any failure, close the file."""
        try:
            with self.refusing(None):
                if self._size == 0:
                    self.fail("the file is empty (a rollout file is a ZIP archive)")
                with zipfile.ZipFile(self.file) as archive:
                    self._infos = archive.infolist()
                self._check_end()
                self._by_name = {info.filename: info for info in self._infos}
                self.metadata = self._read_metadata()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def file(self) -> io.BufferedReader:
        if self._file is None:  # pragma: no cover - only used while open
            raise ValueError("the file is closed")
        return self._file

    def fail(self, message: str, member: str | None = None) -> NoReturn:
        raise RolloutFileError(message, path=self.path, member=member)

    @contextlib.contextmanager
    def refusing(self, member: str | None) -> Iterator[None]:
        """Turn every low-level exception inside the block into a `RolloutFileError`."""
        try:
            yield
        except RolloutFileError:
            raise
        except _READ_ERRORS as exc:
            raise RolloutFileError(_describe(exc), path=self.path, member=member) from exc

    # ---------------------------------------------------------------- directory + metadata

    def _read_metadata(self) -> RolloutFileMetadata:
        infos = self._infos
        if len(self._by_name) != len(infos):
            seen: set[str] = set()
            for info in infos:
                if info.filename in seen:
                    self.fail("the archive holds this member more than once", info.filename)
                seen.add(info.filename)
        if METADATA_MEMBER not in self._by_name:
            self.fail(
                f"missing member {METADATA_MEMBER}: not a trajkit rollout file "
                "(a plain .npz written by numpy.savez?)"
            )
        first = infos[0]
        if first.filename != METADATA_MEMBER or first.header_offset != 0:
            self.fail(f"{METADATA_MEMBER} must be the first member, at offset 0", METADATA_MEMBER)
        for info in infos:
            try:
                check_entry(info)
            except ValueError as exc:
                self.fail(str(exc), info.filename)
        if first.file_size > MAX_METADATA_BYTES:
            self.fail(
                f"declares {first.file_size} bytes, over the {MAX_METADATA_BYTES}-byte limit "
                "for metadata",
                METADATA_MEMBER,
            )
        with self.refusing(METADATA_MEMBER):
            data = self._read_json(first)
            metadata = self._parse_metadata(data)
        self.arrays = metadata.arrays()  # the `.npy` members, listed once per file
        self._check_members(metadata)
        return metadata

    def _check_end(self) -> None:
        """The end of central directory record: the file's end, one disk, the entry count."""
        check_end(self.file, self._size, len(self._infos))

    def _parse_metadata(self, data: bytes | bytearray) -> RolloutFileMetadata:
        raw = strict_json_loads(data)
        if not isinstance(raw, dict):
            self.fail("must hold a JSON object", METADATA_MEMBER)
        if raw.get("format") != FORMAT_NAME:
            self.fail(
                f"format is {raw.get('format')!r}, expected {FORMAT_NAME!r}: not a trajkit "
                "rollout file",
                METADATA_MEMBER,
            )
        version = raw.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            self.fail(
                f"format_version must be a positive integer, got {version!r}", METADATA_MEMBER
            )
        if version > FORMAT_VERSION:
            self.fail(
                f"format version {version} is newer than this trajkit reads (up to "
                f"{FORMAT_VERSION}); upgrade trajkit to read this file",
                METADATA_MEMBER,
            )
        try:
            metadata = RolloutFileMetadata.model_validate_json(data, strict=True)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, err['loc'])) or 'metadata'}: "
                f"{str(err['msg']).removeprefix('Value error, ')}"
                for err in exc.errors()
            )
            self.fail(f"invalid metadata: {problems}", METADATA_MEMBER)
        # Defaults serve specs written by hand; a file holds every field, as save writes it.
        written = metadata.spec.model_dump(mode="json")
        spec = raw["spec"]
        missing = [key for key in written if key not in spec]
        if missing:
            self.fail(
                f"invalid metadata: spec: missing field(s) {', '.join(missing)} (a file holds "
                "every field, null where unset)",
                METADATA_MEMBER,
            )
        unused = [key for key in spec if key not in written]
        if unused:
            self.fail(
                f"invalid metadata: spec: field(s) {', '.join(unused)} must be left out (they "
                "describe the form of a field that is not in use)",
                METADATA_MEMBER,
            )
        return metadata

    def _check_members(self, metadata: RolloutFileMetadata) -> None:
        expected = member_names(self.arrays)
        expected_set = set(expected)
        actual = self._by_name
        missing = [name for name in expected if name not in actual]
        unexpected = [name for name in actual if name not in expected_set]
        if missing:
            self.fail(f"missing member(s) {_some(missing)} that the metadata declares", missing[0])
        if unexpected:
            self.fail(
                f"unexpected member(s) {_some(unexpected)}; expected exactly {_some(expected)}",
                unexpected[0],
            )
        limit = self.max_bytes
        declared = data_bytes(self.arrays)
        if limit is not None and declared > limit:
            self.fail(
                f"the metadata declares {declared} bytes of array data (T={metadata.num_steps}, "
                f"B={metadata.batch_size}), over the limit of {limit} bytes; pass a larger "
                "max_bytes to load it"
            )
        total = sum(info.file_size for info in self._infos)
        if limit is not None and total > limit:
            self.fail(
                f"the members declare {total} bytes uncompressed, over the limit of {limit} "
                "bytes; pass a larger max_bytes to load it"
            )
        for member in self.arrays:
            size = actual[member.name].file_size
            if not member.nbytes < size <= member.nbytes + MAX_NPY_HEADER:
                self.fail(
                    f"declares {size} bytes, but the metadata declares {member.label} as "
                    f"{member.dtype} {member.shape} ({member.nbytes} bytes of data plus a "
                    "header)",
                    member.name,
                )

    # ------------------------------------------------------------------------- members

    def _data_start(self, info: zipfile.ZipInfo) -> int:
        """Check the member's local header against the directory; return where its data starts."""
        name = info.filename
        if name not in self._starts:
            try:
                self._starts[name] = data_start(self.file, info, self._size)
            except ValueError as exc:
                self.fail(str(exc), name)
        return self._starts[name]

    def check_layout(self) -> None:
        """Check every local header; members must not overlap one another."""
        spans: list[tuple[int, int, str]] = []
        for info in self._infos:
            with self.refusing(info.filename):
                start = self._data_start(info)
            spans.append((info.header_offset, start + info.compress_size, info.filename))
        spans.sort()
        for (_, end, name), (next_start, _, next_name) in itertools.pairwise(spans):
            if end > next_start:
                self.fail(f"the member overlaps member {next_name}", name)

    def _stream(self, info: zipfile.ZipInfo, *, check_crc: bool = True) -> MemberStream:
        def fail(message: str) -> NoReturn:
            self.fail(message, info.filename)

        return MemberStream(self.file, info, self._data_start(info), fail, check_crc=check_crc)

    def _read_json(self, info: zipfile.ZipInfo, *, empty: bytes | None = None) -> bytes:
        """Read a whole JSON member, checking its CRC-32 and, as the bytes arrive, its budget.

        Memory grows with what arrives, and the bytes are refused as soon as decoding them
        would pass the JSON budget (`jsonbudget`), before they are decoded. `empty` is the
        member that lists only empty infos (they are built without decoding): a member of its
        size is read whole and refused only if it is something else.
        """
        budget = json_budget(self.max_bytes)
        size = info.file_size
        exempt = empty is not None and size == len(empty)
        if budget is not None and not exempt and JsonCost.least(size) > budget:
            self._over_budget(info, budget, 0)
        # Counted only where the member's size allows a cost over the budget.
        limit = budget if budget is not None and JsonCost.most(size) > budget else None
        stream = self._stream(info)
        cost = JsonCost()
        pieces: list[bytes | bytearray] = []
        read = 0
        while read < size:
            piece = stream.read(min(IO_CHUNK, size - read))
            if not piece:
                break
            pieces.append(piece)
            read += len(piece)
            if limit is not None:
                cost.add(piece)
                if not exempt and cost.over(limit):
                    self._over_budget(info, limit, read)
        stream.finish()
        data = b"".join(pieces)
        if limit is not None and exempt and data != empty and cost.over(limit):
            self._over_budget(info, limit, read)
        return data

    def _over_budget(self, info: zipfile.ZipInfo, budget: int, read: int) -> NoReturn:
        counted = f"its first {read} of {info.file_size} bytes" if read else "its declared size"
        self.fail(
            f"decoding it would take more than {budget} bytes of memory (counted on "
            f"{counted}, before decoding), over the budget for JSON members: max_bytes / "
            f"{JSON_BUDGET_SHARE}, at least {MIN_JSON_BUDGET >> 20} MiB; pass a larger "
            "max_bytes (or None) to load it",
            info.filename,
        )

    def read_infos(self) -> list[list[dict[str, Any]]] | None:
        """The infos, or `None` when all are empty (the rollout makes them if they are read)."""
        with self.refusing(INFOS_MEMBER):
            meta = self.metadata
            sparse = meta.format_version >= SPARSE_INFOS_VERSION
            empty = None if sparse else all_empty_infos(meta.num_steps, meta.batch_size)
            data = self._read_json(self._by_name[INFOS_MEMBER], empty=empty)
            if sparse:
                return sparse_infos_from_json(data, meta.num_steps, meta.batch_size)
            return infos_from_json(data, meta.num_steps, meta.batch_size, none_if_empty=True)

    def read_array(self, member: ArrayMember, *, mmap: bool, verify: bool) -> AnyArray:
        info = self._by_name[member.name]
        stored = info.compress_type == zipfile.ZIP_STORED
        with self.refusing(member.name):
            stream = self._stream(info, check_crc=verify or not stored)
            header = self._read_npy_header(member, info, stream)
            dtype = np.dtype(member.descr)
            if mmap and stored:
                array = self._map(member, self._data_start(info) + len(header), dtype)
                if verify:
                    flat = array.reshape(-1).view(np.uint8)
                    crc = crc32(header)
                    for pos in range(0, flat.size, _CHUNK):
                        crc = crc32(flat[pos : pos + _CHUNK].data, crc)
                    if crc != info.CRC:
                        self.fail("CRC-32 mismatch: the data is damaged", member.name)
            else:
                array = np.empty(member.shape, dtype)
                buffer = array.reshape(-1).view(np.uint8).data
                pos = 0
                while pos < len(buffer):
                    count = stream.readinto(buffer[pos : pos + IO_CHUNK])
                    if not count:
                        break
                    pos += count
                stream.finish()
            if dtype == np.bool_ and stray_bool_byte(array) is not None:
                self.fail("a bool array holds bytes other than 0 and 1", member.name)
            return array

    def _map(self, member: ArrayMember, offset: int, dtype: np.dtype[Any]) -> AnyArray:
        """A read-only view of the member's data in one memory map of the whole file.

        Every member of a file shares that map, which holds one file descriptor, whatever the
        number of members.
        """
        if member.nbytes == 0:
            array: AnyArray = np.empty(member.shape, dtype)
        else:
            if self._whole is None:
                self._whole = np.memmap(self.file, dtype=np.uint8, mode="r")
            data = self._whole[offset : offset + member.nbytes]
            array = data.view(dtype).reshape(member.shape)
        array.flags.writeable = False
        return array

    def _read_npy_header(
        self, member: ArrayMember, info: zipfile.ZipInfo, stream: MemberStream
    ) -> bytes:
        """Read and check a `.npy` header against the metadata; return its bytes."""
        name = member.name
        try:
            header, descr, fortran, shape = read_npy_header(stream.read, info.file_size)
        except RolloutFileError:
            raise
        except ValueError as exc:
            self.fail(str(exc), name)
        total = len(header)
        if holds_objects(descr):
            self.fail(
                f"holds an object (pickled) array, descr {descr!r}; files never hold pickles", name
            )
        if descr != member.descr:
            self.fail(
                f"has dtype {descr}, but the metadata declares {member.label} as "
                f"{member.dtype} ({member.descr}, spelled exactly so)",
                name,
            )
        if shape != member.shape:
            self.fail(
                f"has shape {shape}, but the metadata declares {member.label} as "
                f"{member.shape} (T={self.metadata.num_steps}, B={self.metadata.batch_size})",
                name,
            )
        if fortran:
            self.fail("is in Fortran order; the format stores C order", name)
        if info.file_size != total + member.nbytes:
            self.fail(
                f"holds {info.file_size - total} bytes of data after its header, expected "
                f"{member.nbytes}",
                name,
            )
        return header
