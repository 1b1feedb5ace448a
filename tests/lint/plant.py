"""Planted bugs: a generated world's files written with one bug, and where the bug shows.

Each bug class (`BUGS`) is a mistake people make when they record or post-process rollouts:
shifts by one of each field, flags swapped or dropped, final and reset observations confused,
columns copied or aliased, values normalised or clipped without saying so, log-probabilities
and values from another policy or env order, recordings reused across files. `plant(bug,
world)` writes the world's data with it and returns a `Planted`: the files, per file the
places (env, step or row) where the data differs from the clean data, and whether the bug can
show at all:

- `visible`: the data and its recording contradict each other, or no clean world the
  generator makes could have produced the data: what an ideal checker holding the files
  and their recording could tell apart (the rule is stated with each bug's function, from
  facts of the data, the planted change and the env, never from a check's own rule or
  threshold). Detection is measured over these. Three rules run through them: one
  coincidence is never enough (two places at least) unless its chance in the clean world,
  computed from the env itself, is at most `COINCIDENCE` (a continuous start shared by two
  envs); places that repeat one state are one piece of evidence (a fixed start, a
  deterministic env's one episode, the same final state); and what a clean world of
  another kind explains (a fixed start, a normaliser the recording names, a soft bound)
  shows nothing.
- `replayable`: the world's recording can be replayed (an env id, a seed, no wrapper):
  a bug that is not visible but replayable is counted apart, as one only replay can find.
- Neither: nothing in the files can show it (counted, and listed in the docs as such).

Stream bugs are written by the hand loop (`tests/lint/worlds.py`); file bugs change the files
a world saves, whoever recorded them.
"""

from __future__ import annotations

import functools
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tests.lint import worlds as w
from trajkit import Rollout

Place = tuple[int, int]  # (env, step or row); (-1, -1): the file itself
FILE_LEVEL: Place = (-1, -1)


@dataclass
class Planted:
    """A world's files with one planted bug."""

    bug: str
    world: w.World
    files: list[w.File]
    places: list[set[Place]]
    visible: bool
    replayable: bool
    codes: frozenset[str] = frozenset()

    @property
    def changed(self) -> bool:
        """Whether the bug changed anything at all."""
        return any(self.places)


@dataclass(frozen=True)
class Bug:
    """One bug class: which worlds it applies to, how it is planted, what may report it."""

    name: str
    codes: frozenset[str]
    applies: Callable[[w.World], bool]
    plant: Callable[[w.World, np.random.Generator], Planted]
    doc: str = ""


# ---------------------------------------------------------------------------- helpers


def _float_leaves(tree: Any) -> list[Any]:
    return [x for x in w._leaves(tree) if np.asarray(x).dtype.kind == "f"]


def _replayable(world: w.World, recorded: bool) -> bool:
    return recorded and world.wrapper is None


def _changed_places(before: Any, after: Any, *, rows: bool) -> Any:
    """Per file of a world, the (env, t) where `[N(+1), B, ...]` arrays differ."""
    diff = np.asarray(before) != np.asarray(after)
    if diff.ndim > 2:
        diff = diff.reshape(diff.shape[0], diff.shape[1], -1).any(-1)
    return diff


def _per_file(mask: Any, world: w.World, *, rows: bool) -> list[set[Place]]:
    """A `[N(+1), B]` mask of the stream as places per file (rows: each file's T+1 rows)."""
    out = []
    for i in range(world.files):
        lo = i * world.T
        hi = lo + world.T + (1 if rows else 0)
        part = np.asarray(mask)[lo:hi]
        out.append({(int(b), int(t)) for t, b in np.argwhere(part)})
    return out


def _write(
    stream: w.Stream,
    world: w.World,
    recording: dict[str, Any],
    *,
    truncated: bool | None = None,
    finals: bool | None = None,
) -> list[w.File]:
    keep = w.stores_truncated(world, stream) if truncated is None else truncated
    return w.cut_files(
        stream, world, recording if world.recorded else None, truncated=keep, finals=finals
    )


def _known_start(stream: w.Stream) -> Any:
    """`[N, B]`: step k ends an episode whose first row is in the data (the loop's are)."""
    return np.ones(stream.rew.shape, dtype=bool)


def _episode_lengths(stream: w.Stream) -> Any:
    """`[N, B]`: the length of the episode at step k so far (steps since its start row)."""
    N, B = stream.rew.shape
    length = np.zeros((N, B), dtype=np.int64)
    for b in range(B):
        n = 0
        for k in range(N):
            n = 1 if stream.flag[k, b] == 1 else n + 1
            length[k, b] = n
    return length


def resets_show(stream: w.Stream) -> bool:
    """Whether resets show in the observations: at most resets, the float observations jump
    farther than on 99 % of the steps inside episodes (in units of each feature's median
    change). Where they do not, a row off in `dones` looks like a step of the dynamics."""
    leaves = [x for x in w._leaves(stream.obs) if np.asarray(x).dtype.kind == "f"]
    if not leaves:
        return False
    N, B = stream.rew.shape
    reset = stream.flag[1:] == 1  # step k lands on a reset row
    jumps = np.zeros((N, B))
    for leaf in leaves:
        change = np.abs(np.diff(np.asarray(leaf, np.float64).reshape(N + 1, B, -1), axis=0))
        inside = change[~reset]
        if not inside.size:
            return False
        scale = np.median(inside, axis=0)
        jumps = np.maximum(jumps, (change / np.where(scale > 0, scale, np.inf)).max(-1))
    if not reset.any() or (~reset).sum() < 10:
        return False
    return bool(2 * (jumps[reset] > np.percentile(jumps[~reset], 99)).sum() > reset.sum())


