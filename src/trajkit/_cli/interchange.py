"""`trajkit export` (rollout files to Parquet) and `trajkit import` (Parquet to files)."""

from __future__ import annotations

import argparse
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
from trajkit._io.files import load, save
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
    import trajkit.arrow as arrow

    check_folder(args.out)
    try:
        _check_input(args.path)  # before pyarrow opens it: opening a FIFO would block
        rollouts = arrow.read_parquet(args.path)
    except RolloutFileError as exc:
        print(printable(f"{args.path}: invalid: {one_line(exc.reason)}"), file=sys.stderr)
        return 1
    except (ValueError, OSError) as exc:
        print(printable(f"{args.path}: invalid: {one_line(str(exc))}"), file=sys.stderr)
        return 1
    targets = [os.path.join(args.out, f"rollout-{i:05d}{SUFFIX}") for i in range(len(rollouts))]
    check_outputs(targets, [args.path])
    make_folder(args.out)
    for rollout, target in zip(rollouts, targets, strict=True):
        try:
            save(rollout, target)
        except (ValueError, OSError) as exc:
            fail(f"trajkit import: error: {one_line(str(exc))}")
        print(printable(target))
    return 0
