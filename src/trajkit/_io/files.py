"""Save and load rollouts in a safe, versioned `.npz`-based file format.

A rollout file is a ZIP archive: `metadata.json` first, one `.npy` member per array (model
outputs stacked per key), and `infos.json`. Nothing is ever unpickled. Loading checks the file
as a whole (format, version, exact member set, sizes against a limit before anything is
allocated or inflated, every `.npy` header against the metadata, CRC-32s) and then everything
the `Rollout` constructor checks. Every refusal is a `RolloutFileError`. The specification is
`docs/file-format.md`.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import errno
import functools
import io
import itertools
import os
import stat
import struct
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, NoReturn

import numpy as np
from pydantic import ValidationError

from trajkit._base.errors import RolloutFileError
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.crc import crc32, crc32_combine
from trajkit._io.infos import (
    infos_from_json,
    infos_to_json,
    sparse_infos_from_json,
    sparse_infos_to_json,
    strict_json_loads,
)
from trajkit._io.metadata import (
    FORMAT_NAME,
    FORMAT_VERSION,
    INFOS_MEMBER,
    MAX_METADATA_BYTES,
    METADATA_MEMBER,
    SPARSE_INFOS_VERSION,
    ArrayMember,
    RolloutFileMetadata,
)
from trajkit._models.rollout import Rollout, given_infos
from trajkit._models.spec import SUPPORTED_DTYPES, dtype_name

__all__ = ["DEFAULT_MAX_BYTES", "load", "read_metadata", "read_metadata_from", "save"]

DEFAULT_MAX_BYTES = 4 << 30
"""The default limit on the declared size of a file's contents: 4 GiB."""

_CHUNK = 16 << 20  # bytes per CRC step over a memory map
_CRC_LATER_BYTES = 1 << 20  # stored members this large have their CRC-32 on a helper thread
_CRC_CHUNK = 8 << 20  # bytes per read when the CRC-32 runs on the helper threads
_CRC_THREADS = 2  # helper threads for CRC-32s: zlib's alone is slower than a cached read
_IO_CHUNK = 1 << 18  # bytes per read: small enough that the CRC reads them from the cache
_WRITE_CHUNK = 1 << 20  # bytes per write (CRC then write, from the cache); measured best
_WRITEBACK_INTERVAL = 0.001  # seconds between the writeback thread's fdatasync calls (measured)
_ALIGN = 64  # stored array data starts at a multiple of this offset in the file
_ALIGN_EXTRA_ID = 0xD935  # the "Android zipalign" extra field, used as padding
_ZIP64_EXTRA_LEN = 20  # the ZIP64 extra field zipfile writes with force_zip64
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_END_RECORD = struct.Struct("<4s4H2LH")  # end of central directory, then a comment
_END_SIGNATURE = b"PK\x05\x06"
_MAX_NPY_HEADER = 1 << 16  # bytes of `.npy` header (magic, version, length and dict) we accept
_NPY_MAGIC = b"\x93NUMPY"
_TEMP_PREFIX, _TEMP_SUFFIX = ".trajkit-", ".tmp"  # save's temporary files: .trajkit-*.tmp
_DATE_TIME = (1980, 1, 1, 0, 0, 0)  # fixed, so that equal rollouts give identical files
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}

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

PathLike = str | os.PathLike[str]


# --------------------------------------------------------------------------------- writing