def _limit_known(world: w.World, recording: dict[str, Any]) -> bool:
    return world.recorded and recording.get("max_episode_steps") is not None


def _result(
    bug: str,
    world: w.World,
    files: list[w.File],
    places: list[set[Place]],
    visible: bool,
    recorded: bool | None = None,
) -> Planted:
    rec = world.recorded if recorded is None else recorded
    changed = any(places)
    return Planted(
        bug,
        world,
        files,
        places,
        visible=visible and changed,
        replayable=changed and _replayable(world, rec),
        codes=BUG_CODES[bug],
    )


def _loop(world: w.World) -> w.World:
    return replace(world, maker="loop")


# ------------------------------------------------------------------------ stream bugs


def _terminal_rewards_distinct(stream: w.Stream) -> bool:
    """Whether the env pays distinctive terminal rewards: most terminating steps' rewards
    lie outside the range of every other step's (a goal, a crash, the end of a hand)."""
    term = stream.term & ~stream.trunc
    first = stream.flag[:-1] == 1
    term = term & ~first  # a one-step episode's reward is its first and its last
    if not term.any() or term.all():
        return False
    others = stream.rew[~term]
    outside = (stream.rew[term] < others.min()) | (stream.rew[term] > others.max())
    return 2 * int(outside.sum()) > int(term.sum())


def rewards_shifted(shift: int) -> Callable[[w.World, np.random.Generator], Planted]:
    """`rews[t]` holds the reward of step t - shift (1: late, the previous one; -1: early)."""
    name = "rewards_late" if shift == 1 else "rewards_early"

    def plant(world: w.World, rng: np.random.Generator) -> Planted:
        world = _loop(world)
        stream, _, recording = w.loop_stream(world)
        clean = stream.rew.copy()
        moved = np.roll(clean, shift, axis=0)
        moved[0 if shift == 1 else -1] = 0.0
        visible = _terminal_rewards_distinct(stream)
        stream.rew = moved
        places = _per_file(clean != moved, world, rows=False)
        return _result(name, world, _write(stream, world, recording), places, visible)

    return plant


def actions_shifted(shift: int) -> Callable[[w.World, np.random.Generator], Planted]:
    """`actions[t]` is the action of row t - shift (1: appended after `env.step`)."""
    name = "actions_late" if shift == 1 else "actions_early"

    def plant(world: w.World, rng: np.random.Generator) -> Planted:
        world = _loop(world)
        stream, _, recording = w.loop_stream(world)
        clean = stream.outs["actions"].copy()
        moved = np.roll(clean, shift, axis=0)
        moved[0 if shift == 1 else -1] = clean[0 if shift == 1 else -1]
        stream.outs["actions"] = moved
        pinned = _pinned_rows(stream.outs, clean, moved, shift) >= 2  # one is a coincidence
        places = _per_file(_changed_places(clean, moved, rows=True), world, rows=True)
        return _result(name, world, _write(stream, world, recording), places, pinned)

    return plant


def _pinned_rows(outs: dict[str, Any], clean: Any, moved: Any, shift: int) -> int:
    """The rows whose stored (moved) action the policy outputs pin to another row.

    By `log_probs` (with the `actor` logits or the Gaussian's `mean` and `std`): the stored
    log-probability is the true action's, and the moved action's differs from it. By the
    greedy action alone (`actor` without `log_probs`): the moved action is the greedy one
    of the row it came from and not of the row it is stored on; where the greedy action
    persists, an action fits both rows alike and nothing tells where it belongs.
    """
    N = len(clean)
    rows = np.arange(max(shift, 0), N + min(shift, 0))  # rows holding another row's action
    differ = (np.asarray(moved[rows]) != np.asarray(clean[rows])).reshape(len(rows), -1)
    differ = differ.reshape(len(rows), clean.shape[1], -1).any(-1)
    if "log_probs" in outs and "actor" in outs:
        logp = outs["actor"] - np.log(np.exp(outs["actor"]).sum(-1, keepdims=True))
        at = np.take_along_axis(logp[rows], moved[rows][..., None].astype(np.int64), -1)[..., 0]
        true = np.take_along_axis(logp[rows], clean[rows][..., None].astype(np.int64), -1)[..., 0]
        return int((differ & ~np.isclose(at, true, rtol=1e-3, atol=1e-3)).sum())
    if "log_probs" in outs and "mean" in outs:
        mean, std = outs["mean"][rows], outs["std"][rows]
        at = w.gaussian_logp(moved[rows].astype(np.float64), mean, std)
        true = w.gaussian_logp(clean[rows].astype(np.float64), mean, std)
        return int((differ & ~np.isclose(at, true, rtol=1e-3, atol=1e-3)).sum())
    if "actor" in outs:
        greedy = outs["actor"].argmax(-1)
        came = greedy[rows - shift]  # the greedy action of the row each action came from
        return int((differ & (moved[rows] == came) & (moved[rows] != greedy[rows])).sum())
    return 0


