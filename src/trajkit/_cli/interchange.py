"""`trajkit export` (rollout files to Parquet) and `trajkit import` (Parquet to files)."""

from __future__ import annotations

import argparse
import os
import sys

from trajkit._cli.common import (
    UsageError,
    check_folder,
    check_outputs,
    fail,
    load_all,
    make_folder,
    one_line,
    printable,
)
from trajkit._io.discovery import SUFFIX
from trajkit._io.files import save


def export_command(args: argparse.Namespace) -> int:
    import trajkit.arrow as arrow  # pyarrow is imported only when a table is made

    if os.path.isdir(args.out):
        raise UsageError(f"--out {args.out} is a folder: name the Parquet file to write")
    check_outputs([args.out], args.paths)
    rollouts = load_all(args.paths, args.max_bytes)
    if rollouts is None:
        return 1
    compression = None if args.compression == "none" else args.compression
    try:
        arrow.write_parquet(rollouts, args.out, compression=compression, layout=args.layout)
    except (ValueError, OSError) as exc:
        fail(f"trajkit export: error: {one_line(str(exc))}")
    steps = sum(r.num_steps * r.batch_size for r in rollouts)  # one row per transition
    print(printable(f"{args.out}: {len(rollouts)} rollout(s), {steps} rows"))
    return 0


def import_command(args: argparse.Namespace) -> int:
    import trajkit.arrow as arrow

    check_folder(args.out)
    try:
        rollouts = arrow.read_parquet(args.path)
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
