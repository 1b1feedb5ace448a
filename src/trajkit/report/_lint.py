"""`trajkit lint` in the report's one pass: its checks on each file as the report reads it.

Loading a small file costs about as much as linting it, so the report does not run `trajkit
lint` as a second pass over the files: where it has loaded a file, it runs lint's per-file
work on that rollout (`lint_loaded`: the TK1xx checks, the file's summary for the dataset
statistics and its episodes' edges, exactly what `trajkit.lint.engine.lint_file` does after
loading), and folds the results in file order as `LintRun` does (`LintFold`: episodes joined
across files, the TK2xx statistics). The checks themselves are lint's; a test pins that the
findings are those of `trajkit.lint.lint` on the same files. Replay (TK3xx) is not run.

A file lint cannot read gets TK001 with the problem the report's verdict gives (the reason
`trajkit validate` gives, CRC-32 mismatches included).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from trajkit._io.metadata import RolloutFileMetadata
from trajkit._models.rollout import Rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.data import check_rollout, episode_edges
from trajkit.lint.engine import FileResult
from trajkit.lint.join import EpisodeJoiner
from trajkit.lint.registry import Finding
from trajkit.lint.report import Tally
from trajkit.lint.stats import DatasetStatistics, summarize

__all__ = ["MAX_FINDINGS", "Findings", "LintFold", "lint_loaded", "lint_refused"]

MAX_FINDINGS = 200
"""The most findings kept per code (all are counted)."""


def lint_loaded(
    rollout: Rollout, metadata: RolloutFileMetadata | None, path: str, options: LintOptions
) -> FileResult:
    """Lint's per-file work on a rollout already loaded from `path`, as `lint_file` does it.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, keys=("actions",))
        >>> r.model_outs.arrays["actions"][2, 0] = 7
        >>> options = LintOptions(frozenset({"TK106"}), action_space={"type": "Discrete", "n": 3})
        >>> [f.code for f in lint_loaded(r, None, "a.npz", options).findings]
        ['TK106']
    """
    recorded = None if metadata is None else metadata.recording
    recording = None if recorded is None else recorded.model_dump(mode="json")
    joined = bool(options.codes & {"TK101", "TK105"})
    findings = check_rollout(rollout, options, path=path, recording=recording, joined=joined)
    summary = summarize(rollout, path, recording) if options.runs("TK2") else None
    edges = episode_edges(rollout, path, recording, options.max_episode_steps) if joined else None
    return FileResult(path, tuple(findings), summary, recording, edges)


def lint_refused(path: str, problem: str, options: LintOptions) -> FileResult:
    """What lint says of a file it cannot read: TK001 with the problem.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> lint_refused("a.npz", "damaged", LintOptions(frozenset({"TK001"}))).findings
        (Finding(code='TK001', message='damaged', path='a.npz', env=None, step=None),)
    """
    found = (Finding("TK001", problem, path),) if "TK001" in options.codes else ()
    return FileResult(path, found, None, None)


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
            error; their other checks are left out, the other files are linted.
        failed: How many files lint's checks stopped on.

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
    """Lint's per-file results folded in file order, as `LintRun` folds them.

    Per file: its own findings and those of the episodes joined across files, then the
    dataset statistics' findings as they arise; at the end, the joined episodes' and the
    statistics' last findings.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> fold = LintFold(LintOptions(frozenset({"TK001"})))
        >>> fold.add(lint_refused("a.npz", "damaged", fold.findings.options))
        >>> fold.finish().counts
        Counter({'TK001': 1})
    """

    def __init__(self, options: LintOptions) -> None:
        self.findings = Findings(options=options)
        self._stats = DatasetStatistics(options)
        self._joiner = EpisodeJoiner(options)

    def add(self, result: FileResult | None, failure: str | None = None) -> None:
        """Fold in the next file (`None` when lint's checks failed on it, with `failure`)."""
        self.findings.files += 1
        if result is None:
            self._joiner.add(None)
            self.findings.failed += 1
            if failure is not None and len(self.findings.failures) < MAX_FINDINGS:
                self.findings.failures.append(failure)
            return
        own = [*result.findings, *self._joiner.add(result.edges)]
        for finding in sorted(own, key=lambda f: f.code):  # stable: code order, as checked
            self.findings.add(finding)
        if result.summary is not None:
            for finding in self._stats.add(result.summary):
                self.findings.add(finding)

    def finish(self) -> Findings:
        """The findings, once the last file is in."""
        for finding in [*self._joiner.finish(), *self._stats.finish()]:
            self.findings.add(finding)
        return self.findings