def dones_shifted(shift: int) -> Callable[[w.World, np.random.Generator], Planted]:
    """`dones` one row early (-1: SB3's convention, step t ended) or late (+1)."""
    name = "dones_early" if shift == -1 else "dones_late"

    def plant(world: w.World, rng: np.random.Generator) -> Planted:
        world = _loop(world)
        stream, _, recording = w.loop_stream(world)
        clean = stream.flag.copy()
        moved = np.roll(clean, shift, axis=0)
        moved[0] = 1
        if shift == -1:
            moved[-1] = 0
        stream.flag = moved
        # truncated follows the ends it flags (its rule: truncated[t] needs dones[t+1])
        ends = moved[1:] == 1
        stream.trunc = stream.trunc & ends
        stream.term = np.where(ends, stream.term | ~stream.trunc, False)
        visible = resets_show(stream)
        places = _per_file(clean != moved, world, rows=True)
        inner = [{(b, t) for b, t in p if 0 < t < world.T} for p in places]
        ended = _per_file((clean != moved)[1:], world, rows=False)  # the step whose end moved
        places = [p | q for p, q in zip(places, ended, strict=True)]
        visible = visible and any(inner)  # a flag moved inside a file, not at its edge
        files = _write(stream, world, recording, finals=False)
        return _result(name, world, files, places, visible)

    return plant


def _cut_places(
    stream: w.Stream, mask: Any, world: w.World, *, after: bool = False
) -> list[set[Place]]:
    places = _per_file(mask, world, rows=False)
    if after:
        nxt = np.zeros_like(mask)
        nxt[1:] = mask[:-1]
        for i, extra in enumerate(_per_file(nxt, world, rows=False)):
            places[i] |= extra
    return places


def truncation_as_termination(world: w.World, rng: np.random.Generator) -> Planted:
    """`truncated` not stored: every end, cuts too, looks like a termination."""
    world = _loop(world)
    stream, _, recording = w.loop_stream(world)
    cut = stream.cut & _known_start(stream)
    places = _cut_places(stream, stream.cut, world)
    stream.term = stream.term | stream.trunc
    stream.trunc = np.zeros_like(stream.trunc)
    # With L = 1 every episode's only step is its L-th: no step before it shows how often
    # the env terminates, and an unflagged end is what a one-step env under TimeLimit(1)
    # records (a termination). Two cut episodes at least: one is a coincidence.
    limit = recording.get("max_episode_steps") or 0
    visible = _limit_known(world, recording) and limit > 1 and _distinct_episodes(stream, cut) >= 2
    files = _write(stream, world, recording, truncated=bool(rng.random() < 0.5))
    return _result("truncation_as_termination", world, files, places, visible)


def _distinct_episodes(stream: w.Stream, ends: Any) -> int:
    """The distinct episodes ending at the steps of `ends` (first and last observation): a
    deterministic env that repeats one episode shows one piece of evidence."""
    lengths = _episode_lengths(stream)
    keys = {
        (
            _row_key(stream, int(k) + 1 - int(lengths[k, b]), int(b)),
            _row_key(stream, int(k), int(b)),
        )
        for k, b in np.argwhere(ends)
    }
    return len(keys)


def truncation_dropped(world: w.World, rng: np.random.Generator) -> Planted:
    """`done = terminated`: a time-limit cut is no episode end at all."""
    world = _loop(world)
    stream, _, recording = w.loop_stream(world)
    cut = stream.cut.copy()
    stream.flag[1:][cut] = 0
    stream.trunc = stream.trunc & ~cut
    places = _cut_places(stream, cut, world, after=True)
    visible = _limit_known(world, recording) and bool((cut & _known_start(stream)).any())
    return _result("truncation_dropped", world, _write(stream, world, recording), places, visible)


def truncations_some_envs(world: w.World, rng: np.random.Generator) -> Planted:
    """`truncated` kept for env 0 only (a loop that stores `trunc[0]`)."""
    world = _loop(replace(world, B=max(world.B, 2)))
    stream, _, recording = w.loop_stream(world)
    lost = stream.cut.copy()
    lost[:, 0] = False
    stream.term = stream.term | lost
    stream.trunc = stream.trunc & ~lost
    places = _cut_places(stream, lost, world)
    distinct = _distinct_episodes(stream, lost & _known_start(stream))
    visible = _limit_known(world, recording) and distinct >= 2  # one is a coincidence
    files = _write(stream, world, recording, truncated=True)
    return _result("truncations_some_envs", world, files, places, visible)


def terminations_as_truncations(world: w.World, rng: np.random.Generator) -> Planted:
    """`truncated = terminated | truncated`: every end flagged as a time-limit cut."""
    world = _loop(world)
    stream, _, recording = w.loop_stream(world)
    wrong = stream.term & ~stream.trunc
    short = wrong & (_episode_lengths(stream) < (recording.get("max_episode_steps") or 0))
    stream.trunc = stream.trunc | stream.term
    stream.term = np.zeros_like(stream.term)
    places = _cut_places(stream, wrong, world)
    visible = _limit_known(world, recording) and bool(short.any())
    files = _write(stream, world, recording, truncated=True)
    return _result("terminations_as_truncations", world, files, places, visible)


