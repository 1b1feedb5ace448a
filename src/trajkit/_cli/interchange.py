"""`trajkit export` (rollout files to Parquet) and `trajkit import` (Parquet to files)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator

from trajkit._base.errors import RolloutFileError
from trajkit._cli.common import (
    UsageError,
    check_folder,
    check_outputs,
    fail,
    make_folder,
    one_line,
    printable,
    refused,
)
from trajkit._io.discovery import SUFFIX, discover
from trajkit._io.filecheck import FileCheck
from trajkit._io.files import load
from trajkit._io.reader import _check_regular as check_regular
from trajkit._models.rollout import Rollout


def export_command(args: argparse.Namespace) -> int:
    import trajkit.arrow as arrow  # pyarrow is imported only when a table is made

    if os.path.isdir(args.out):
        raise UsageError(f"--out {args.out} is a folder: name the Parquet file to write")
    paths = []
    for item in discover(args.paths):  # folders: their files, in folder-walk order
        if isinstance(item, FileCheck):
            print(printable(f"{item.path}: invalid: {one_line(item.problems[0])}"), file=sys.stderr)
            return 1
        paths.append(item.path)
    check_outputs([args.out], paths)
    rows = [0, 0]  # rollouts and rows written

    def rollouts() -> Iterator[Rollout]:  # one file at a time, memory-mapped, as it is written
        for path in paths:
            try:
                rollout = load(path, mmap=True, max_bytes=args.max_bytes)
            except RolloutFileError as exc:
                raise _RefusedFileError(refused(path, exc)) from None
            rows[0] += 1
            rows[1] += rollout.num_steps * rollout.batch_size  # one row per transition
            yield rollout

    compression = None if args.compression == "none" else args.compression
    try:
        arrow.write_parquet(rollouts(), args.out, compression=compression, layout=args.layout)
    except _RefusedFileError as exc:
        print(exc, file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        fail(f"trajkit export: error: {one_line(str(exc))}")
    print(printable(f"{args.out}: {rows[0]} rollout(s), {rows[1]} rows"))
    return 0


def _check_input(path: str) -> None:
    """Refuse a folder, FIFO or device as `validate` does; a missing path is pyarrow's to name."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    check_regular(mode, path)


class _RefusedFileError(Exception):
    """A rollout file that `load` refused while exporting: its one-line verdict."""


def import_command(args: argparse.Namespace) -> int:
    """Each rollout of a Parquet file to its own file, all of them or none.

    The rollouts are read one at a time (`iter_parquet`), each written to a temporary file
    next to its output; once the last is read, they are renamed over the outputs together
    (`StagedWrites`). A file refused midway writes nothing, and memory holds one rollout.
    """
    import trajkit.arrow as arrow
    from trajkit._io.atomic import StagedWrites
    from trajkit._io.writer import file_writer

    check_folder(args.out)
    try:
        _check_input(args.path)  # before pyarrow opens it: opening a FIFO would block
    except (ValueError, OSError) as exc:
        return _invalid(args.path, exc)
    made = not os.path.lexists(args.out)
    targets: list[str] = []
    try:
        with (
            contextlib.closing(arrow.iter_parquet(args.path)) as rollouts,
            StagedWrites() as staged,
        ):
            while (rollout := _next(rollouts)) is not None:
                target = os.path.join(args.out, f"rollout-{len(targets):05d}{SUFFIX}")
                check_outputs([target], [args.path])
                if not targets:
                    make_folder(args.out)
                try:
                    staged.add(target, file_writer(rollout))
                except (ValueError, OSError) as exc:
                    fail(f"trajkit import: error: {one_line(str(exc))}")
                targets.append(target)
            staged.commit()
    except BaseException as exc:
        if made:  # the folder this command made, left empty
            with contextlib.suppress(OSError):
                os.rmdir(args.out)
        if isinstance(exc, _InvalidInputError):
            return _invalid(args.path, exc.error)
        raise
    for target in targets:
        print(printable(target))
    return 0


class _InvalidInputError(Exception):
    """The Parquet file was refused while its rollouts were read (`error`)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _next(rollouts: Iterator[Rollout]) -> Rollout | None:
    """The next rollout of the file, `None` after the last; a refusal as `_InvalidInputError`."""
    try:
        return next(rollouts, None)
    except (ValueError, OSError) as exc:  # RolloutFileError included
        raise _InvalidInputError(exc) from None


def _invalid(path: str, exc: Exception) -> int:
    reason = exc.reason if isinstance(exc, RolloutFileError) else str(exc)
    print(printable(f"{path}: invalid: {one_line(reason)}"), file=sys.stderr)
    return 1
