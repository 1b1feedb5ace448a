"""Episodes joined across files (TK101, TK105, TK112's starts, TK113), merged in file order.

A recording saved as many files (one per `RolloutRecorder.record` call) cuts its episodes
at file boundaries: with T = 128 and a time limit of 500 no episode is complete inside one
file. Each worker summarises its file (`EpisodeEdges`: per env, the pieces of episodes in
the file, and its episode starts); `EpisodeJoiner` folds them in, in file order, keeping per
env only the open episode's running length.

A file continues the file before it when its row 0 repeats that file's row T (observations
and dones, hashed), B is the same, and:

- both have `recording` metadata with the same `id`, and its `index` is the previous one's
  plus 1 (the files of one recording are joined in index order; a file of another
  recording in between does not matter, a missing or repeated index breaks the chain);
- or neither has, and it comes right after it in the listing order.

Only the envs whose row 0 continues an episode (`dones[0, b] = 0`) join one; the others
start one at row 0. An episode whose first row is not in a joined file is not measured. The
time limit is that of the file where the step is judged. TK105 and TK113 are reported in
the file where they show, once per file; TK101 and TK112 once per chain, when it ends (their
evidence is the whole chain's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trajkit._models.rollout import Rollout
from trajkit.lint.columns import Start, lockstep_pairs, shared_starts
from trajkit.lint.config import LintOptions
from trajkit.lint.episodes import changes_observations, row_digest
from trajkit.lint.evidence import CHANCE
from trajkit.lint.registry import Finding
from trajkit.lint.timelimit import (
    cut_rate,
    early_cut_finding,
    over_limit_finding,
    truncation_finding,
    window,
)

__all__ = ["EpisodeEdges", "EpisodeJoiner", "Piece", "episode_edges"]


@dataclass(frozen=True)
class Piece:
    """The part of one episode inside one file, in one env.

    Attributes:
        start: The row where the episode starts, or `None` when row 0 continues it.
        steps: Its steps in this file.
        end: The step that ends it in this file, or `None` when it runs past row T.
        truncated: Whether that end is flagged as a truncation.
        first: The digest of its first row's observation (`""` when it continues).
        last: The digest of its last row's observation, where it ends (else `""`).
    """

    start: int | None
    steps: int
    end: int | None
    truncated: bool
    first: str = ""
    last: str = ""


@dataclass(frozen=True)
class EpisodeEdges:
    """What joining episodes across files needs of one file.

    Attributes:
        path: The file.
        head: A hash of row 0 (observations and dones); `tail` of row T.
        recording: `(id, index, B)` of its recording, if it has one.
        limit: Its time limit (the recording's, else the option), if known.
        obs_wrapped: Whether its recording names a vector wrapper that changes observations
            (their starts are then not compared: a running normaliser makes them alike).
        lockstep: Pairs of envs alike on one row, of pairs (`columns.lockstep_pairs`).
        pieces: Per env, the pieces of episodes in the file, in time order.
    """

    path: str
    head: str
    tail: str
    recording: tuple[str, int, int] | None
    limit: int | None
    pieces: tuple[tuple[Piece, ...], ...]
    obs_wrapped: bool = False
    lockstep: tuple[int, int] = (0, 0)


def _pieces(rollout: Rollout, b: int) -> tuple[Piece, ...]:
    """The pieces of env b: segments between the rows flagged as starts."""
    T = rollout.num_steps
    flagged = rollout.dones[:, b] == 1
    starts = np.flatnonzero(flagged[:T]).tolist()
    begins: list[int | None] = [*([None] if not flagged[0] else []), *starts]
    trunc = rollout.truncated
    pieces = []
    bounds = [*starts, T]
    stops = bounds[len(bounds) - len(begins) :]  # each piece stops where the next begins
    for begin, stop in zip(begins, stops, strict=True):
        ended = stop < T or bool(flagged[T])
        end = stop - 1 if ended else None
        first = row_digest(rollout, begin, b) if begin is not None else ""
        pieces.append(
            Piece(
                start=begin,
                steps=stop - (begin or 0),
                end=end,
                truncated=end is not None and trunc is not None and bool(trunc[end, b] == 1),
                first=first,
                last=row_digest(rollout, end, b) if end is not None else "",
            )
        )
    return tuple(pieces)


def episode_edges(
    rollout: Rollout, path: str, recording: dict[str, object] | None, max_episode_steps: int | None
) -> EpisodeEdges:
    """The `EpisodeEdges` of one file; the time limit is the recording's, else the option.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=6, num_envs=1)
        >>> r = r.replace(dones=np.array([[0], [0], [1], [0], [1], [0], [0]]))
        >>> e = episode_edges(r, "a.npz", None, 3)
        >>> [(p.start, p.steps, p.end) for p in e.pieces[0]]
        [(None, 2, 1), (2, 2, 3), (4, 2, None)]
    """
    recording = recording or {}
    limit = recording.get("max_episode_steps") or max_episode_steps
    identity = None
    if "id" in recording:
        identity = (str(recording["id"]), int(recording["index"]), int(recording["num_envs"]))  # type: ignore[call-overload]
    return EpisodeEdges(
        path=path,
        head=row_digest(rollout, 0),
        tail=row_digest(rollout, rollout.num_steps),
        recording=identity,
        limit=int(limit) if limit else None,  # type: ignore[call-overload]
        pieces=tuple(_pieces(rollout, b) for b in range(rollout.batch_size)),
        obs_wrapped=changes_observations(recording),
        lockstep=lockstep_pairs(rollout),
    )


@dataclass
class _Open:
    """An open episode: its steps so far, and the digest of its first row."""

    steps: int
    first: str


@dataclass
class _Chain:
    """The open episodes of a chain of files, and its evidence for TK101 and TK112."""

    index: int
    tail: str
    open: list[_Open | None]
    cuts: list[tuple[int, str, int, int, tuple[str, str]]] = field(default_factory=list)
    flagged: set[int] = field(default_factory=set)  # envs that flag an end at L as a cut
    marked: set[tuple[str, str]] = field(default_factory=set)  # those ends, distinct
    starts: list[Start] = field(default_factory=list)
    lockstep: tuple[int, int] = (0, 0)
    declared: bool = True  # its files have recordings, which name their vector wrappers
    obs_wrapped: bool = False
    files: list[str] = field(default_factory=list)
    limit: int = 0
    steps: int = 0  # every step of the chain
    terminations: int = 0  # its untruncated ends, but those at exactly the limit
    reached: int = 0  # chances to terminate in the window before L (an episode, a step)
    before: int = 0  # of them, those taken


class EpisodeJoiner:
    """Joins episodes across consecutive files; fed one `EpisodeEdges` at a time, in order.

    Examples:
        >>> import numpy as np
        >>> from trajkit.lint.config import LintOptions
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
        """Fold in one file (`None` for one that could not be read); its TK105 and TK113.

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
            chain = _Chain(-1, "", [None] * len(edges.pieces), declared=key is not None)
        found = self._judge(chain, edges)
        chain.index = edges.recording[1] if edges.recording is not None else -1
        chain.tail = edges.tail
        if key is None:
            self._plain = chain
        else:
            self._chains[key] = chain
        return found

    def finish(self) -> list[Finding]:
        """TK101 and TK112 of the chains still open, once every file is in.

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
        found, self._closed = self._closed, []
        return found

    @staticmethod
    def _continues(chain: _Chain, edges: EpisodeEdges) -> bool:
        if len(chain.open) != len(edges.pieces) or chain.tail != edges.head:
            return False
        return edges.recording is None or edges.recording[1] == chain.index + 1

    def _judge(self, chain: _Chain, edges: EpisodeEdges) -> list[Finding]:
        """Extend the chain's open episodes by this file; the file's TK105 and TK113."""
        chain.files.append(edges.path)
        chain.obs_wrapped = chain.obs_wrapped or edges.obs_wrapped
        chain.lockstep = (
            chain.lockstep[0] + edges.lockstep[0],
            chain.lockstep[1] + edges.lockstep[1],
        )
        limit = edges.limit
        over: list[tuple[int, int, int]] = []  # (step, env, before): past the limit
        early: list[tuple[int, int, int]] = []  # (step, env, length): cut before it
        starts: list[Start] = []
        for b, pieces in enumerate(edges.pieces):
            for piece in pieces:
                chain.steps += piece.steps
                opened = chain.open[b] if piece.start is None else _Open(0, piece.first)
                if piece.start is not None:
                    starts.append(Start(edges.path, b, piece.start, piece.first))
                if opened is None:  # its first row is not in the chain: not measured
                    chain.terminations += piece.end is not None and not piece.truncated
                    chain.open[b] = None
                    continue
                before, length = opened.steps, opened.steps + piece.steps
                origin = piece.start or 0
                if limit and before <= limit < length:
                    over.append((origin + limit - before, b, origin - before))
                if piece.end is not None:
                    self._ended(chain, edges, (piece.end, b), piece, length, opened.first, early)
                chain.open[b] = None if piece.end is not None else _Open(length, opened.first)
        chain.starts += sorted(starts, key=lambda s: (s.row, s.env))
        return self._findings(edges, over, early)

    @staticmethod
    def _ended(
        chain: _Chain,
        edges: EpisodeEdges,
        place: tuple[int, int],
        piece: Piece,
        length: int,
        first: str,
        early: list[tuple[int, int, int]],
    ) -> None:
        """An episode of `length` ends at `place` (step, env): TK113 now, TK101's evidence."""
        limit = edges.limit or 0
        end, b = place
        low = limit - window(limit)  # the window's first step: chances to terminate there on
        if limit > 1 and length >= low:
            chain.reached += min(length, limit - 1) - low + 1
            chain.before += length < limit and not piece.truncated
        if piece.truncated and length < limit:
            early.append((end, b, length))
        elif length == limit and piece.truncated:
            chain.flagged.add(b)
            chain.marked.add((first, piece.last))
        elif length == limit:
            where = (len(chain.files) - 1, edges.path, end, b)
            chain.cuts.append((*where, (first, piece.last)))
            chain.limit = limit
        elif not piece.truncated:
            chain.terminations += 1

    def _findings(
        self,
        edges: EpisodeEdges,
        over: list[tuple[int, int, int]],
        early: list[tuple[int, int, int]],
    ) -> list[Finding]:
        """The file's TK105 (past the limit) and TK113 (cut before it), once each."""
        limit = edges.limit or 0
        found = []
        if over and "TK105" in self.options.codes:
            step, env, start = min(over)
            begun = (
                f"starts at row {start}"
                if start >= 0
                else f"began {-start} steps before row 0 of this file"
            )
            found.append(over_limit_finding(len(over), limit, edges.path, (step, env), begun))
        if early and "TK113" in self.options.codes:
            step, env, length = min(early)
            found.append(early_cut_finding(len(early), limit, edges.path, (step, env), length))
        return found

    def _close(self, chain: _Chain | None) -> None:
        """TK101 and TK112 of a chain that ends."""
        if chain is None:
            return
        codes = self.options.codes
        cuts = [c for c in chain.cuts if c[3] not in chain.flagged]
        distinct = len({c[4] for c in cuts})
        if "TK101" in codes and distinct:
            rate = cut_rate(chain.terminations, chain.steps, *_at_limit(chain))
            if rate**distinct <= CHANCE:
                _, path, step, env, _ = min(cuts)
                files = len({c[1] for c in cuts})
                self._closed.append(
                    truncation_finding(distinct, files, chain.limit, rate, path, (step, env))
                )
        if "TK112" in codes and not chain.obs_wrapped:
            shared = shared_starts(chain.starts, chain.lockstep, declared=chain.declared)
            if shared is not None:
                self._closed.append(shared)
        chain.cuts.clear()
        chain.starts.clear()


def _at_limit(chain: _Chain) -> tuple[int, int]:
    """TK101's local evidence: terminations among the chances to terminate just before L and at L.

    Each step of the window before L (`window`) that an episode reached is a chance there;
    each episode that reached step L in an env that flags an end at L as a truncation, a
    chance at L (flagged: cut, not terminated; unflagged: terminated on the step the limit
    cut), distinct episodes each.
    """
    unflagged = {c[4] for c in chain.cuts if c[3] in chain.flagged}
    return chain.before + len(unflagged), chain.reached + len(chain.marked | unflagged)
