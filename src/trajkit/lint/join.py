"""Episodes joined across files (TK101, TK105), merged on the driver in file order.

A recording saved as many files (one per `RolloutRecorder.record` call) cuts its episodes
at file boundaries: with T = 128 and a time limit of 500 no episode is complete inside one
file. The workers summarise each file's edges (`EpisodeEdges`: per env, the steps before
its first episode end and after its last); `EpisodeJoiner` folds them in, in file order,
keeping per env only the running length of the open episode.

A file continues the file before it when its row 0 repeats that file's row T (observations
and dones, hashed), B is the same, and:

- both have `recording` metadata with the same `id`, and its `index` is the previous one's
  plus 1 (the files of one recording are joined in index order; a file of another
  recording in between does not matter, a missing index breaks the chain);
- or neither has, and it comes right after it in the listing order.

Only the envs whose row 0 continues an episode (`dones[0, b] = 0`) join an episode; the
others start one at row 0, whose length is known from there. The time limit is that of the
file where the joined episode ends (or passes the limit).
Joined episodes are judged as the file's own: TK101 (with a time limit) counts those of
exactly L steps ending untruncated in the file where they end, TK105 reports those that pass
L steps in the file where they pass it, and each reports once per file with both counted.
Without a time limit, TK101's heuristic runs over the joined episodes of each chain of
files, once the chain ends.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from trajkit._base.types import AnyArray
from trajkit.lint.config import LintOptions
from trajkit.lint.data import (
    MIN_REPEATS,
    EpisodeEdges,
    over_limit_finding,
    truncation_finding,
)
from trajkit.lint.registry import Finding

__all__ = ["EpisodeJoiner"]

_Place = tuple[str, int, int]  # (path, env, step)


@dataclass
class _Chain:
    """The open episodes of a chain of files, and its joined episodes' lengths."""

    index: int
    tail: str
    running: AnyArray  # per env: steps of the open episode so far, -1 when unknown
    lengths: Counter[int] = field(default_factory=Counter)
    flagged: set[int] = field(default_factory=set)  # lengths of which one is truncated
    first: dict[int, _Place] = field(default_factory=dict)  # where one of that length ends
    limited: bool = False  # a file of the chain names a time limit