def phantom(world: w.World, rng: np.random.Generator) -> Planted:
    """NEXT_STEP's autoreset step kept as a transition (a CleanRL-style loop on Gymnasium 1.x).

    Visible by its reward 0 against real steps that earn (from two final states at least:
    steps from one state earn alike), by a fixed reset state its steps lead to (three at
    least), or, exactly, by an episode longer than the recorded time limit (a cut episode
    now runs L + 1 steps).
    """
    world = replace(_loop(world), mode="NEXT_STEP")
    _, cols, recording = w.loop_stream(world)
    need = world.T * world.files
    marks: list[list[bool]] = []
    for c in cols:
        obs: list[Any] = []
        flag: list[int] = []
        outs: list[w.Outs] = []
        rew: list[float] = []
        term: list[bool] = []
        trunc: list[bool] = []
        final: list[Any] = []
        mark: list[bool] = []
        for k in range(len(c.rew)):
            obs.append(c.obs[k])
            flag.append(0 if (k - 1) in c.phantom else c.flag[k])
            outs.append(c.outs[k])
            rew.append(c.rew[k])
            term.append(c.term[k])
            trunc.append(c.trunc[k])
            final.append(None)
            mark.append(False)
            if k in c.phantom:  # the final observation as a row, and the reset step
                obs.append(c.final[k])
                flag.append(1)
                outs.append(c.phantom[k])
                rew.append(0.0)
                term.append(False)
                trunc.append(False)
                final.append(None)
                mark.append(True)
        last = len(c.rew) - 1
        if c.ended[last] and last not in c.phantom:  # the next row: the final observation
            obs.append(c.final[last])
            flag.append(1)
            outs.append(c.outs[last + 1])
        else:
            obs.append(c.obs[last + 1])
            flag.append(c.flag[last + 1])
            outs.append(c.outs[last + 1])
        c.obs, c.flag, c.outs = obs[: need + 1], flag[: need + 1], outs[: need + 1]
        c.rew, c.term, c.trunc, c.final = rew[:need], term[:need], trunc[:need], final[:need]
        marks.append(mark[:need])
    # A row after an end now holds the final observation and starts the phantom "episode":
    # the end's flag moves there, the reset row after it starts nothing.
    stream = w.stream_of(cols)
    mask = np.array(marks).T
    places = _per_file(mask, world, rows=False)
    files = _write(stream, world, recording, finals=False)
    # The phantom's reward 0 stands out only beside real steps that end nothing and earn
    # something (else the data is that of an env whose first step pays 0), or against a
    # fixed reset state, which k phantom steps lead to as k - 1 coincidences (three steps
    # at least: one coincidence is never enough); and only from final observations that
    # differ, two at least: steps that leave one and the same state earn alike, as an env's
    # first steps from a fixed start do (one piece of evidence).
    real = ~mask & ~(stream.term | stream.trunc)
    paid = bool((stream.rew[real] != 0).any())
    fixed = world.start == "fixed" and int(mask.sum()) >= 3
    finals = {_row_key(stream, int(k), int(b)) for k, b in np.argwhere(mask)}
    # Or, exactly, where a recording names the time limit L: an episode the limit cut
    # after L real steps now runs L + 1 steps, which no env under TimeLimit(L) records.
    limit = recording.get("max_episode_steps") if world.recorded else None
    longer = limit is not None and bool((_episode_lengths(stream) > limit).any())
    visible = (len(finals) >= 2 and (paid or fixed)) or longer
    return _result("phantom", world, files, places, visible)


def final_is_reset(world: w.World, rng: np.random.Generator) -> Planted:
    """`final_obses` holds the reset observation that follows (`next_obs` after autoreset)."""
    world = replace(_loop(world), finals=True)
    stream, _, recording = w.loop_stream(world)
    mask = np.zeros(stream.rew.shape, dtype=bool)
    resets = set()
    for (k, b), final in list(stream.final.items()):
        reset = w.map_tree(lambda x: np.array(x[k + 1, b]), stream.obs)  # noqa: B023
        if any(
            not np.array_equal(f, r)
            for f, r in zip(w._leaves(final), w._leaves(reset), strict=True)
        ):
            mask[k, b] = True
            resets.add(b"".join(np.ascontiguousarray(x).tobytes() for x in w._leaves(reset)))
        stream.final[(k, b)] = reset
    places = _cut_places(stream, mask, world, after=True)
    # With a fixed start, a task that ends where it starts looks the same: the resets must vary.
    files = _write(stream, world, recording)
    visible = int(mask.sum()) >= 2 and len(resets) >= 2  # one coincidence is no evidence
    return _result("final_is_reset", world, files, places, visible)


def reset_is_final(world: w.World, rng: np.random.Generator) -> Planted:
    """The row after an end holds the final observation, not the reset one."""
    world = _loop(world)
    stream, _, recording = w.loop_stream(world)
    jumps = resets_show(stream)
    mask = np.zeros(stream.flag.shape, dtype=bool)
    finals: set[bytes] = set()
    for (k, b), final in stream.final.items():
        finals.add(b"".join(np.ascontiguousarray(x).tobytes() for x in w._leaves(final)))
        leaves = w._leaves(final)
        targets = w._leaves(stream.obs)
        for leaf, target in zip(leaves, targets, strict=True):
            if not np.array_equal(target[k + 1, b], leaf):
                mask[k + 1, b] = True
            target[k + 1, b] = leaf
    places = _per_file(mask, world, rows=True)
    steps = _per_file(mask[1:], world, rows=False)  # the end before each such row
    places = [p | q for p, q in zip(places, steps, strict=True)]
    # Seen through final_obses (which hold the same, with two ends or more and not all one),
    # or as the jump off the flagged row, where resets show.
    visible = (world.finals and int(mask.sum()) >= 2 and len(finals) >= 2) or jumps
    return _result("reset_is_final", world, _write(stream, world, recording), places, visible)


