"""Replay (TK3xx): re-run a recording's actions in its environment and compare, step by step.

A recording is the files whose metadata's `recording` has the same `id`, in `index` order
(`RolloutRecorder.recording`, saved with `trajkit.save(..., recording=...)`). Its envs are
re-created with `gymnasium.make_vec(env_id, num_envs=B, vectorization_mode="sync",
**env_kwargs)`, and each env b is replayed on its own: reset with `seed + b` (as a vector env
seeds its envs), stepped with the recorded `actions[t, b]`, and reset again, unseeded, where
an episode ends (as every autoreset mode resets it). That is exactly the sequence of real
transitions the recorder kept, whatever the autoreset mode: NEXT_STEP's phantom steps are
neither recorded nor replayed.

Compared, exactly: every observation (in the recorded dtype; the reset ones too), every
reward (as float32), and where episodes end (and whether as truncations). The first
difference of each kind in each env is reported (TK301 observation, at its row; TK302
reward and TK303 episode end, at their step). The env itself depends only on the seed and
the actions, so its replay goes on after a difference in what the file holds, except where
an episode ends in one and not in the other: there that env's replay stops.

A recording that cannot be replayed gives one TK300 note per file, saying why: no env id
or seed, an env id that is not registered, `make_vec` arguments or vector wrappers that were
not recorded, another vectorization mode than sync or async, no `actions`, or a file whose
predecessors in the recording are not among the files linted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from trajkit._base.errors import RolloutFileError
from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._io.filecheck import file_error
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._models.rollout import Rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import Finding

gym: ModuleType = require("gymnasium", "gym", "trajkit lint --replay")

__all__ = ["replay_recordings"]

_REPLAYED_MODES = (None, "sync", "async")  # make_vec modes whose envs are the registered env


def replay_recordings(
    recordings: Sequence[tuple[str, Mapping[str, Any]]],
    options: LintOptions,
    *,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> Iterator[Finding]:
    """Replay every recording among `recordings` (`(path, recording)` pairs, in file order).

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> rec = {"id": "r", "index": 1, "num_envs": 1, "autoreset_mode": "NEXT_STEP",
        ...        "env_id": "CartPole-v1", "seed": 0}
        >>> options = LintOptions(frozenset({"TK300"}))
        >>> [f.message for f in replay_recordings([("b.npz", rec)], options)]
        ... # doctest: +NORMALIZE_WHITESPACE
        ['cannot replay: the recording starts at index 0, which is not among the files (this
          is index 1)']
    """
    groups: dict[str, dict[int, tuple[str, Mapping[str, Any]]]] = defaultdict(dict)
    for path, recording in recordings:
        groups[str(recording["id"])].setdefault(int(recording["index"]), (path, recording))
    for group in groups.values():
        yield from _replay_group([group[i] for i in sorted(group)], options, max_bytes)


def _why_not(recording: Mapping[str, Any]) -> str | None:
    """Why this recording cannot be replayed, or `None`."""
    env_id = recording.get("env_id")
    if not env_id:
        return "the recording names no env id"
    if recording.get("seed") is None:
        return "the first reset was not seeded (RolloutRecorder(seed=...))"
    if recording.get("unrecorded_kwargs"):
        return (
            f"make_vec's arguments {', '.join(recording['unrecorded_kwargs'])} were not "
            "recorded (not JSON)"
        )
    if recording.get("wrappers"):
        return f"the vector wrappers {', '.join(recording['wrappers'])} are not re-created"
    if recording.get("vectorization_mode") not in _REPLAYED_MODES:
        return f"vectorization mode {recording['vectorization_mode']!r} is not replayed"
    try:
        gym.spec(env_id)
    except Exception as exc:  # gymnasium.error.Error subclasses: not registered, ...
        return f"env id {env_id!r} is not registered ({type(exc).__name__})"
    return None


def _notes(
    files: Sequence[tuple[str, Mapping[str, Any]]], reason: str, codes: frozenset[str]
) -> Iterator[Finding]:
    if "TK300" in codes:
        for path, _ in files:
            yield Finding("TK300", f"cannot replay: {reason}", path)


def _replay_group(
    files: list[tuple[str, Mapping[str, Any]]], options: LintOptions, max_bytes: int | None
) -> Iterator[Finding]:
    first = files[0][1]
    if int(first["index"]) != 0:
        yield from _notes(
            files,
            f"the recording starts at index 0, which is not among the files (this is index "
            f"{first['index']})",
            options.codes,
        )
        return
    consecutive = 1
    while consecutive < len(files) and int(files[consecutive][1]["index"]) == consecutive:
        consecutive += 1
    files, missing = files[:consecutive], files[consecutive:]
    reason = _why_not(first)
    if reason is not None:
        yield from _notes(files, reason, options.codes)
    else:
        yield from _Replay(first, options.codes).run(files, max_bytes)
    yield from _notes(
        missing,
        f"index {consecutive} of the recording is not among the files, so what follows it "
        "cannot be replayed",
        options.codes,
    )


def _leaves(tree: Any) -> dict[tuple[Any, ...], AnyArray]:
    return {tuple(path): np.asarray(leaf) for path, leaf in _tree.flatten(tree)}


def _shown(value: AnyArray) -> str:
    """A value as NumPy prints it: float32 with the digits float32 has."""
    return str(value[()]) if value.ndim == 0 else np.array2string(value, separator=", ")


class _Replay:
    """One recording, replayed env by env."""

    def __init__(self, recording: Mapping[str, Any], codes: frozenset[str]) -> None:
        self.recording = recording
        self.codes = codes
        self.num_envs = int(recording["num_envs"])
        self.seed = int(recording["seed"])
        self.vector: Any = None
        self.current: list[Any] = []  # env b's current observation
        self.done = [False] * self.num_envs  # env b's episodes no longer match the file's
        self.reported: list[set[str]] = [set() for _ in range(self.num_envs)]

    def run(
        self, files: Sequence[tuple[str, Mapping[str, Any]]], max_bytes: int | None
    ) -> Iterator[Finding]:
        self.vector = gym.make_vec(
            self.recording["env_id"],
            num_envs=self.num_envs,
            vectorization_mode="sync",
            **dict(self.recording.get("env_kwargs") or {}),
        )
        try:
            for k, (path, _) in enumerate(files):
                try:
                    rollout = load(path, mmap=True, max_bytes=max_bytes)
                except RolloutFileError as exc:
                    yield from _notes(
                        files[k:], f"cannot load {path}: {file_error(exc)}", self.codes
                    )
                    return
                if "actions" not in rollout.model_outs.arrays:
                    yield from _notes(files[k:], f"{path} has no actions", self.codes)
                    return
                yield from self._file(path, rollout, first=k == 0)
                if all(self.done):
                    return
        finally:
            self.vector.close()

    def _file(self, path: str, r: Rollout, *, first: bool) -> Iterator[Finding]:
        envs = self.vector.envs
        actions = r.model_outs.arrays["actions"]
        for b in range(self.num_envs):
            if self.done[b]:
                continue
            if first:
                obs, _ = envs[b].reset(seed=self.seed + b)
                self.current.append(obs)
            found = [self._compare_obs(path, r, 0, b)]
            found += self._column(path, r, b, envs[b], actions)
            for finding in found:
                if finding is not None and finding.code not in self.reported[b]:
                    self.reported[b].add(finding.code)
                    if finding.code in self.codes:
                        yield finding

    def _column(
        self, path: str, r: Rollout, b: int, env: Any, actions: AnyArray
    ) -> list[Finding | None]:
        """Replay env b through `r`: its differences, the first of each kind.

        An episode that ends in the env and not in the file, or the other way, stops the
        replay of env b (the env and the file no longer start episodes together).
        """
        space = env.action_space
        trunc = r.truncated
        found: list[Finding | None] = []
        for t in range(r.num_steps):
            action = actions[t, b]
            if isinstance(space, gym.spaces.Discrete):
                sent: Any = int(action)
            else:
                sent = np.asarray(action).astype(space.dtype)
            obs, reward, terminated, truncated, _ = env.step(sent)
            if np.float32(reward) != r.rews[t, b] and "TK302" not in self.reported[b]:
                found.append(
                    Finding(
                        "TK302",
                        f"replay gives reward {float(np.float32(reward))!r} at step {t}, the "
                        f"file holds {float(r.rews[t, b])!r}",
                        path,
                        b,
                        t,
                    )
                )
            ended = bool(terminated or truncated)
            cut = bool(truncated and not terminated)
            says_end = bool(r.dones[t + 1, b] == 1)
            says_cut = says_end and trunc is not None and bool(trunc[t, b] == 1)
            if ended != says_end or (trunc is not None and cut != says_cut):
                what = "truncates" if cut else "terminates" if ended else "does not end"
                held = "a truncation" if says_cut else "an episode end" if says_end else "no end"
                found.append(
                    Finding(
                        "TK303",
                        f"replay {what} the episode at step {t}, the file holds {held} "
                        f"(dones[{t + 1}] = {int(r.dones[t + 1, b])})",
                        path,
                        b,
                        t,
                    )
                )
                if ended != says_end:
                    self.done[b] = True
                    return found
            if ended:
                obs, _ = env.reset()
            self.current[b] = obs
            if "TK301" not in self.reported[b]:
                found.append(self._compare_obs(path, r, t + 1, b))
        return found

    def _compare_obs(self, path: str, r: Rollout, row: int, b: int) -> Finding | None:
        replayed = _leaves(self.current[b])
        for leaf_path, leaf in _tree.flatten(r.obses):
            name = _tree.format_path("obses", leaf_path)
            held = leaf[row, b]
            got = replayed.get(tuple(leaf_path))
            if got is None:
                return Finding("TK301", f"replay gives no {name}", path, b, row)
            got = np.asarray(got)
            if got.shape != held.shape or not np.array_equal(got.astype(held.dtype), held):
                where = ""
                if got.shape == held.shape and held.ndim:
                    i = tuple(int(x) for x in np.argwhere(got.astype(held.dtype) != held)[0])
                    where = f"[..., {', '.join(map(str, i))}]"
                    got, held = got[i], held[i]
                return Finding(
                    "TK301",
                    f"replay gives another observation at row {row}: {name}{where} is "
                    f"{_shown(got)} in the env, {_shown(np.asarray(held))} in the file",
                    path,
                    b,
                    row,
                )
        return None