def save(
    rollout: Rollout,
    path: PathLike,
    *,
    compress: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> None:
    """Save a rollout to `path`, atomically, in the trajkit rollout file format.

    The file is a ZIP archive (conventionally named `*.npz`): `metadata.json`, one `.npy`
    member per array and `infos.json`; see [Recorded trajectories](../file-format.md). The
    data is written to a temporary file in the same folder (`.trajkit-XXXXXXXX.tmp`),
    flushed and fsynced, then renamed over `path` with `os.replace`. A save that fails midway
    (an exception, Ctrl-C) leaves any previous file at `path` as it was and leaves no
    temporary file behind; only a killed process (`kill -9`, power loss) can leave a
    `.trajkit-*.tmp` file, safe to delete. A symlink at `path` is followed: its target is
    replaced and the link stays. Uncompressed array data is 64-byte aligned, so that
    `load(path, mmap=True)` can memory-map it.

    Args:
        rollout: The rollout to save.
        path: Where to write; an existing regular file is replaced.
        compress: Deflate the arrays and infos (`metadata.json` is always stored as is).
        max_bytes: The same limit as `load`'s, on the contents uncompressed: a file over it
            is not written, since `load` would refuse it with the same `max_bytes`. `None`
            for no limit (then load it with `max_bytes=None` too).

    Raises:
        TypeError: If `rollout` is not a `Rollout`.
        ValueError: Before anything is written, if an info value cannot be stored as JSON
            exactly (the message names it as `infos[t][b]['key']`), or an array has a dtype
            the format does not support (such as float128), or a model-output key is not valid
            Unicode, or `path` holds a NUL byte, or the file would be over `max_bytes`.
        OSError: If the file cannot be written; before anything is written, if `path` is a
            folder (`IsADirectoryError`), a FIFO, a device or a socket.
        pydantic.ValidationError: If the rollout no longer passes validation (in-place edits
            since construction are checked by `Rollout.revalidate`), or ValueError if its
            model outputs are still being appended.

    Examples:
        >>> import os, tempfile
        >>> import trajkit
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=2)
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "run.npz")
        ...     trajkit.save(r, path)
        ...     trajkit.load(path) == r
        True
    """
    if not isinstance(rollout, Rollout):
        raise TypeError(f"save() needs a trajkit.Rollout, got {type(rollout).__name__}")
    target = _save_target(path)
    rollout.revalidate()  # in-place edits since construction are checked before writing
    given = given_infos(rollout)  # None: no infos given (and none made since)
    # Mostly empty infos are listed sparsely (format version 3), so that their cost follows
    # what they hold; mostly full ones keep the dense form (versions 1 and 2).
    full = 0 if given is None else sum(1 for row in given for item in row if item)
    sparse = 2 * full <= rollout.num_steps * rollout.batch_size
    metadata, arrays = _prepare(rollout, sparse_infos=sparse)
    infos = sparse_infos_to_json(given) if sparse or given is None else infos_to_json(given)
    meta_bytes = metadata.model_dump_json(indent=2).encode("utf-8") + b"\n"
    if len(meta_bytes) > MAX_METADATA_BYTES:
        raise ValueError(
            f"the metadata would take {len(meta_bytes)} bytes, over the format's limit of "
            f"{MAX_METADATA_BYTES} (too many or too long model-output keys)"
        )
    total = len(meta_bytes) + len(infos)
    total += sum(len(_npy_header(array)) + array.nbytes for _, array in arrays)
    if max_bytes is not None and total > max_bytes:
        raise ValueError(
            f"the file would hold {total} bytes uncompressed, over max_bytes={max_bytes}, so "
            "load() would refuse it with the same limit; pass a larger max_bytes (or None) "
            "here and to load()"
        )

    def write(file: IO[bytes]) -> None:
        with zipfile.ZipFile(file, "w", allowZip64=True) as archive:
            _write_bytes(archive, METADATA_MEMBER, meta_bytes, compress=False)
            for member, array in arrays:
                _write_npy(archive, file, member.name, array, compress=compress)
            _write_bytes(archive, INFOS_MEMBER, infos, compress=compress)

    _atomic_write(target, write)


def _prepare(
    rollout: Rollout, *, sparse_infos: bool
) -> tuple[RolloutFileMetadata, list[tuple[ArrayMember, AnyArray]]]:
    """Check every array can be stored; return the metadata and the (member, array) pairs."""
    sources: dict[str, AnyArray | None] = {
        "rews": rollout.rews,
        "dones": rollout.dones,
        "truncated": rollout.truncated,
        "final_values": rollout.final_values,
    }
    outs = rollout.model_outs.arrays  # built once: each access walks every key
    leaves = {
        name: [leaf for _, leaf in _tree.flatten(getattr(rollout, name))]
        for name in ("states", "obses")
    }
    named = [
        (_tree.format_path(name, path), leaf)
        for name in ("states", "obses")
        for path, leaf in _tree.flatten(getattr(rollout, name))
    ]
    named += [(n, a) for n, a in sources.items() if a is not None]
    named += [(f"model_outs[{k!r}]", a) for k, a in outs.items()]
    for name, array in named:
        if dtype_name(array.dtype) not in SUPPORTED_DTYPES:
            raise ValueError(
                f"{name} has dtype {array.dtype}, which the file format cannot store; "
                f"supported: {', '.join(SUPPORTED_DTYPES)}"
            )
        if array.dtype == np.bool_ and array.size and array.view(np.uint8).max() > 1:
            raise ValueError(
                f"{name} is a bool array holding bytes other than 0 and 1 (made with "
                ".view(bool)?), which the file format refuses; use .astype(bool)"
            )
    for key in outs:
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"model_outs key {key!r} is not valid Unicode") from None
    metadata = RolloutFileMetadata.from_rollout(rollout, sparse_infos=sparse_infos)
    pending = {name: iter(arrays) for name, arrays in leaves.items()}
    pairs: list[tuple[ArrayMember, AnyArray]] = []
    for member in metadata.arrays():
        if member.key is not None:
            array = outs[member.key]
        elif member.field in pending:  # one member per leaf, in flatten order
            array = next(pending[member.field])
        else:
            source = sources[member.field]
            if source is None:  # pragma: no cover - the metadata lists only present fields
                raise ValueError(f"{member.field} is missing")
            array = source
        pairs.append((member, array))
    return metadata, pairs