def seeded_alike(world: w.World, rng: np.random.Generator) -> Planted:
    """`envs.reset(seed=[seed] * B)`: every env starts from the same states.

    Visible where the k-th starts two envs share would be a chance of at most
    `COINCIDENCE` in envs seeded apart, at the rate two starts of the env with different
    seeds are alike (`_start_collision`: 0 for a continuous start, so one shared start
    shows); not where every start in the data is alike (a fixed start explains any number),
    nor, for starts on one row, without a recording that names no normaliser (a running
    normaliser over a fixed start starts every env alike on one row).
    """
    world = _loop(replace(world, B=max(world.B, 2)))
    stream, _, recording = w.loop_stream(world, seeded_alike=True)
    starts = stream.flag == 1
    places = _per_file(starts, world, rows=True)
    for p in places:  # env 0's starts are its own
        p -= {(0, t) for t in range(world.T + 1)}
    # Envs seeded apart share their k-th start with the chance q at which two of the env's
    # starts drawn with different seeds are alike (1 for a fixed start, 0 for a continuous
    # one): the data shows the seeding where the k-th starts it shares are that unlikely.
    # Two exceptions come from the data itself: a fixed start (every start in the data
    # alike) explains any number of shared starts, and a running normaliser over a fixed
    # start makes starts on one row alike, so those count only where the recording names
    # the wrappers and none changes observations.
    together = world.recorded and world.wrapper != "NormalizeObservation"
    pairs = _aligned_alike(stream, together=together)
    varied = len({_row_key(stream, int(t), int(b)) for t, b in np.argwhere(starts)}) >= 2
    q = _start_collision(world)
    visible = varied and alike_chance(pairs, q) <= COINCIDENCE
    return _result("seeded_alike", world, _write(stream, world, recording), places, visible)


COINCIDENCE = 1e-3
"""The largest chance, in a clean world, of data that counts as showing a planted bug."""


def alike_chance(pairs: list[tuple[int, int]], q: float) -> float:
    """The chance, in envs seeded apart, of the shared k-th starts of the likeliest pair.

    `pairs`: per pair of envs, (shared starts, k-th starts both have); each k-th start is
    alike at the rate `q`; times the number of pairs (any of them could show it).
    """
    if not pairs:
        return 1.0
    return len(pairs) * min(_binomial_tail(n, q, k) if k else 1.0 for k, n in pairs)


def _binomial_tail(n: int, q: float, k: int) -> float:
    """P(Binomial(n, q) >= k), exactly."""
    return float(sum(math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k, n + 1)))


@functools.lru_cache(maxsize=256)
def _collision_of(env_id: str, config: str) -> float:
    """How often two starts of an env, reset with different seeds, are alike (256 seeds)."""
    import gymnasium as gym

    from tests.lint import synth

    synth.register()
    kwargs = {"config": json.loads(config)} if config != "{}" else {}
    env = gym.make(env_id, **kwargs)
    keys = Counter(
        b"".join(np.ascontiguousarray(x).tobytes() for x in w._leaves(env.reset(seed=s)[0]))
        for s in range(10_000, 10_256)
    )
    env.close()
    n = sum(keys.values())
    return sum(c * (c - 1) for c in keys.values()) / (n * (n - 1))


def _start_collision(world: w.World) -> float:
    context = w._quiet()
    try:
        return _collision_of(world.env_id, json.dumps(world.config, sort_keys=True))
    finally:
        context.__exit__(None, None, None)


def _row_key(stream: w.Stream, k: int, b: int) -> bytes:
    return b"".join(np.ascontiguousarray(x[k, b]).tobytes() for x in w._leaves(stream.obs))


def _aligned_alike(stream: w.Stream, *, together: bool) -> list[tuple[int, int]]:
    """Per pair of envs, the k-th episode starts (the k-th of each, in order) they share,
    and how many k-th starts they both have (the trials). Starts on one row count only
    where `together` (see `seeded_alike`)."""
    N1, B = stream.flag.shape
    keys = [[_row_key(stream, t, b) for b in range(B)] for t in range(N1)]
    out = []
    for a in range(B):
        for b in range(a + 1, B):
            ka, kb = (np.flatnonzero(stream.flag[:, e] == 1) for e in (a, b))
            pairs = [(x, y) for x, y in zip(ka, kb, strict=False) if x != y or together]
            out.append((sum(keys[x][a] == keys[y][b] for x, y in pairs), len(pairs)))
    return out


def _policy_pinned(outs: dict[str, Any]) -> bool:
    return "log_probs" in outs and ("actor" in outs or "mean" in outs)


def logp_other_policy(world: w.World, rng: np.random.Generator) -> Planted:
    """One file's `log_probs` from another policy (a copy of the network before an update)."""
    world = _loop(world)
    stream, _, recording = w.loop_stream(world)
    outs = stream.outs
    if "log_probs" not in outs:
        return _result("logp_other_policy", world, _write(stream, world, recording), [], False)
    world = replace(world, files=max(world.files, 2))
    stream, _, recording = w.loop_stream(world)
    outs = stream.outs
    clean = outs["log_probs"].copy()
    i = int(rng.integers(world.files))  # the rollout recorded before the policy was updated
    lo, hi = i * world.T, (i + 1) * world.T + 1
    outs["log_probs"][lo:hi] = clean[lo:hi] + rng.normal(scale=0.3, size=clean[lo:hi].shape)
    places = _per_file(clean != outs["log_probs"], world, rows=True)
    files = _write(stream, world, recording)
    return _result("logp_other_policy", world, files, places, _policy_pinned(outs))


