"""`trajkit report`: one HTML page of what rollout files hold (`trajkit.report`)."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures.process import BrokenProcessPool
from typing import IO, TYPE_CHECKING

from trajkit._cli.common import UsageError, one_line, printable, write_output
from trajkit._cli.lint import lint_options

if TYPE_CHECKING:
    pass


def report_command(args: argparse.Namespace) -> int:
    # The report, lint and matplotlib are imported for this command only.
    from trajkit._cli.validate import _progress
    from trajkit._io.discovery import count_files
    from trajkit.report import build, check_target
    from trajkit.report._sources import MINARI_PREFIX, named_files, sources

    options = lint_options(args)
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