def _zip_info(name: str, compress: bool) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=_DATE_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    info.external_attr = (stat.S_IFREG | 0o644) << 16
    return info


def _write_bytes(archive: zipfile.ZipFile, name: str, data: bytes, *, compress: bool) -> None:
    archive.writestr(_zip_info(name, compress), data)


def _npy_header(array: AnyArray) -> bytes:
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header,
        {
            "descr": np.lib.format.dtype_to_descr(array.dtype),
            "fortran_order": False,
            "shape": array.shape,
        },
    )
    return header.getvalue()


def _write_npy(
    archive: zipfile.ZipFile, file: IO[bytes], name: str, array: AnyArray, *, compress: bool
) -> None:
    """Write one `.npy` member: a version 1.0 header, then the data, little-endian, C order."""
    little = array.dtype.newbyteorder("<")
    if array.dtype != little:  # big-endian (native byte order and `|` are left alone)
        array = array.astype(little)
    header = _npy_header(array)
    info = _zip_info(name, compress)
    info.file_size = len(header) + array.nbytes
    if not compress:
        # Pad the local header so that the array data starts at a multiple of _ALIGN.
        start = file.tell() + _LOCAL_HEADER.size + len(name.encode()) + _ZIP64_EXTRA_LEN
        pad = (-(start + len(header))) % _ALIGN
        if pad < 6:
            pad += _ALIGN
        info.extra = struct.pack("<HHH", _ALIGN_EXTRA_ID, pad - 4, _ALIGN) + bytes(pad - 6)
    with archive.open(info, "w", force_zip64=True) as out:
        out.write(header)
        _write_data(out, array)


