"""`trajkit lint` in the report's one pass: its checks on each file as the report reads it.

Loading a small file costs about as much as linting it, so the report does not run `trajkit
lint` as a second pass over the files: where it has loaded a file, it runs lint's per-file
work on that rollout (`trajkit.lint.run.lint_rollout`, what `lint_file` runs after loading),
and folds the results in file order with lint's own `LintFold` (episodes joined across
files, the checks across files). A test pins that the findings are those of
`trajkit.lint.lint` on the same files. Replay (TK3xx) is not run.

A file lint cannot read gets TK001 with the problem the report's verdict gives (the reason
`trajkit validate` gives, CRC-32 mismatches included).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from trajkit.lint import run
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import Finding
from trajkit.lint.report import Tally
from trajkit.lint.run import FileResult

__all__ = ["MAX_FINDINGS", "Findings", "LintFold"]

MAX_FINDINGS = 200
"""The most findings kept per code (all are counted)."""


@dataclass
class Findings:
    """Lint's findings, grouped by code (at most `MAX_FINDINGS` kept per code).

    Attributes:
        by_code: Per code, its first findings.
        counts: Per code, how many findings.
        tally: The findings counted by severity.
        files: How many files were linted.
        options: The lint options of the run.
        failures: The first files lint's checks stopped on (a bug in a check), with the
            error; their other checks are left out, the other files are linted. A check
            across files that stopped is listed too (`the checks across files: ...`).
        failed: How many times lint's checks stopped (on a file, or across files).

    Examples:
        >>> f = Findings()
        >>> f.add(Finding("TK203", "saved twice", "b.npz"))
        >>> f.counts["TK203"], f.tally.exit_code
        (1, 1)
    """

    by_code: dict[str, list[Finding]] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    tally: Tally = field(default_factory=Tally)
    files: int = 0
    options: LintOptions | None = None
    failures: list[str] = field(default_factory=list)
    failed: int = 0

    def add(self, finding: Finding) -> None:
        """Count and keep one finding."""
        self.tally.add(finding)
        self.counts[finding.code] += 1
        kept = self.by_code.setdefault(finding.code, [])
        if len(kept) < MAX_FINDINGS:
            kept.append(finding)


class LintFold:
    """Lint's per-file results folded in file order (lint's `LintFold`), into `Findings`.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> from trajkit.lint.run import lint_refused
        >>> fold = LintFold(LintOptions(frozenset({"TK001"})))
        >>> fold.add(lint_refused("a.npz", "damaged", fold.findings.options))
        >>> fold.finish().counts
        Counter({'TK001': 1})
    """

    def __init__(self, options: LintOptions) -> None:
        self.findings = Findings(options=options)
        self._fold = run.LintFold(options)

    def add(self, result: FileResult | None, failure: str | None = None) -> None:
        """Fold in the next file (`None` when lint's checks failed on it, with `failure`)."""
        self.findings.files += 1
        if result is None:
            self._failed(failure)
        for finding in self._fold.add(result):
            self.findings.add(finding)
        self._failed_in_fold()

    def finish(self) -> Findings:
        """The findings, once the last file is in."""
        for finding in self._fold.finish():
            self.findings.add(finding)
        self._failed_in_fold()
        return self.findings

    def _failed(self, failure: str | None) -> None:
        self.findings.failed += 1
        if failure is not None and len(self.findings.failures) < MAX_FINDINGS:
            self.findings.failures.append(failure)

    def _failed_in_fold(self) -> None:
        """The errors lint's checks across files raised (lint's fold lists them)."""
        while self._fold.failures:
            self._failed(self._fold.failures.pop(0))
