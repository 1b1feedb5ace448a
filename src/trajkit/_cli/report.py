"""`trajkit report`: one HTML page of what rollout files hold (`trajkit.report`)."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures.process import BrokenProcessPool
from typing import IO, TYPE_CHECKING

from trajkit._cli.common import UsageError, one_line, printable, write_output

if TYPE_CHECKING:
    from trajkit.lint.config import LintOptions


def report_command(args: argparse.Namespace) -> int:
    # The report, lint and matplotlib are imported for this command only.
    from trajkit._cli.validate import _progress
    from trajkit._io.discovery import count_files
    from trajkit.report import build, check_target
    from trajkit.report._sources import MINARI_PREFIX, named_files, sources

    options = _lint_options(args)
    chosen = sources(args.paths)
    try:
        check_target(args.out, named_files(chosen))
    except ValueError as exc:
        raise UsageError(one_line(str(exc))) from None
    except OSError as exc:  # a folder, a FIFO, ...
        raise UsageError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    show = args.progress
    if show is None and not sys.stderr.isatty():
        show = False
    converted = any(p.endswith(".parquet") or p.startswith(MINARI_PREFIX) for p in args.paths)
    total = None if show is False or converted else count_files(args.paths)
    progress = _progress(show, total)
    try:
        built = build(
            chosen,
            options=options,
            folder=os.path.dirname(os.path.abspath(args.out)),
            title=args.title,
            jobs=args.jobs,
            max_bytes=args.max_bytes,
            seed=args.seed,
            progress=progress.advance,
        )
    except BrokenProcessPool:
        progress.close()
        print(
            "trajkit report: error: a worker process stopped unexpectedly (out of memory?); "
            "run again with --jobs 1 to read the files in this process",
            file=sys.stderr,
        )
        return 1
    finally:
        progress.close()
    data = built.html.encode("utf-8")

    def write(file: IO[bytes]) -> None:
        file.write(data)

    write_output(args.out, write, named_files(chosen))
    print(printable(args.out))
    collection, findings = built.collection, built.findings
    files = f"{collection.files} file{'s' * (collection.files != 1)}"
    print(
        f"{files}: {collection.files - collection.invalid} valid, "
        f"{collection.invalid} invalid. Lint: {findings.tally.summary(findings.files)}",
        file=sys.stderr,
    )
    for failure in findings.failures:
        message = f"trajkit report: a lint check failed (please report it): {failure}"
        print(printable(message), file=sys.stderr)
    return built.exit_code


def _lint_options(args: argparse.Namespace) -> LintOptions:
    """The lint options, from the command line and `[tool.trajkit.lint]`, as `lint` reads them."""
    from trajkit.lint.report import options_from, split_codes

    for option, value in (("--select", args.select), ("--ignore", args.ignore)):
        if value is not None and not split_codes(value):
            raise UsageError(f"{option} needs at least one code or prefix, got {value!r}")
    if args.max_episode_steps is not None and args.max_episode_steps < 1:
        raise UsageError(f"--max-episode-steps must be >= 1, got {args.max_episode_steps}")
    try:
        options, _ = options_from(
            select=None if args.select is None else split_codes(args.select),
            ignore=None if args.ignore is None else split_codes(args.ignore),
            max_episode_steps=args.max_episode_steps,
            use_config=not args.no_config,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return options