def _write_data(out: IO[bytes], array: AnyArray) -> None:
    if array.size == 0:
        return
    if array.flags.c_contiguous:
        flat = array.reshape(-1).view(np.uint8)
        for start in range(0, flat.size, _WRITE_CHUNK):
            out.write(flat[start : start + _WRITE_CHUNK].data)
        return
    rows = max(1, _WRITE_CHUNK // max(1, array[0].nbytes))
    for start in range(0, len(array), rows):
        out.write(np.ascontiguousarray(array[start : start + rows]).data)


def _save_target(path: PathLike) -> Path:
    """The file `save` writes: `path` with symlinks resolved, refused up front if it cannot be.

    A symlink is followed, so that its target is replaced (next to the target) and the link
    stays. An existing folder, FIFO, device or socket is refused before anything is written.
    """
    text = _path_str(path)
    if "\0" in text:
        raise ValueError(f"cannot save to {text!r}: the path holds a NUL byte")
    target = Path(os.path.realpath(text))
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return target  # a new file (or one we cannot stat): writing reports any problem
    _refuse_to_replace(mode, text)
    return target


def _refuse_to_replace(mode: int, path: str) -> None:
    """Refuse to replace anything but a regular file."""
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(
            errno.EISDIR, "cannot save over a folder (save() replaces only regular files)", path
        )
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    raise OSError(
        errno.EINVAL, f"cannot save over {kind} (save() replaces only regular files)", path
    )


def _atomic_write(target: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write through `write` into a temporary file next to `target`, fsync, then rename.

    The temporary file is `.trajkit-XXXXXXXX.tmp` (short, so that any name the folder allows
    can be saved): hidden, not `*.npz`, and removed on any exception, Ctrl-C included.
    """
    directory = target.parent
    mode = _new_file_mode(target)
    fd, temp_name = tempfile.mkstemp(dir=directory, prefix=_TEMP_PREFIX, suffix=_TEMP_SUFFIX)
    try:
        with open(fd, "wb") as file, _WritebackThread(file.fileno()):
            write(file)
            file.flush()
        os.chmod(temp_name, mode)
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    _fsync_directory(directory)


class _WritebackThread:
    """Flush a file's written pages to disk while it is being written, then fsync it.

    Durability needs an fsync, which on its own waits for every page after the last write.
    A helper thread calls `fdatasync` in a loop while the writer goes on (both release the
    GIL), so the disk works during the writing instead of after it; on exit the file is
    fsynced once more, after the writer's last bytes. Errors from the helper are re-raised.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._stop = threading.Event()
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="trajkit-writeback", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                os.fdatasync(self._fd)
                self._stop.wait(_WRITEBACK_INTERVAL)
        except OSError as exc:  # e.g. EIO: reported by the final fsync too, but keep it
            self._error = exc

    def __enter__(self) -> _WritebackThread:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is None:
            if self._error is not None:
                raise self._error
            os.fsync(self._fd)


def _new_file_mode(target: Path) -> int:
    """Keep an existing file's permissions; otherwise what `open()` would give (0o666 & ~umask)."""
    with contextlib.suppress(OSError):
        return stat.S_IMODE(os.stat(target).st_mode)
    return 0o666 & ~_umask()


def _umask() -> int:
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # no /proc: read it by setting it (briefly process-wide)
    os.umask(mask)
    return mask


def _fsync_directory(directory: Path) -> None:
    """Make the rename durable where the platform allows it (best effort)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(directory, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------- reading


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
    with _Reader(_path_str(path), max_bytes) as reader:
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
            uncompressed); `None` for no limit. Raise it to load files larger than 4 GiB.
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
    if verify is None:
        verify = not mmap
    name = _path_str(path)
    with _Reader(name, max_bytes) as reader, reader.refusing(None):
        metadata = reader.metadata
        reader.check_layout()
        members = metadata.arrays()
        arrays = {m.name: reader.read_array(m, mmap=mmap, verify=verify) for m in members}
        reader.check_crcs()
        infos = reader.read_infos()
        # Building and validating the rollout is guarded too: a MemoryError while checking
        # the values of a huge (declared within max_bytes) array is a refusal like any other.
        return _rollout(name, members, arrays, infos)


def _rollout(
    name: str,
    members: list[ArrayMember],
    arrays: dict[str, AnyArray],
    infos: list[list[dict[str, Any]]] | None,
) -> Rollout:
    fields: dict[str, Any] = {
        m.field: arrays[m.name] for m in members if m.key is None and not m.path
    }
    for field in ("states", "obses"):
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


def _path_str(path: PathLike) -> str:
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


_NPY_KEYS = ("descr", "fortran_order", "shape")


def _parse_npy_dict(text: bytes) -> tuple[str, bool, tuple[int, ...]]:
    """Parse a `.npy` header dict as the format specifies it, strictly.

    ASCII, one line ended by a newline, a Python dict literal with exactly the keys `descr` (a
    string), `fortran_order` (a bool) and `shape` (a tuple of integers >= 0), each once. The
    literal is parsed into a syntax tree and read from it; nothing is evaluated. Python-2
    spellings (`3L`), duplicate keys and any other form are refused. Files of one structure
    repeat their headers: short ones (the usual, under 256 bytes) are remembered.
    """
    return _parse_npy_cached(text) if len(text) <= 256 else _parse_npy_text(text)


def _parse_npy_text(text: bytes) -> tuple[str, bool, tuple[int, ...]]:
    if not text.isascii():
        raise ValueError("the header is not ASCII")
    if not text.endswith(b"\n") or b"\n" in text[:-1]:
        raise ValueError("the header is not one line ended by a newline")
    tree = ast.parse(text[:-1].decode("ascii").strip(" "), mode="eval").body
    if not isinstance(tree, ast.Dict):
        raise ValueError("the header is not a dict literal")
    keys = [key.value if isinstance(key, ast.Constant) else None for key in tree.keys]
    if len(keys) != len(set(keys)) or sorted(map(str, keys)) != sorted(_NPY_KEYS):
        raise ValueError(
            f"the header must have the keys {', '.join(_NPY_KEYS)} once each, got "
            f"{', '.join(map(repr, keys))}"
        )
    fields = dict(zip(keys, tree.values, strict=True))
    descr, fortran, shape = (fields[key] for key in _NPY_KEYS)
    if not (isinstance(descr, ast.Constant) and type(descr.value) is str):
        raise ValueError("descr must be a string")
    if not (isinstance(fortran, ast.Constant) and type(fortran.value) is bool):
        raise ValueError("fortran_order must be True or False")
    elements = shape.elts if isinstance(shape, ast.Tuple) else [shape]
    # A minus sign is an operator, not part of a Constant: negative sizes are refused here.
    ints = [d.value for d in elements if isinstance(d, ast.Constant) and type(d.value) is int]
    if not isinstance(shape, ast.Tuple) or len(ints) != len(elements):
        raise ValueError("shape must be a tuple of integers >= 0")
    return descr.value, fortran.value, tuple(ints)


_parse_npy_cached = functools.lru_cache(maxsize=256)(_parse_npy_text)


def _holds_objects(descr: str) -> bool:
    """Whether a `.npy` descr may name an object (pickled) dtype; only to say so when refusing.

    Read from the text: handing NumPy an arbitrary descr can warn (deprecated aliases), and
    a warning filter may make that an exception.
    """
    return "O" in descr


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


class _MemberStream:
    """Bounded reads of one member's uncompressed bytes, straight from the file.

    Stored members are read as they are; deflated members are inflated with a hard cap: never
    more output than asked for, never past the size the ZIP directory declares. `finish`
    checks that exactly the declared bytes were produced, that a deflate stream ends exactly
    there (more output means a bomb or damage), and the CRC-32.
    """

    def __init__(
        self, reader: _Reader, info: zipfile.ZipInfo, start: int, *, check_crc: bool
    ) -> None:
        self._reader = reader
        self._file = reader.file
        self._info = info
        self._pos = start  # next compressed byte to read from the file
        self._left_in = info.compress_size
        self._left_out = info.file_size
        self._check_crc = check_crc
        self.crc = 0
        self._inflate = (
            zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
        )
        self._tail = b""  # compressed input not consumed yet

    def _fail(self, message: str) -> NoReturn:
        self._reader.fail(message, self._info.filename)

    def _raw(self, n: int) -> bytes:
        self._file.seek(self._pos)
        data = self._file.read(min(n, self._left_in))
        self._pos += len(data)
        self._left_in -= len(data)
        return data

    def readinto(self, buffer: memoryview) -> int:
        """Fill a prefix of `buffer` (never past the declared size); 0 at the end.

        Stored data goes straight from the file into `buffer`; deflated data is inflated
        straight into it, at most `len(buffer)` bytes.
        """
        n = min(len(buffer), self._left_out)
        if n <= 0:
            return 0
        if self._inflate is None:
            self._file.seek(self._pos)
            count = self._file.readinto(buffer[: min(n, self._left_in)])
            self._pos += count
            self._left_in -= count
        else:
            count = 0
            while count < n and not self._inflate.eof:
                if not self._tail:
                    self._tail = self._raw(_IO_CHUNK)
                    if not self._tail:
                        break
                piece = self._inflate.decompress(self._tail, n - count)
                self._tail = self._inflate.unconsumed_tail
                buffer[count : count + len(piece)] = piece
                count += len(piece)
        self._left_out -= count
        if self._check_crc:
            self.crc = crc32(buffer[:count], self.crc)
        return count

    def read(self, n: int) -> bytearray:
        """Read `n` bytes, fewer only where the member ends.

        The buffer grows as bytes arrive, `_IO_CHUNK` at a time: memory follows what the
        member really holds, never what its header declares.
        """
        out = bytearray()
        while len(out) < n and self._left_out:
            piece = bytearray(min(n - len(out), _IO_CHUNK, self._left_out))
            got = self.readinto(memoryview(piece))
            if not got:
                break
            del piece[got:]
            out += piece
        return out

    def finish(self) -> None:
        """Check the member ended exactly where declared, and its CRC-32."""
        if self._left_out:
            self._fail(f"truncated: {self._left_out} bytes of the member missing")
        if self._inflate is not None:
            while not self._inflate.eof:
                if not self._tail:
                    self._tail = self._raw(_IO_CHUNK)
                    if not self._tail:
                        self._fail("truncated: the compressed data ends early")
                if self._inflate.decompress(self._tail, 1):
                    self._fail(
                        f"inflates to more than the declared {self._info.file_size} bytes "
                        "(a deflate bomb, or damaged data)"
                    )
                self._tail = self._inflate.unconsumed_tail
            if self._tail or self._inflate.unused_data or self._left_in:
                self._fail("has bytes after the end of its compressed data")
        if self._check_crc and self.crc != self._info.CRC:
            self._fail("CRC-32 mismatch: the data is damaged")


@dataclasses.dataclass
class _PendingCrc:
    """A member whose CRC-32 is being computed on the helper threads, chunk by chunk."""

    name: str
    expected: int
    value: int  # the CRC-32 of the `.npy` header, which the chunks follow
    chunks: list[tuple[Future[int], int]] = dataclasses.field(default_factory=list)  # (CRC, length)

    def result(self) -> int:
        """The member's CRC-32: the chunks' CRC-32s joined in order."""
        value = self.value
        for future, length in self.chunks:
            value = crc32_combine(value, future.result(), length)
        return value


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
        # CRC-32s of large stored members, computed chunk by chunk on helper threads while
        # the next chunks and members are read (zlib releases the GIL).
        self._crc_thread: ThreadPoolExecutor | None = None
        self._pending_crcs: list[_PendingCrc] = []
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
        if self._crc_thread is not None:
            self._crc_thread.shutdown(wait=True, cancel_futures=True)
            self._crc_thread = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def _crc_thread_pool(self) -> ThreadPoolExecutor:
        if self._crc_thread is None:
            self._crc_thread = ThreadPoolExecutor(_CRC_THREADS, thread_name_prefix="trajkit-crc")
        return self._crc_thread

    def _read_crc_later(
        self, stream: _MemberStream, name: str, expected: int, header: bytes, buffer: memoryview
    ) -> None:
        """Read a member's data; its CRC-32 runs on the helper threads, a chunk behind the reads.

        Each chunk's CRC-32 is computed on its own as soon as the chunk is read, by one of the
        helper threads, so that it overlaps the reads of the chunks and members that follow;
        `check_crcs` joins them in order (`crc32_combine`) and compares the result. With two
        threads even zlib's CRC-32, slower than a read from the page cache, keeps up.
        """
        pool = self._crc_thread_pool()
        pending = _PendingCrc(name, expected, crc32(header))
        pos = 0
        while pos < len(buffer):
            count = stream.readinto(buffer[pos : pos + _CRC_CHUNK])
            if not count:
                break
            pending.chunks.append((pool.submit(crc32, buffer[pos : pos + count]), count))
            pos += count
        stream.finish()
        self._pending_crcs.append(pending)

    def check_crcs(self) -> None:
        """Wait for the CRC-32s computed on the helper threads; refuse a damaged member."""
        pending, self._pending_crcs = self._pending_crcs, []
        for member in pending:
            if member.result() != member.expected:
                self.fail("CRC-32 mismatch: the data is damaged", member.name)

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
            self._check_entry(info)
        if first.file_size > MAX_METADATA_BYTES:
            self.fail(
                f"declares {first.file_size} bytes, over the {MAX_METADATA_BYTES}-byte limit "
                "for metadata",
                METADATA_MEMBER,
            )
        with self.refusing(METADATA_MEMBER):
            data = self._read_small(first)
            metadata = self._parse_metadata(data)
        self._check_members(metadata)
        return metadata

    def _check_end(self) -> None:
        """The file ends with the end of central directory record and its comment, exactly.

        `zipfile` takes the last record signature in the file's last 64 KiB as the end record
        and ignores what follows its comment; a rollout file has nothing there.
        """
        tail_size = min(self._size, _END_RECORD.size)
        self.file.seek(self._size - tail_size)
        tail = self.file.read(tail_size)
        if tail.startswith(_END_SIGNATURE) and tail.endswith(b"\0\0"):
            return  # the end record, without a comment, ends the file: as save writes it
        tail_size = min(self._size, _END_RECORD.size + 0xFFFF)
        self.file.seek(self._size - tail_size)
        tail = self.file.read(tail_size)
        at = tail.rfind(_END_SIGNATURE)
        if at < 0 or at + _END_RECORD.size > len(tail):  # pragma: no cover - zipfile refused it
            self.fail("no end of central directory record")
        comment_size = _END_RECORD.unpack_from(tail, at)[-1]
        extra = len(tail) - (at + _END_RECORD.size + comment_size)
        if extra:
            self.fail(
                f"{extra} bytes after the end of the ZIP archive (its end of central directory "
                "record and comment)"
                if extra > 0
                else "the end of central directory record's comment runs past the end of the file"
            )

    def _check_entry(self, info: zipfile.ZipInfo) -> None:
        name = info.filename
        if info.orig_filename != name:  # zipfile cuts a name at a NUL byte
            self.fail(f"the member name {info.orig_filename!r} holds a NUL byte", name)
        if info.flag_bits & 0x1:
            self.fail("the member is encrypted", name)
        if info.compress_type not in _METHODS:
            self.fail(
                f"compression method {info.compress_type} is not allowed (only stored and "
                "deflated)",
                name,
            )
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
            self.fail(
                f"a stored member with compressed size {info.compress_size} != size "
                f"{info.file_size}",
                name,
            )

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
        expected = metadata.members()
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
        declared = metadata.data_bytes()
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
        for member in metadata.arrays():
            size = actual[member.name].file_size
            if not member.nbytes < size <= member.nbytes + _MAX_NPY_HEADER:
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
        if name in self._starts:
            return self._starts[name]
        self.file.seek(info.header_offset)
        raw = self.file.read(_LOCAL_HEADER.size)
        if len(raw) != _LOCAL_HEADER.size:
            self.fail("truncated: the local header is cut off", name)
        sig, _, flags, method, _, _, _, _, _, name_len, extra_len = _LOCAL_HEADER.unpack(raw)
        local_name = self.file.read(name_len)
        if (
            sig != _LOCAL_SIGNATURE
            or local_name != info.orig_filename.encode("utf-8")
            or flags & 0x1
            or method != info.compress_type
        ):
            self.fail("the local header does not match the central directory", name)
        start: int = info.header_offset + _LOCAL_HEADER.size + name_len + extra_len
        if start + info.compress_size > self._size:
            self.fail("truncated: the member's data runs past the end of the file", name)
        self._starts[name] = start
        return start

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

    def _stream(self, info: zipfile.ZipInfo, *, check_crc: bool = True) -> _MemberStream:
        return _MemberStream(self, info, self._data_start(info), check_crc=check_crc)

    def _read_small(self, info: zipfile.ZipInfo) -> bytearray:
        """Read a whole JSON member, checking its CRC-32; memory grows with what arrives."""
        stream = self._stream(info)
        data = stream.read(info.file_size)
        stream.finish()
        return data

    def read_infos(self) -> list[list[dict[str, Any]]] | None:
        """The infos, or `None` when all are empty (the rollout makes them if they are read)."""
        with self.refusing(INFOS_MEMBER):
            data = self._read_small(self._by_name[INFOS_MEMBER])
            meta = self.metadata
            if meta.format_version >= SPARSE_INFOS_VERSION:
                return sparse_infos_from_json(data, meta.num_steps, meta.batch_size)
            return infos_from_json(data, meta.num_steps, meta.batch_size, none_if_empty=True)

    def read_array(self, member: ArrayMember, *, mmap: bool, verify: bool) -> AnyArray:
        info = self._by_name[member.name]
        stored = info.compress_type == zipfile.ZIP_STORED
        # A large stored member's CRC-32 is computed on the helper thread, overlapping the
        # reads that follow; `load` waits for it (`check_crcs`) before using any array.
        later = verify and stored and not mmap and member.nbytes >= _CRC_LATER_BYTES
        with self.refusing(member.name):
            stream = self._stream(info, check_crc=(verify or not stored) and not later)
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
                if later:
                    self._read_crc_later(stream, member.name, info.CRC, bytes(header), buffer)
                else:
                    while pos < len(buffer):
                        count = stream.readinto(buffer[pos : pos + _IO_CHUNK])
                        if not count:
                            break
                        pos += count
                    stream.finish()
            if dtype == np.bool_ and array.size and array.view(np.uint8).max() > 1:
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
        self, member: ArrayMember, info: zipfile.ZipInfo, stream: _MemberStream
    ) -> bytes:
        """Read and check a `.npy` header against the metadata; return its bytes."""
        name = member.name
        start = stream.read(8)
        if len(start) < 8 or start[:6] != _NPY_MAGIC:
            self.fail("not a .npy array (bad magic string)", name)
        version = (start[6], start[7])
        if version not in ((1, 0), (2, 0)):
            self.fail(f".npy version {version[0]}.{version[1]} is not supported (1.0, 2.0)", name)
        length_bytes = stream.read(2 if version == (1, 0) else 4)
        length = int.from_bytes(length_bytes, "little")
        total = 8 + len(length_bytes) + length
        if total > min(info.file_size, _MAX_NPY_HEADER):
            self.fail(f"the .npy header claims {length} bytes, longer than allowed", name)
        header = bytes(start + length_bytes + stream.read(length))
        if len(header) != total:
            self.fail("truncated .npy header", name)
        try:
            descr, fortran, shape = _parse_npy_dict(header[8 + len(length_bytes) :])
        except (ValueError, SyntaxError, RecursionError, MemoryError) as exc:
            self.fail(f"malformed .npy header: {exc}", name)
        if _holds_objects(descr):
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
