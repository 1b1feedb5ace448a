"""How `trajkit lint` runs and reports: its options, the summary line and the exit code.

The options come from the command line and `pyproject.toml`; `check_table` is `--list`.

Exit codes, as ruff's: 0 when no error or warning is found (notes, such as "cannot replay",
do not fail), 1 when one is, 2 on a usage error (an unknown code, a bad setting, an
unreadable `pyproject.toml`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from trajkit.lint.config import (
    DEFAULT_REWARD_SCALE_RATIO,
    LintConfig,
    LintOptions,
    find_config,
    read_config,
)
from trajkit.lint.registry import CHECKS, Finding, check_selectors, selected_codes

__all__ = ["Tally", "check_table", "options_from", "split_codes"]


def split_codes(text: str) -> list[str]:
    """`--select TK1,TK203` as a list of selectors.

    Examples:
        >>> split_codes("TK1, tk203,")
        ['TK1', 'tk203']
    """
    return [part.strip() for part in text.split(",") if part.strip()]


def options_from(
    *,
    select: Sequence[str] | None,
    ignore: Sequence[str] | None,
    max_episode_steps: int | None,
    use_config: bool = True,
    start: str | None = None,
) -> tuple[LintOptions, LintConfig | None]:
    """The options of a `trajkit lint` run: the command line's, else `[tool.trajkit.lint]`'s.

    `--select` replaces the file's `select`; `--ignore` adds to the file's `ignore`;
    `--max-episode-steps` replaces the file's `max-episode-steps`.

    Raises:
        ValueError: For an unknown code, a bad setting or an unreadable `pyproject.toml`.

    Examples:
        >>> options, _ = options_from(select=["TK10"], ignore=["TK107"], max_episode_steps=None,
        ...                           use_config=False)
        >>> sorted(options.codes)
        ['TK101', 'TK102', 'TK103', 'TK104', 'TK105', 'TK106', 'TK108', 'TK109']
    """
    config: LintConfig | None = None
    if use_config:
        path = find_config(start)
        if path is not None:
            try:
                config = read_config(path)
            except OSError as exc:
                raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    chosen = (
        check_selectors(select, "--select")
        if select is not None
        else (config.select if config else None)
    )
    dropped = [*(config.ignore or () if config else ()), *check_selectors(ignore or (), "--ignore")]
    limit = (
        max_episode_steps
        if max_episode_steps is not None
        else (config.max_episode_steps if config else None)
    )
    ratio = config.reward_scale_ratio if config and config.reward_scale_ratio else None
    options = LintOptions(
        selected_codes(chosen, dropped),
        limit,
        config.action_space if config else None,
        ratio or DEFAULT_REWARD_SCALE_RATIO,
    )
    return options, config


class Tally:
    """Findings counted by severity, for the summary line and the exit code.

    Examples:
        >>> tally = Tally()
        >>> tally.add(Finding("TK300", "no seed", "a.npz"))
        >>> tally.exit_code, tally.summary(files=2)
        (0, 'Found 1 finding (1 note) in 2 files.')
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def add(self, finding: Finding) -> None:
        """Count one finding.

        Examples:
            >>> tally = Tally(); tally.add(Finding("TK105", "over the limit", "a.npz"))
            >>> tally.exit_code
            1
        """
        self.counts[finding.severity] += 1

    @property
    def exit_code(self) -> int:
        """1 when an error or a warning was found, else 0.

        Examples:
            >>> Tally().exit_code
            0
        """
        return 1 if self.counts["error"] or self.counts["warning"] else 0

    def summary(self, files: int) -> str:
        """`Found 3 findings (2 errors, 1 warning) in 4 files.`, or `All checks passed ...`.

        Examples:
            >>> Tally().summary(files=1)
            'All checks passed (1 file).'
        """
        total = sum(self.counts.values())
        where = f"{files} file{'s' * (files != 1)}"
        if not total:
            return f"All checks passed ({where})."
        parts = [
            f"{n} {severity}{'s' * (n != 1)}"
            for severity in ("error", "warning", "note")
            if (n := self.counts[severity])
        ]
        return f"Found {total} finding{'s' * (total != 1)} ({', '.join(parts)}) in {where}."


def check_table(codes: Iterable[str] | None = None) -> list[str]:
    """One line per check, `CODE  severity  name: summary`, as `trajkit lint --list` prints.

    Examples:
        >>> check_table(["TK203"])
        ['TK203  warning  duplicate-rollout: the same rollout is saved in two files']
    """
    shown = CHECKS if codes is None else sorted(codes)
    return [
        f"{c.code}  {c.severity:<7}  {c.name}: {c.summary}"
        for c in (CHECKS[code] for code in shown)
    ]
