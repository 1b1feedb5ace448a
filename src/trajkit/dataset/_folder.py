"""A dataset's folder: its rollout files' names, claimed without overwriting, and its spec file."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from typing import IO

from pydantic import ValidationError

from trajkit._base.errors import RolloutFileError
from trajkit._io.atomic import TEMP_PREFIX, TEMP_SUFFIX, atomic_write, fsync_path
from trajkit._io.infos import strict_json_loads
from trajkit._io.remote import filesystem, is_url, join_url
from trajkit._models.spec import RolloutSpec

SPEC_FILE = "spec.json"
"""The name of the file that pins a dataset's spec, at the top of its folder."""

MAX_SPEC_BYTES = 1 << 20
_NAME = re.compile(r"^rollout-(\d+)\.npz$")
# Errors of os.link where the file system has no hard links (names are then claimed by an
# exclusive create instead).
_NO_HARD_LINKS = frozenset(
    code
    for code in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV)
    if code is not None
)


def file_name(number: int) -> str:
    return f"rollout-{number:06d}.npz"


def file_number(path: str) -> int:
    """The number of a `rollout-N.npz` file; -1 for any other name."""
    match = _NAME.match(_basename(path))
    return int(match.group(1)) if match is not None else -1


def highest_number(root: str) -> int:
    """The highest N of the `rollout-N.npz` files now at the top of the local folder `root`."""
    with os.scandir(root) as entries:
        return max((file_number(entry.name) for entry in entries), default=-1)


def claim_name(temp: str, target: str) -> bool:
    """Give the finished file `temp` the name `target`, unless that name is taken.

    A hard link is made (atomic and exclusive, on NFS too); where the file system has none,
    the name is claimed by creating it exclusively and `temp` moved over it. Returns whether
    the name was claimed; `temp` may remain either way (the caller removes it).
    """
    try:
        os.link(temp, target)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return False
        os.close(fd)
        os.replace(temp, target)
    fsync_path(os.path.dirname(target) or ".", folder=True)
    return True


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def parent(path: str) -> str:
    return path[: len(path) - len(_basename(path))].rstrip("/\\")


def _spec_location(root: str) -> str:
    return join_url(root, SPEC_FILE) if is_url(root) else os.path.join(root, SPEC_FILE)


def read_spec_file(path: str) -> RolloutSpec:
    """Read and check a spec JSON file: a dataset's `spec.json`, or `trajkit validate --spec`.

    The file must be a regular file (a FIFO would block the reader forever, a folder is not a
    spec), at most 1 MiB, strict JSON (no `NaN`, no duplicate keys) and a valid
    [`RolloutSpec`][trajkit.RolloutSpec]. `path` may be an fsspec URL (`trajkit[cloud]`).

    Args:
        path: The file.

    Returns:
        The spec.

    Raises:
        FileNotFoundError: If there is no such file.
        OSError: If it cannot be read.
        RolloutFileError: If it is not a regular file, or not a valid spec (the message
            names the file and the problem).

    Examples:
        >>> import os, tempfile
        >>> from trajkit import RolloutSpec
        >>> from trajkit.testing import example_rollout
        >>> spec = RolloutSpec.from_rollout(example_rollout())
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = os.path.join(tmp, "spec.json")
        ...     with open(path, "w") as file:
        ...         _ = file.write(spec.model_dump_json())
        ...     same = read_spec_file(path) == spec
        ...     try:
        ...         read_spec_file(tmp)
        ...     except RolloutFileError as exc:
        ...         refused = exc.reason
        >>> same, refused
        (True, 'not a regular file (a folder)')
    """
    if is_url(path):
        fs, inner = filesystem(path)
        with fs.open(inner, "rb") as file:
            data = file.read(MAX_SPEC_BYTES + 1)
    else:
        _check_spec_kind(os.stat(path).st_mode, path)  # before opening: a FIFO would block
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as file:
            _check_spec_kind(os.fstat(fd).st_mode, path)  # swapped since the stat
            data = file.read(MAX_SPEC_BYTES + 1)
    if len(data) > MAX_SPEC_BYTES:
        raise RolloutFileError(f"larger than {MAX_SPEC_BYTES} bytes: not a spec", path=path)
    try:
        strict_json_loads(data)
        return RolloutSpec.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors()
        )
        raise RolloutFileError(f"invalid spec: {problems}", path=path) from None
    except (ValueError, RecursionError) as exc:
        raise RolloutFileError(f"invalid spec: not strict JSON: {exc}", path=path) from None


def _check_spec_kind(mode: int, path: str) -> None:
    if stat.S_ISREG(mode):
        return
    kind = (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a file"
    )
    raise RolloutFileError(f"not a regular file ({kind})", path=path)


def read_spec(root: str) -> RolloutSpec:
    """Read and check `root`'s `spec.json`."""
    where = _spec_location(root)
    try:
        return read_spec_file(where)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{where}: no such file: a dataset pins its spec in {SPEC_FILE}; make one with "
            "Dataset.create(path, spec), or Dataset.adopt(path) for a folder of recordings"
        ) from None


def write_spec(root: str, spec: RolloutSpec) -> RolloutSpec:
    """Pin `spec` in `root`'s `spec.json`; return the spec pinned (another writer's, if first)."""
    data = spec.model_dump_json(indent=2).encode() + b"\n"
    where = _spec_location(root)
    if is_url(root):
        fs, inner = filesystem(root)
        fs.makedirs(inner, exist_ok=True)
        fs.pipe_file(filesystem(where)[1], data)
        return spec
    os.makedirs(root, exist_ok=True)

    def write(file: IO[bytes]) -> None:
        file.write(data)

    temp = os.path.join(root, f"{TEMP_PREFIX}{secrets.token_hex(8)}{TEMP_SUFFIX}")
    try:
        atomic_write(temp, write, verb="write", by="Dataset.create")
        if claim_name(temp, where):
            return spec
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return read_spec(root)  # another process pinned one first
