"""`trajkit lint`: the checks of `trajkit.lint`, findings as text or JSON Lines."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from trajkit._cli.common import (
    UsageError,
    printable,
)

if TYPE_CHECKING:
    from trajkit.lint.config import LintOptions
    from trajkit.lint.report import Tally
    from trajkit.lint.run import LintRun

FAILED = 3
"""The exit code when a check raised (a bug in lint): the findings printed are incomplete."""


def lint_command(args: argparse.Namespace) -> int:
    from trajkit.lint import report, run  # the lint package is imported for this command

    if args.list:
        print("\n".join(report.check_table()))
        return 0
    if not args.paths:
        raise UsageError("name the files or folders to lint (or --list)")
    options = lint_options(args)
    if args.replay_trust_env_args:
        if not args.replay:
            raise UsageError("--replay-trust-env-args needs --replay")
        options = dataclasses.replace(options, trust_env_args=True)
    linted = run.LintRun(
        args.paths, options, replay=args.replay, jobs=args.jobs, max_bytes=args.max_bytes
    )
    tally = report.Tally()
    try:
        for finding in linted:
            tally.add(finding)
            print(json.dumps(finding.to_json()) if args.json else printable(finding.format()))
            sys.stdout.flush()
    except BrokenProcessPool:
        print(
            "trajkit lint: error: a worker process stopped unexpectedly (out of memory?); "
            "run again with --jobs 1 to lint the files in this process",
            file=sys.stderr,
        )
        return 1
    finally:
        linted.close()
    return _summary(linted, tally, replay=args.replay)


def lint_options(args: argparse.Namespace) -> LintOptions:
    """The lint options, from the command line and `[tool.trajkit.lint]` (lint's and report's)."""
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


def _summary(linted: LintRun, tally: Tally, *, replay: bool) -> int:
    """The summary on stderr, with the checks that failed (bugs in lint); the exit code."""
    print(tally.summary(linted.files), file=sys.stderr)
    if replay:
        print(f"Replayed {len(linted.replayed)} of {linted.files} files.", file=sys.stderr)
    for failure in linted.failures:
        message = f"trajkit lint: a check failed (please report it): {failure}"
        print(printable(message), file=sys.stderr)
    return FAILED if linted.failures else tally.exit_code
