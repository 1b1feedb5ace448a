"""Save rollouts in the trajkit rollout file format, atomically.

A rollout file is a ZIP archive: `metadata.json` first, one `.npy` member per array (model
outputs stacked per key), and `infos.json`. The specification is `docs/file-format.md`.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Mapping
from typing import IO, Any, NoReturn

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.atomic import PathLike, atomic_write, output_target
from trajkit._io.infos import infos_to_json, sparse_infos_to_json
from trajkit._io.jsonbudget import JSON_BUDGET_SHARE, MIN_JSON_BUDGET, JsonCost, json_budget
from trajkit._io.metadata import (
    INFOS_MEMBER,
    MAX_METADATA_BYTES,
    METADATA_MEMBER,
    ArrayMember,
    Recording,
    RolloutFileMetadata,
)
from trajkit._io.npy import npy_header
from trajkit._io.reader import DEFAULT_MAX_BYTES
from trajkit._io.zipfmt import align_extra, zip_info
from trajkit._models.rollout import Rollout, given_infos
from trajkit._models.rules import FIELD_RULES, stray_bool_byte
from trajkit._models.spec import SUPPORTED_DTYPES, dtype_name

__all__ = ["file_writer", "save"]

_WRITE_CHUNK = 1 << 20  # bytes per write (CRC then write, from the cache); measured best


def save(
    rollout: Rollout,
    path: PathLike,
    *,
    compress: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    recording: Recording | Mapping[str, Any] | None = None,
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
        max_bytes: The same limit as `load`'s, on the contents uncompressed and on the memory
            that decoding the infos takes (its JSON budget): a file over either is not
            written, since `load` would refuse it with the same `max_bytes`. `None` for no
            limit (then load it with `max_bytes=None` too).
        recording: Where the rollout was recorded, for `trajkit lint --replay`: a
            [`Recording`][trajkit.lint.Recording] or its dict, such as
            [`RolloutRecorder.recording`][trajkit.gym.RolloutRecorder.recording]. Stored in the
            metadata (format version 4), read back as `read_metadata(path).recording`.

    Raises:
        TypeError: If `rollout` is not a `Rollout`.
        ValueError: Before anything is written, if an info value cannot be stored as JSON
            exactly (the message names it as `infos[t][b]['key']`), or an array has a dtype
            the format does not support (such as float128), or a model-output key is not valid
            Unicode, or `path` holds a NUL byte, or the file would be over `max_bytes`, or
            `recording` is not a valid recording (a `pydantic.ValidationError`), or the
            infos would take more memory to decode than `load`'s JSON budget for `max_bytes`.
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
    target = output_target(path)
    atomic_write(
        target, file_writer(rollout, compress=compress, max_bytes=max_bytes, recording=recording)
    )


def file_writer(
    rollout: Rollout,
    *,
    compress: bool = False,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    recording: Recording | Mapping[str, Any] | None = None,
) -> Callable[[IO[bytes]], None]:
    """What `save` writes, checked: a function writing the file into an open binary file.

    Everything `save` refuses before writing is refused here (the arguments are `save`'s);
    the function then writes the whole file, for `atomic_write` or `StagedWrites`.
    """
    if not isinstance(rollout, Rollout):
        raise TypeError(f"save() needs a trajkit.Rollout, got {type(rollout).__name__}")
    recorded = (
        recording
        if recording is None or isinstance(recording, Recording)
        else Recording.model_validate(recording)
    )
    if recorded is not None and recorded.num_envs != rollout.batch_size:
        raise ValueError(
            f"recording.num_envs is {recorded.num_envs}, but the rollout has B = "
            f"{rollout.batch_size} envs"
        )
    rollout.revalidate()  # in-place edits since construction are checked before writing
    given = given_infos(rollout)  # None: no infos given (and none made since)
    # Mostly empty infos are listed sparsely (format version 3), so that their cost follows
    # what they hold; mostly full ones keep the dense form (versions 1 and 2).
    full = 0 if given is None else sum(1 for row in given for item in row if item)
    # (Format versions 4 and 5, which a recording and final observations need, always list
    # infos sparsely.)
    newer = recorded is not None or rollout.final_obses is not None
    sparse = newer or 2 * full <= rollout.num_steps * rollout.batch_size
    metadata, arrays = _prepare(rollout, sparse_infos=sparse, recording=recorded)
    infos = sparse_infos_to_json(given) if sparse or given is None else infos_to_json(given)
    # absent, as versions 1-3 (and 4 for num_final_obses) say
    unset = {"recording"} if metadata.recording is None else set()
    if metadata.num_final_obses is None:
        unset.add("num_final_obses")
    meta_bytes = metadata.model_dump_json(indent=2, exclude=unset).encode("utf-8") + b"\n"
    if len(meta_bytes) > MAX_METADATA_BYTES:
        raise ValueError(
            f"the metadata would take {len(meta_bytes)} bytes, over the format's limit of "
            f"{MAX_METADATA_BYTES} (too many or too long model-output keys)"
        )
    _check_limits(meta_bytes, infos, arrays, max_bytes)

    def write(file: IO[bytes]) -> None:
        with zipfile.ZipFile(file, "w", allowZip64=True) as archive:
            _write_bytes(archive, METADATA_MEMBER, meta_bytes, compress=False)
            for member, array in arrays:
                _write_npy(archive, file, member.name, array, compress=compress)
            _write_bytes(archive, INFOS_MEMBER, infos, compress=compress)

    return write


def _check_limits(
    meta_bytes: bytes,
    infos: bytes,
    arrays: list[tuple[ArrayMember, AnyArray]],
    max_bytes: int | None,
) -> None:
    """Refuse, before writing, what `load` would refuse with the same `max_bytes`."""
    if max_bytes is None:
        return
    total = len(meta_bytes) + len(infos)
    total += sum(len(npy_header(array)) + array.nbytes for _, array in arrays)
    if total > max_bytes:
        raise ValueError(
            f"the file would hold {total} bytes uncompressed, over max_bytes={max_bytes}, so "
            "load() would refuse it with the same limit; pass a larger max_bytes (or None) "
            "here and to load()"
        )
    budget = json_budget(max_bytes)
    for member, data in ((METADATA_MEMBER, meta_bytes), (INFOS_MEMBER, infos)):
        cost = JsonCost.of(data)
        if budget is not None and cost.over(budget):
            _over_budget(member, cost.bound, budget, max_bytes)


def _over_budget(member: str, bound: int, budget: int, max_bytes: int) -> NoReturn:
    raise ValueError(
        f"{member} would take {bound} bytes of memory to decode (as "
        f"load() counts it), over the JSON budget of {budget} bytes for "
        f"max_bytes={max_bytes} (max_bytes / {JSON_BUDGET_SHARE}, at least "
        f"{MIN_JSON_BUDGET >> 20} MiB), so load() would refuse the file; pass a larger "
        "max_bytes (or None) here and to load(), or keep per-step values in model_outs"
    )


def _prepare(
    rollout: Rollout, *, sparse_infos: bool, recording: Recording | None = None
) -> tuple[RolloutFileMetadata, list[tuple[ArrayMember, AnyArray]]]:
    """Check every array can be stored; return the metadata and the (member, array) pairs."""
    sources = _plain_fields(rollout)
    outs = rollout.model_outs.arrays  # built once: each access walks every key
    trees = _tree_fields(rollout)
    _check_storable(_named_arrays(trees, sources, outs))
    _check_keys(outs)
    metadata = RolloutFileMetadata.from_rollout(
        rollout, sparse_infos=sparse_infos, recording=recording
    )
    return metadata, _pair_members(metadata, trees, sources, outs)


def _plain_fields(rollout: Rollout) -> dict[str, AnyArray | None]:
    """The fields stored as one array each (the rule table's flat ones), `None` where unset."""
    return {name: getattr(rollout, name) for name, rule in FIELD_RULES.items() if not rule.nested}


def _tree_fields(rollout: Rollout) -> dict[str, Any]:
    """The fields stored as one array per leaf (the nested ones), where set."""
    trees = {name: getattr(rollout, name) for name, rule in FIELD_RULES.items() if rule.nested}
    return {name: tree for name, tree in trees.items() if tree is not None}


def _named_arrays(
    trees: Mapping[str, Any],
    sources: Mapping[str, AnyArray | None],
    outs: Mapping[str, AnyArray],
) -> list[tuple[str, AnyArray]]:
    """Every array the file would hold, named as a message names it."""
    named = [
        (_tree.format_path(name, path), leaf)
        for name, tree in trees.items()
        for path, leaf in _tree.flatten(tree)
    ]
    named += [(n, a) for n, a in sources.items() if a is not None]
    named += [(f"model_outs[{k!r}]", a) for k, a in outs.items()]
    return named


def _check_storable(named: list[tuple[str, AnyArray]]) -> None:
    """Refuse a dtype the format cannot store, or a bool array holding other bytes."""
    for name, array in named:
        if dtype_name(array.dtype) not in SUPPORTED_DTYPES:
            raise ValueError(
                f"{name} has dtype {array.dtype}, which the file format cannot store; "
                f"supported: {', '.join(SUPPORTED_DTYPES)}"
            )
        if array.dtype == np.bool_ and stray_bool_byte(array) is not None:
            raise ValueError(
                f"{name} is a bool array holding bytes other than 0 and 1 (made with "
                ".view(bool)?), which the file format refuses; use .astype(bool)"
            )


def _check_keys(outs: Mapping[str, AnyArray]) -> None:
    """Refuse a model-output key that UTF-8 cannot encode (a lone surrogate)."""
    for key in outs:
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"model_outs key {key!r} is not valid Unicode") from None


def _pair_members(
    metadata: RolloutFileMetadata,
    trees: Mapping[str, Any],
    sources: Mapping[str, AnyArray | None],
    outs: Mapping[str, AnyArray],
) -> list[tuple[ArrayMember, AnyArray]]:
    """Each member the metadata lists, with the array it holds."""
    pending = {name: (leaf for _, leaf in _tree.flatten(tree)) for name, tree in trees.items()}
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
    return pairs


def _write_bytes(archive: zipfile.ZipFile, name: str, data: bytes, *, compress: bool) -> None:
    archive.writestr(zip_info(name, compress), data)


def _write_npy(
    archive: zipfile.ZipFile, file: IO[bytes], name: str, array: AnyArray, *, compress: bool
) -> None:
    """Write one `.npy` member: a version 1.0 header, then the data, little-endian, C order."""
    little = array.dtype.newbyteorder("<")
    if array.dtype != little:  # big-endian (native byte order and `|` are left alone)
        array = array.astype(little)
    header = npy_header(array)
    info = zip_info(name, compress)
    info.file_size = len(header) + array.nbytes
    if not compress:  # pad the local header so that the array data starts aligned
        info.extra = align_extra(file.tell(), name, len(header))
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