def logp_env_order(world: w.World, rng: np.random.Generator) -> Planted:
    """`log_probs` stored in another env order than the actions (a transposed gather)."""
    world = _loop(replace(world, B=max(world.B, 2)))
    stream, _, recording = w.loop_stream(world)
    outs = stream.outs
    if "log_probs" not in outs:
        return _result("logp_env_order", world, _write(stream, world, recording), [], False)
    clean = outs["log_probs"].copy()
    outs["log_probs"] = np.roll(clean, 1, axis=1)
    places = _per_file(~np.isclose(clean, outs["log_probs"]), world, rows=True)
    files = _write(stream, world, recording)
    return _result("logp_env_order", world, files, places, _policy_pinned(outs))


def values_env_order(world: w.World, rng: np.random.Generator) -> Planted:
    """`critic` values stored in another env order: nothing else in the files shows it."""
    world = _loop(replace(world, B=max(world.B, 2)))
    stream, _, recording = w.loop_stream(world)
    outs = stream.outs
    if "critic" not in outs:
        return _result("values_env_order", world, _write(stream, world, recording), [], False)
    clean = outs["critic"].copy()
    outs["critic"] = np.roll(clean, 1, axis=1)
    places = _per_file(clean != outs["critic"], world, rows=True)
    result = _result("values_env_order", world, _write(stream, world, recording), places, False)
    result.replayable = False  # replay compares what the env gives, not the critic
    return result


def actions_unclipped(world: w.World, rng: np.random.Generator) -> Planted:
    """The Gaussian sample stored as the action (the env clips it), with its log-probability."""
    world = _loop(world)
    stream, _, recording = w.loop_stream(world)
    outs = stream.outs
    if "_sample" not in outs:
        return _result("actions_unclipped", world, _write(stream, world, recording), [], False)
    clean = outs["actions"].copy()
    outs["actions"] = outs["_sample"].astype(clean.dtype)
    outs["log_probs"] = w.gaussian_logp(outs["_sample"], outs["mean"], outs["std"])
    places = _per_file(_changed_places(clean, outs["actions"], rows=True), world, rows=True)
    space = recording.get("action_space") or {}
    visible = world.recorded and space.get("low") is not None and space.get("high") is not None
    files = _write(stream, world, recording)
    return _result("actions_unclipped", world, files, places, visible)


def logp_unclipped(world: w.World, rng: np.random.Generator) -> Planted:
    """The log-probability of the unclipped sample beside the clipped action."""
    world = _loop(world)
    stream, _, recording = w.loop_stream(world)
    outs = stream.outs
    if "_sample" not in outs:
        return _result("logp_unclipped", world, _write(stream, world, recording), [], False)
    clean = outs["log_probs"].copy()
    outs["log_probs"] = w.gaussian_logp(outs["_sample"], outs["mean"], outs["std"])
    places = _per_file(~np.isclose(clean, outs["log_probs"]), world, rows=True)
    return _result("logp_unclipped", world, _write(stream, world, recording), places, True)


# -------------------------------------------------------------------------- file bugs


def _files(world: w.World) -> tuple[list[w.File], bool]:
    files = w.clean_set(world)
    return files, files[0][1] is not None


def _obs_leaves(r: Rollout) -> list[Any]:
    return w._leaves(r.obses)


def column_copied(world: w.World, rng: np.random.Generator) -> Planted:
    """Env 1's observations are env 0's (the loop indexes `obs[0]` for every env)."""
    world = replace(world, B=max(world.B, 2))
    files, recorded = _files(world)
    places = []
    values: set[bytes] = set()
    for r, _ in files:
        mask = np.zeros((r.num_steps + 1,), dtype=bool)
        rows = [b""] * (r.num_steps + 1)
        for leaf in _obs_leaves(r):
            mask |= (leaf[:, 1] != leaf[:, 0]).reshape(len(leaf), -1).any(-1)
            rows = [
                k + np.ascontiguousarray(x).tobytes() for k, x in zip(rows, leaf[:, 0], strict=True)
            ]
            leaf[:, 1] = leaf[:, 0]
        values |= set(rows)
        places.append({(1, t) for t in range(r.num_steps + 1)} if mask.any() else set())
    # A column that shows a few values may follow another env's by chance: a copy shows
    # where the copied observations move through several.
    return _result("column_copied", world, files, places, len(values) >= 3, recorded)


def rows_aliased(world: w.World, rng: np.random.Generator) -> Planted:
    """Every row of one file's observations is its last (one buffer appended T+1 times)."""
    files, recorded = _files(world)
    i = int(rng.integers(len(files)))
    places: list[set[Place]] = [set() for _ in files]
    r = files[i][0]
    changed = np.zeros((r.num_steps + 1, r.batch_size), dtype=bool)
    for leaf in _obs_leaves(r):
        changed |= (leaf != leaf[-1:]).reshape(len(leaf), leaf.shape[1], -1).any(-1)
        leaf[:] = leaf[-1:]
    columns = changed.any(axis=0)
    places[i] = {(b, t) for b in np.flatnonzero(columns).tolist() for t in range(r.num_steps + 1)}
    # A column frozen across a reset: a reset that changes nothing (else: an env that stays),
    # where the observations move elsewhere in the dataset (else: a blind env).
    reset = (r.dones[1:] == 1).any(axis=0) & columns
    moving = any(
        bool((leaf[1:] != leaf[:-1]).any())
        for j, (f, _) in enumerate(files)
        if j != i
        for leaf in _obs_leaves(f)
    )
    # And where the file's observations hold floats, or its policy outputs move while its
    # observations do not: integers and bits stay put by themselves for as long as a
    # deterministic env rests, across a reset to a start that looks the same.
    floats = any(leaf.dtype.kind == "f" for leaf in _obs_leaves(r))
    arrays = r.model_outs.arrays
    moved = any(
        bool((arrays[k][1:] != arrays[k][:-1]).any())
        for k in ("actor", "critic", "mean", "std")
        if k in arrays
    )
    if r.final_obses is not None:
        files[i] = (r.replace(final_obses=None), files[i][1])
    visible = bool(reset.any()) and moving and (floats or moved)
    return _result("rows_aliased", world, files, places, visible, recorded)