class EpisodeJoiner:
    """Joins episodes across consecutive files; fed one `EpisodeEdges` at a time, in order.

    Examples:
        >>> import numpy as np
        >>> from trajkit.lint.config import LintOptions
        >>> from trajkit.lint.data import episode_edges
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=1)
        >>> a = r.replace(dones=np.array([[1], [0], [0], [0], [0], [0], [0]]))
        >>> b = r.replace(obses=a.obses[::-1].copy(), dones=np.zeros((7, 1)))
        >>> joiner = EpisodeJoiner(LintOptions(frozenset({"TK105"})))
        >>> joiner.add(episode_edges(a, "a.npz", None, 8))
        []
        >>> [f.format() for f in joiner.add(episode_edges(b, "b.npz", None, 8))]
        ... # doctest: +NORMALIZE_WHITESPACE
        ['b.npz: env 0, step 2: TK105 [error] 1 episode(s) run past the time limit of 8
          steps with no episode end or truncation (this one began 6 steps before row 0 of
          this file)']
    """

    def __init__(self, options: LintOptions) -> None:
        self.options = options
        self._chains: dict[str, _Chain] = {}
        self._plain: _Chain | None = None  # the previous file, when it had no recording
        self._closed: list[Finding] = []

    def add(self, edges: EpisodeEdges | None) -> list[Finding]:
        """Fold in one file (`None` for one that could not be read); its TK101 and TK105.

        Examples:
            >>> from trajkit.lint.config import LintOptions
            >>> EpisodeJoiner(LintOptions(frozenset())).add(None)
            []
        """
        if edges is None:
            self._close(self._plain)
            self._plain = None
            return []
        key = edges.recording[0] if edges.recording is not None else None
        previous = self._plain if key is None else self._chains.get(key)
        if key is not None:  # the file between is not this file's predecessor
            self._close(self._plain)
            self._plain = None
        chain = previous if previous is not None and self._continues(previous, edges) else None
        if chain is None:
            self._close(previous)
            chain = _Chain(-1, "", np.full(len(edges.lead), -1, dtype=np.int64))
        found = self._judge(chain, edges)
        chain.index = edges.recording[1] if edges.recording is not None else -1
        chain.tail = edges.tail
        if key is None:
            self._plain = chain
        else:
            self._chains[key] = chain
        return found

    def finish(self) -> list[Finding]:
        """TK101's heuristic over each chain's joined episodes (without a time limit).

        Examples:
            >>> from trajkit.lint.config import LintOptions
            >>> EpisodeJoiner(LintOptions(frozenset({"TK101"}))).finish()
            []
        """
        self._close(self._plain)
        self._plain = None
        for chain in self._chains.values():
            self._close(chain)
        self._chains.clear()
        return self._closed

    @staticmethod
    def _continues(chain: _Chain, edges: EpisodeEdges) -> bool:
        if len(chain.running) != len(edges.lead) or chain.tail != edges.head:
            return False
        return edges.recording is None or edges.recording[1] == chain.index + 1

    def _judge(self, chain: _Chain, edges: EpisodeEdges) -> list[Finding]:
        """Extend the chain's open episodes by this file; the file's TK101 and TK105."""
        # A recording states the time limit, or that there is none: no heuristic then.
        chain.limited = chain.limited or bool(edges.limit) or edges.recording is not None
        cut, joined_cut, over = self._join(chain, edges)
        found = self._findings(edges, [*edges.cut, *cut], joined_cut, [*edges.over, *over])
        _advance(chain, edges)
        return found

    def _join(
        self, chain: _Chain, edges: EpisodeEdges
    ) -> tuple[list[tuple[int, int]], int, list[tuple[int, int, int]]]:
        """The episodes this file ends or passes the limit of that began in earlier files.

        Returns the joined episodes of exactly L steps that end untruncated here, as
        `(step, env)`; how many they are; and those that pass L steps here, as
        `(step, env, start)` with `start` < 0 the row, before row 0, where they began.
        """
        limit = edges.limit
        cut: list[tuple[int, int]] = []
        over: list[tuple[int, int, int]] = []
        for b, before in enumerate(chain.running.tolist()):
            if before < 0 or not edges.continues[b]:
                continue
            length = before + edges.lead[b]
            if edges.has_end[b]:
                self._count(chain, length, edges, b)
                if limit and length == limit and not edges.lead_truncated[b]:
                    cut.append((edges.lead[b] - 1, b))
            if limit and before <= limit < length:
                over.append((limit - before, b, -before))
        return cut, len(cut), over

    def _findings(
        self,
        edges: EpisodeEdges,
        cut: list[tuple[int, int]],
        joined_cut: int,
        over: list[tuple[int, int, int]],
    ) -> list[Finding]:
        """The file's TK101 (episodes cut at the limit) and TK105 (past it), once each."""
        limit = edges.limit
        if not limit:
            return []
        found = []
        needed = edges.cuts_needed  # 0: the file flags truncations; its ends at L terminate
        if needed and len(cut) >= needed and "TK101" in self.options.codes:
            found.append(truncation_finding(len(cut), joined_cut, limit, edges.path, min(cut)))
        if over and "TK105" in self.options.codes:
            step, env, start = min(over)
            begun = (
                f"starts at row {start}"
                if start >= 0
                else f"began {-start} steps before row 0 of this file"
            )
            found.append(over_limit_finding(len(over), limit, edges.path, (step, env), begun))
        return found

    @staticmethod
    def _count(chain: _Chain, length: int, edges: EpisodeEdges, env: int) -> None:
        chain.lengths[length] += 1
        if edges.lead_truncated[env]:
            chain.flagged.add(length)
        chain.first.setdefault(length, (edges.path, env, edges.lead[env] - 1))

    def _close(self, chain: _Chain | None) -> None:
        """TK101's heuristic on a chain that ends, when its files name no time limit."""
        if chain is None or not chain.lengths or "TK101" not in self.options.codes:
            return
        if chain.limited:
            return
        longest = max(chain.lengths)
        count = chain.lengths[longest]
        if count < MIN_REPEATS or longest in chain.flagged:
            return
        if count < max(chain.lengths.values()):
            return
        path, env, step = chain.first[longest]
        total = sum(chain.lengths.values())
        self._closed.append(
            Finding(
                "TK101",
                f"{count} of {total} episodes joined across files end at the same, longest "
                f"length {longest} with truncated = 0, as a time limit cuts them: record them "
                "as truncations (or set max-episode-steps, if the env has no time limit of "
                "that length)",
                path,
                env,
                step,
            )
        )
        chain.lengths.clear()


def _advance(chain: _Chain, edges: EpisodeEdges) -> None:
    """The chain's open episode per env after this file: its trail, or T steps longer."""
    for b in range(len(edges.lead)):
        if edges.has_end[b] or not edges.continues[b]:
            chain.running[b] = edges.trail[b]
        elif chain.running[b] >= 0:
            chain.running[b] += edges.num_steps
