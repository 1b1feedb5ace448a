"""Atomic, durable file outputs: a temporary file next to the target, fsynced, then renamed.

Every output trajkit writes goes through `atomic_write`: rollout files, exports and dataset
files. A write that fails midway (an exception, Ctrl-C) leaves any previous file at the target
as it was and leaves no temporary file behind; only a killed process (`kill -9`, a power cut)
can leave a `.trajkit-XXXXXXXX.tmp` file, safe to delete when nothing is writing. The
output is refused when it is one of the inputs (by identity, not by name: see
`same_file`), and when the path names a folder, FIFO, device or socket.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

__all__ = [
    "TEMP_PREFIX",
    "TEMP_SUFFIX",
    "PathLike",
    "StagedWrites",
    "atomic_write",
    "fsync_path",
    "output_target",
    "path_str",
    "refuse_to_replace",
    "same_file",
]

PathLike = str | os.PathLike[str]

TEMP_PREFIX, TEMP_SUFFIX = ".trajkit-", ".tmp"  # temporary files: .trajkit-XXXXXXXX.tmp
_WRITEBACK_INTERVAL = 0.001  # seconds between the writeback thread's syncs (measured)


def path_str(path: PathLike) -> str:
    """`path` as a `str`; a `TypeError` for anything but a `str` or `os.PathLike`.

    Examples:
        >>> from pathlib import Path
        >>> path_str(Path("runs") / "a.npz")
        'runs/a.npz'
    """
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    return os.fspath(path)


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether `a` and `b` are the same existing file, by identity (device and inode).

    Two names of one file (a symlink, a hard link, `./x` and `x`) are the same file; a path
    that does not exist (or cannot be looked up) is the same as nothing.

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     a = os.path.join(tmp, "a.npz")
        ...     open(a, "wb").close()
        ...     os.link(a, os.path.join(tmp, "b.npz"))
        ...     same_file(a, os.path.join(tmp, "b.npz")), same_file(a, os.path.join(tmp, "c"))
        (True, False)
    """
    try:
        first, second = os.stat(path_str(a)), os.stat(path_str(b))
    except (OSError, ValueError):  # missing, unreadable, or a NUL byte in the name
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def refuse_to_replace(mode: int, path: str, *, verb: str = "save", by: str = "save()") -> None:
    """Refuse to write over anything but a regular file (`mode` is its `st_mode`).

    Raises:
        IsADirectoryError: For a folder.
        OSError: For a FIFO, a device, a socket or anything else that is not a regular file
            (`errno.EINVAL`).

    Examples:
        >>> import stat
        >>> refuse_to_replace(stat.S_IFREG | 0o644, "run.npz")  # a regular file: fine
        >>> refuse_to_replace(stat.S_IFDIR | 0o755, "runs", verb="export", by="export")
        Traceback (most recent call last):
        ...
        IsADirectoryError: [Errno 21] cannot export over a folder (export replaces only regular files): 'runs'
    """  # noqa: E501
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(
            errno.EISDIR, f"cannot {verb} over a folder ({by} replaces only regular files)", path
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
    message = f"cannot {verb} over {kind} ({by} replaces only regular files)"
    raise OSError(errno.EINVAL, message, path)


def output_target(path: PathLike, *, verb: str = "save", by: str = "save()") -> Path:
    """The file an output at `path` replaces: symlinks resolved, refused up front if it cannot be.

    A symlink is followed, so that its target is replaced (next to the target) and the link
    stays. A NUL byte in the path, an existing folder, FIFO, device or socket are refused
    before anything is written; `verb` and `by` name the operation in the messages.

    Raises:
        ValueError: If `path` holds a NUL byte.
        OSError: As [`refuse_to_replace`][trajkit._io.atomic.refuse_to_replace].

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     output_target(os.path.join(tmp, "new.npz")).name
        'new.npz'
    """
    text = path_str(path)
    if "\0" in text:
        raise ValueError(f"cannot {verb} to {text!r}: the path holds a NUL byte")
    target = Path(os.path.realpath(text))
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return target  # a new file (or one we cannot stat): writing reports any problem
    refuse_to_replace(mode, text, verb=verb, by=by)
    return target


def atomic_write(
    target: PathLike,
    write: Callable[[IO[bytes]], object],
    *,
    inputs: Iterable[PathLike] = (),
    verb: str = "save",
    by: str = "save()",
) -> None:
    """Write `target` through `write(file)`, atomically: a temporary file, fsync, rename.

    `write` gets a binary file open on a temporary file next to the target
    (`.trajkit-XXXXXXXX.tmp`: short, hidden and not `*.npz`); while it writes, a helper
    thread flushes the written pages to disk, and at the end the file is fsynced, renamed
    over the target with `os.replace`, and the folder fsynced. On any exception (Ctrl-C
    included) the temporary file is removed and the target is left as it was. A symlink at
    `target` is followed (its target is replaced, the link stays). A replaced file keeps its
    permissions; a new one gets `0o666 & ~umask`.

    Args:
        target: The file to write.
        write: Writes the whole contents into the open file it is given.
        inputs: Files the contents are read from: the output is refused if it is one of them
            (compared by identity, see [`same_file`][trajkit._io.atomic.same_file]), before
            anything is written.
        verb: The operation, for messages (`"save"`, `"export"`, ...).
        by: Who writes, for messages (`"save()"`, `"trajkit export"`, ...).

    Raises:
        ValueError: If the target is one of `inputs`, or the path holds a NUL byte.
        OSError: If the target is a folder, FIFO, device or socket, or writing fails.

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "out.txt")
        ...     atomic_write(path, lambda file: file.write(b"hello"))
        ...     with open(path, "rb") as file:
        ...         print(file.read())
        ...     try:
        ...         atomic_write(path, lambda file: file.write(b"x"), inputs=[path])
        ...     except ValueError as exc:
        ...         print("also an input" in str(exc))
        b'hello'
        True
    """
    resolved = output_target(target, verb=verb, by=by)
    for source in inputs:
        if same_file(resolved, source):
            raise ValueError(
                f"cannot {verb} to {path_str(target)}: it is also an input "
                f"({path_str(source)}); write to another path"
            )
    _write_replace(resolved, write)


def _write_replace(target: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write a temporary file next to `target` (resolved already), fsync it, rename it over."""
    temp_name = _write_temp(target, write)
    try:
        os.replace(temp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    fsync_path(target.parent, folder=True)


def _write_temp(target: Path, write: Callable[[IO[bytes]], object]) -> str:
    """A temporary file next to `target`, written, fsynced, with the target's permissions."""
    mode = _new_file_mode(target)
    fd, temp_name = tempfile.mkstemp(dir=target.parent, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
    try:
        with open(fd, "wb") as file, _WritebackThread(file.fileno()):
            write(file)
            file.flush()
        os.chmod(temp_name, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    return temp_name


class StagedWrites:
    """Several outputs written each to a temporary file, then renamed over their targets together.

    `add` writes one output as [`atomic_write`][trajkit._io.atomic.atomic_write] does (the
    target checked up front, a temporary file next to it, fsynced), but leaves it there;
    `commit` renames every one over its target, in the order added, and fsyncs their folders.
    Leaving the `with` block before `commit` (an error, Ctrl-C) removes the temporary files:
    no target is touched, so a command that writes many files from one input writes all of
    them or none, while holding one in memory at a time.

    Examples:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     paths = [os.path.join(tmp, name) for name in ("a.txt", "b.txt")]
        ...     with StagedWrites() as staged:
        ...         for path in paths:
        ...             staged.add(path, lambda file: file.write(b"x"))
        ...         print([os.path.exists(path) for path in paths])
        ...         staged.commit()
        ...     print(sorted(os.listdir(tmp)))
        [False, False]
        ['a.txt', 'b.txt']
    """

    def __init__(self) -> None:
        self._staged: list[tuple[str, Path]] = []

    def add(self, target: PathLike, write: Callable[[IO[bytes]], object]) -> None:
        """Write `target`'s contents into a temporary file next to it (see `atomic_write`).

        Raises:
            ValueError: If the path holds a NUL byte.
            OSError: If the target is a folder, FIFO, device or socket, or writing fails.
        """
        resolved = output_target(target, verb="write", by="trajkit")
        self._staged.append((_write_temp(resolved, write), resolved))

    def commit(self) -> None:
        """Rename every staged file over its target, in order, and fsync their folders."""
        staged, self._staged = self._staged, []
        for i, (temp_name, target) in enumerate(staged):
            try:
                os.replace(temp_name, target)
            except BaseException:
                self._staged = staged[i:]  # removed on leaving the `with` block
                raise
        for folder in dict.fromkeys(target.parent for _, target in staged):
            fsync_path(folder, folder=True)

    def __enter__(self) -> StagedWrites:
        return self

    def __exit__(self, *exc: object) -> None:
        for temp_name, _ in self._staged:
            with contextlib.suppress(OSError):
                os.unlink(temp_name)
        self._staged = []


def _sync_data(fd: int) -> None:
    """`os.fdatasync` where Python has it (Linux, the BSDs), else `os.fsync` (macOS, Windows)."""
    sync = getattr(os, "fdatasync", None)
    (sync or os.fsync)(fd)


class _WritebackThread:
    """Flush a file's written pages to disk while it is being written, then fsync it.

    Durability needs an fsync, which on its own waits for every page after the last write.
    A helper thread syncs the data in a loop while the writer goes on (both release the
    GIL), so the disk works during the writing instead of after it; on exit the file is
    fsynced once more, after the writer's last bytes. Errors from the helper are re-raised.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._stop = threading.Event()
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="trajkit-writeback", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                _sync_data(self._fd)
                self._stop.wait(_WRITEBACK_INTERVAL)
        except Exception as exc:  # e.g. EIO: reported by the final fsync too, but keep it
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


def fsync_path(path: str | os.PathLike[str], *, folder: bool = False) -> None:
    """Flush a file, or a folder's names (`folder=True`), to disk where the platform allows.

    Best effort: a folder that cannot be opened (Windows) or synced is left as it is; what
    matters there is that a rename is atomic, which it is.

    Examples:
        >>> import tempfile
        >>> fsync_path(tempfile.gettempdir(), folder=True)
    """
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # file systems that cannot sync a folder
        pass
    finally:
        os.close(fd)