def _bounds_of(space: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not space:
        return []
    from tests.lint.synth import leaf_descs

    return leaf_descs(space)


def obs_normalised(world: w.World, rng: np.random.Generator) -> Planted:
    """Float observations normalised in place ((x - mean) / std), the recording unchanged.

    Visible where a value lies past a declared Box bound that the env keeps, by any margin
    and on either side (the synthetic env clips to its box; the real envs keep theirs but
    for `SOFT_BOUNDS`), and the recording names no normaliser (whose space says nothing of
    values).
    """
    files, recorded = _files(world)
    floats = [i for i, leaf in enumerate(_obs_leaves(files[0][0])) if leaf.dtype.kind == "f"]
    if not floats:
        return _result("obs_normalised", world, files, [set() for _ in files], False, recorded)
    places: list[set[Place]] = []
    outside = False
    descs = _bounds_of((files[0][1] or {}).get("observation_space"))
    for r, _ in files:
        mine: set[Place] = set()
        leaves = _obs_leaves(r)
        for i in floats:
            leaf = leaves[i]
            mean = leaf.mean(axis=(0, 1))
            std = leaf.std(axis=(0, 1)) + 1e-8
            new = ((leaf - mean) / std * 3.0).astype(leaf.dtype)
            mine |= {
                (int(b), int(t))
                for t, b in np.argwhere((new != leaf).reshape(*leaf.shape[:2], -1).any(-1))
            }
            if descs and i < len(descs) and descs[i]["type"] == "Box":
                from tests.lint.synth import box_bounds

                low, high = box_bounds(descs[i])
                hard = np.ones(low.shape, dtype=bool)
                hard.reshape(-1)[SOFT_BOUNDS.get(world.env_id, slice(0, 0))] = False
                flat = new.reshape(-1, *low.shape)
                outside |= bool((hard & ((flat < low) | (flat > high))).any())
            leaf[...] = new
        places.append(mine)
        if r.final_obses is not None:
            pass  # the finals stay raw: a loop that normalises the rows it stores
    # A value past a bound the env keeps contradicts the recording, by any margin: the
    # synthetic env clips its Box features, the real envs keep theirs (SOFT_BOUNDS aside);
    # under a normaliser the recording names, the declared space says nothing of values.
    visible = recorded and outside and world.wrapper != "NormalizeObservation"
    return _result("obs_normalised", world, files, places, visible, recorded)


SOFT_BOUNDS = {"LunarLander-v3": slice(0, 6)}
"""Features whose declared Box bounds the env does not keep: LunarLander's position,
velocities and angle (its lander flies as high as it likes above y = 2.5)."""


def rewards_clipped(world: w.World, rng: np.random.Generator) -> Planted:
    """`np.clip(reward, -1, 1)` stored, the recording naming no reward wrapper."""
    files, recorded = _files(world)
    places = []
    for r, _ in files:
        clipped = np.clip(r.rews, -1.0, 1.0)
        places.append({(int(b), int(t)) for t, b in np.argwhere(clipped != r.rews)})
        r.rews[...] = clipped
    return _result("rewards_clipped", world, files, places, False, recorded)


def rewards_scaled(world: w.World, rng: np.random.Generator) -> Planted:
    """The last file's rewards scaled (a reward wrapper switched on halfway)."""
    world = replace(world, files=max(world.files, 3))
    files, recorded = _files(world)
    r = files[-1][0]
    factor = float(rng.choice([100.0, 0.01]))
    nonzero = bool((r.rews != 0).any())
    values = {v for f, _ in files for v in np.unique(f.rews[f.rews != 0]).tolist()}
    r.rews[...] = r.rews * factor
    places: list[set[Place]] = [set() for _ in files[:-1]] + [{FILE_LEVEL} if nonzero else set()]
    big = [f for f, _ in files if f.rews.size >= 32]  # files that sample the env's rewards
    others = sum(bool((f.rews != 0).any()) for f in big[:-1]) if r.rews.size >= 32 else 0
    # Rewards of a continuous range that shrink are a better policy's, as far as data can say.
    shows = factor > 1 or len(values) <= 16
    shows = shows and world.wrapper not in ("NormalizeReward", "ClipReward")  # named: may vary
    return _result("rewards_scaled", world, files, places, others >= 2 and shows, recorded)


def saved_twice(world: w.World, rng: np.random.Generator) -> Planted:
    """A file saved again under another name (a resumed job, a merged copy).

    Visible where the copy claims an index of its recording that the original holds, or,
    without a recording, where no other file of the clean world holds the same arrays (a
    deterministic env and policy may record one file again and again).
    """
    files, recorded = _files(world)
    i = int(rng.integers(len(files)))
    unique = not any(_same_arrays(files[i][0], r) for j, (r, _) in enumerate(files) if j != i)
    files.append(files[i])
    places: list[set[Place]] = [set() for _ in files[:-1]] + [{FILE_LEVEL}]
    return _result("saved_twice", world, files, places, recorded or unique, recorded)


def _same_arrays(a: Rollout, b: Rollout) -> bool:
    """Whether two rollouts hold the same arrays (every field, bit for bit)."""
    fields = [
        (x, y)
        for x, y in (
            (a.rews, b.rews),
            (a.dones, b.dones),
            (a.truncated, b.truncated),
            *zip(w._leaves(a.obses), w._leaves(b.obses), strict=True),
            *zip(w._leaves(a.final_obses), w._leaves(b.final_obses), strict=False),
            *((a.model_outs.arrays[k], b.model_outs.arrays.get(k)) for k in a.model_outs.arrays),
        )
    ]
    return all(
        (x is None and y is None)
        or (x is not None and y is not None and np.array_equal(x, y, equal_nan=False))
        for x, y in fields
    )


def recording_reused(world: w.World, rng: np.random.Generator) -> Planted:
    """Every file saved with the first file's recording (captured once, index 0)."""
    world = replace(world, files=max(world.files, 2), recorded=True)
    files, recorded = _files(world)
    first = files[0][1]
    out = [(r, first) for r, _ in files]
    places: list[set[Place]] = [set()] + [{FILE_LEVEL} for _ in files[1:]]
    return _result("recording_reused", world, out, places, first is not None, recorded)


def obs_clipped(world: w.World, rng: np.random.Generator) -> Planted:
    """Float observations clipped to [-1, 1] in the loop: inside any space, seen by replay."""
    files, recorded = _files(world)
    places = []
    for r, _ in files:
        mine: set[Place] = set()
        for leaf in _obs_leaves(r):
            if leaf.dtype.kind != "f":
                continue
            new = np.clip(leaf, -1.0, 1.0)
            mine |= {
                (int(b), int(t))
                for t, b in np.argwhere((new != leaf).reshape(*leaf.shape[:2], -1).any(-1))
            }
            leaf[...] = new
        places.append(mine)
    return _result("obs_clipped", world, files, places, False, recorded)


# ------------------------------------------------------------------------- the classes


BUG_CODES: dict[str, frozenset[str]] = {}


def _has_gaussian(world: w.World) -> bool:
    return world.policy == "gaussian"


def _logp(world: w.World) -> bool:
    return world.policy in ("softmax", "greedy", "gaussian") and not (
        world.config and world.config["act"].get("start")
    )


def _any(world: w.World) -> bool:
    return True


def _define() -> dict[str, Bug]:
    table: list[tuple[str, tuple[str, ...], Callable[[w.World], bool], Any]] = [
        ("rewards_late", ("TK102",), _any, rewards_shifted(1)),
        ("rewards_early", ("TK102",), _any, rewards_shifted(-1)),
        ("actions_late", ("TK103",), _any, actions_shifted(1)),
        ("actions_early", ("TK103",), _any, actions_shifted(-1)),
        ("dones_early", ("TK109",), _any, dones_shifted(-1)),
        ("dones_late", ("TK109",), _any, dones_shifted(1)),
        ("truncation_as_termination", ("TK101",), _any, truncation_as_termination),
        ("truncation_dropped", ("TK105",), _any, truncation_dropped),
        ("truncations_some_envs", ("TK101",), _any, truncations_some_envs),
        ("terminations_as_truncations", ("TK113",), _any, terminations_as_truncations),
        ("phantom", ("TK108", "TK105"), _any, phantom),
        ("final_is_reset", ("TK114",), _any, final_is_reset),
        ("reset_is_final", ("TK109", "TK114"), _any, reset_is_final),
        ("seeded_alike", ("TK112",), _any, seeded_alike),
        ("logp_other_policy", ("TK110",), _logp, logp_other_policy),
        ("logp_env_order", ("TK110",), _logp, logp_env_order),
        ("values_env_order", (), _any, values_env_order),
        ("actions_unclipped", ("TK107",), _has_gaussian, actions_unclipped),
        ("logp_unclipped", ("TK110",), _has_gaussian, logp_unclipped),
        ("column_copied", ("TK112",), _any, column_copied),
        ("rows_aliased", ("TK115",), _any, rows_aliased),
        ("obs_normalised", ("TK116",), _any, obs_normalised),
        ("obs_clipped", (), _any, obs_clipped),
        ("rewards_clipped", ("TK111",), _any, rewards_clipped),
        ("rewards_scaled", ("TK202",), _any, rewards_scaled),
        ("saved_twice", ("TK203",), _any, saved_twice),
        ("recording_reused", ("TK204",), _any, recording_reused),
    ]
    bugs = {}
    for name, codes, applies, fn in table:
        BUG_CODES[name] = frozenset(codes)
        bugs[name] = Bug(name, frozenset(codes), applies, fn, (fn.__doc__ or "").strip())
    return bugs


BUGS = _define()
"""Every bug class, by name."""


def plant(bug: str, world: w.World, rng: np.random.Generator) -> Planted:
    """The world's files with `bug` planted."""
    context = w._quiet()
    try:
        return BUGS[bug].plant(world, rng)
    finally:
        context.__exit__(None, None, None)


@dataclass
class Tally:
    """How often each bug class was planted, visible, and found."""

    planted: dict[str, int] = field(default_factory=dict)
