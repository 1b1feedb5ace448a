"""Replay (TK3xx): re-run a recording's actions in its environment and compare, step by step.

A recording is the files whose metadata's `recording` has the same `id`, in `index` order
(`RolloutRecorder.recording`, saved with `trajkit.save(..., recording=...)`). Its B envs are
re-created with `gymnasium.make(spec, **env_kwargs)` from the registered spec of `env_id` (as
`make_vec(..., vectorization_mode="sync")` makes each of its envs), and each env b is
replayed on its own: reset with `seed + b` (as a vector env seeds its envs), stepped with the
recorded `actions[t, b]`, and reset again, unseeded, where an episode ends (as every
autoreset mode resets it). That is exactly the sequence of real transitions the recorder
kept, whatever the autoreset mode: NEXT_STEP's phantom steps are neither recorded nor
replayed.

Compared, exactly: every observation (in the recorded dtype; the reset ones too, and the
final ones where the file holds `final_obses`), every reward (as float32), and where episodes
end (and whether as truncations). The first
difference of each kind in each env is reported (TK301 observation, at its row; TK302
reward and TK303 episode end, at their step). The env itself depends only on the seed and
the actions, so its replay goes on after a difference in what the file holds, except where
an episode ends in one and not in the other: there that env's replay stops.

**A file is not trusted.** Its env arguments reach the constructor of a registered env, so
replay passes only what trajkit's recorder writes: arguments named by the registration or
by the env's constructor, `max_episode_steps` (an integer >= 1) and `disable_env_checker` (a
bool); it never passes `render_mode` (replay does not render) or `vector_kwargs` (it steps
each env on its own), and refuses `num_envs` and `vectorization_mode` (the recorder keeps
them apart). Other arguments are passed only with `trust_env_args`. Env ids are looked up in
Gymnasium's registry, never imported from a `module:` prefix.

**Every file is accounted for.** A file that is not replayed gives one TK300 note, saying
why, and the other findings stand: no recording; a recording index that an earlier file
already holds (a recording captured once and saved with every file: only the first is
placed); no env id or seed, an env id that is not registered, env arguments refused as
above, `make_vec` arguments or vector wrappers that were not recorded, another vectorization
mode than sync or async, an env that cannot be made (arguments it refuses, a missing
optional dependency) or reset, no `actions`; a file whose predecessors in the recording are
not among the files linted; or one after the file where every env's replay stopped. An env
that raises while it is stepped gives a TK300 note at that env and step, and its replay
stops there. `replay_recordings` lists the files it replayed.
"""

from __future__ import annotations

import contextlib
import inspect
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
from trajkit._models.rules import episode_ends
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import Finding, failed

gym: ModuleType = require("gymnasium", "gym", "trajkit lint --replay")

__all__ = ["env_arguments", "replay_recordings"]

_REPLAYED_MODES = (None, "sync", "async")  # make_vec modes whose envs are the registered env
_RESERVED = ("num_envs", "vectorization_mode")  # make_vec's own: recorded apart, never here
_NOT_PASSED = ("render_mode", "vector_kwargs")  # replay does not render, nor step a vector env
_MAKE_OWN = ("max_episode_steps", "disable_env_checker")  # gymnasium.make's own arguments
_REASON_CHARS = 300


def replay_recordings(
    files: Sequence[tuple[str, Mapping[str, Any] | None]],
    options: LintOptions,
    *,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    replayed: list[str] | None = None,
    failures: list[str] | None = None,
) -> Iterator[Finding]:
    """Replay the recordings among `files` (`(path, recording or None)`, in file order).

    Every file it does not replay gets a TK300 note saying why; `replayed`, when given,
    receives the paths of those it replayed. A replay that raises (a bug in lint, not the
    env's error, which is a finding) stops that recording's replay; `failures`, when given,
    receives it (as `trajkit.lint.registry.failed` words it), and the other recordings are
    replayed.

    Examples:
        >>> from trajkit.lint.config import LintOptions
        >>> rec = {"id": "r", "index": 1, "num_envs": 1, "autoreset_mode": "NEXT_STEP",
        ...        "env_id": "CartPole-v1", "seed": 0}
        >>> options = LintOptions(frozenset({"TK300"}))
        >>> [f.message for f in replay_recordings([("a.npz", None), ("b.npz", rec)], options)]
        ... # doctest: +NORMALIZE_WHITESPACE
        ['cannot replay: the file has no recording (trajkit.save(..., recording=...))',
         'cannot replay: the recording starts at index 0, which is not among the files (this
          is index 1)']
    """
    groups: dict[str, dict[int, tuple[str, Mapping[str, Any]]]] = defaultdict(dict)
    for path, recording in files:
        if recording is None:
            yield from _notes([(path, {})], _NO_RECORDING, options.codes)
            continue
        group = groups[str(recording["id"])]
        first = group.setdefault(int(recording["index"]), (path, recording))[0]
        if first != path:
            why = f"{first} holds index {recording['index']} of this recording too, and is replayed"
            yield from _notes([(path, recording)], why, options.codes)
    done = [] if replayed is None else replayed
    for rid, group in groups.items():
        try:
            yield from _replay_group([group[i] for i in sorted(group)], options, max_bytes, done)
        except Exception as exc:  # a bug in replay: reported, the other recordings replayed
            if failures is None:
                raise
            failures.append(failed(f"the replay of recording {rid}", exc))


_NO_RECORDING = "the file has no recording (trajkit.save(..., recording=...))"


class _RefusedError(ValueError):
    """Env arguments that replay does not pass (the message says which and why)."""


def _reason(exc: BaseException) -> str:
    """An exception as one line: `TypeError: ...`, cut at a few hundred characters."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def _why_not(recording: Mapping[str, Any]) -> str | None:
    """Why this recording cannot be replayed (before any env is made), or `None`."""
    env_id = recording.get("env_id")
    if not env_id:
        return "the recording names no env id"
    seed = recording.get("seed")
    if seed is None:
        return "the first reset was not seeded (RolloutRecorder(seed=...))"
    if seed < 0:
        return f"the seed {seed} is negative (Gymnasium seeds are integers >= 0)"
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


def _constructor_arguments(spec: Any) -> set[str]:
    """The keyword arguments the registered env's constructor names (its module is imported)."""
    creator = spec.entry_point
    if isinstance(creator, str):
        creator = gym.envs.registration.load_env_creator(creator)
    try:
        parameters = inspect.signature(creator).parameters.values()
    except (TypeError, ValueError):  # a builtin or a C extension: no signature to read
        return set()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in parameters if p.kind in named}


def env_arguments(
    recording: Mapping[str, Any], spec: Any, *, trust: bool = False
) -> dict[str, Any]:
    """The keyword arguments replay passes to `gymnasium.make(spec, ...)` for `recording`.

    Without `trust`, only what trajkit's recorder writes: arguments the registration (its
    `kwargs`) or the env's constructor names, `max_episode_steps` (an integer >= 1 or
    null) and `disable_env_checker` (a bool or null). `render_mode` and `vector_kwargs`
    are never passed; `num_envs`, `vectorization_mode` and a non-empty `wrappers` are
    always refused.

    Raises:
        ValueError: Saying which arguments are refused and why.

    Examples:
        >>> import gymnasium as gym
        >>> rec = {"env_kwargs": {"max_episode_steps": 9, "render_mode": "human"}}
        >>> env_arguments(rec, gym.spec("CartPole-v1"))
        {'max_episode_steps': 9}
        >>> try:
        ...     env_arguments({"env_kwargs": {"num_envs": 3}}, gym.spec("CartPole-v1"))
        ... except ValueError as exc:
        ...     print(exc)
        env_kwargs holds num_envs, which trajkit's recorder keeps apart
    """
    given = dict(recording.get("env_kwargs") or {})
    reserved = [key for key in _RESERVED if key in given]
    if reserved:
        raise _RefusedError(
            f"env_kwargs holds {', '.join(reserved)}, which trajkit's recorder keeps apart"
        )
    if given.pop("wrappers", None):
        raise _RefusedError("env_kwargs holds wrappers, which are not re-created")
    kwargs = {k: v for k, v in given.items() if k not in _NOT_PASSED}
    if not trust:
        _check_make_arguments(kwargs)
        _check_named(kwargs, spec)
    return kwargs


def _check_make_arguments(kwargs: Mapping[str, Any]) -> None:
    """`gymnasium.make`'s own arguments: a time limit >= 1 and a bool (or null)."""
    limit = kwargs.get("max_episode_steps")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise _RefusedError(f"env_kwargs max_episode_steps must be an integer >= 1, got {limit!r}")
    checker = kwargs.get("disable_env_checker")
    if checker is not None and not isinstance(checker, bool):
        raise _RefusedError(f"env_kwargs disable_env_checker must be a bool, got {checker!r}")


def _check_named(kwargs: Mapping[str, Any], spec: Any) -> None:
    """Every other argument is named by the registration or by the env's constructor."""
    known = {*_MAKE_OWN, *(spec.kwargs or {})}
    others = [key for key in kwargs if key not in known]
    if not others:
        return
    named = _constructor_arguments(spec)
    refused = sorted(key for key in others if key not in named)
    if refused:
        raise _RefusedError(
            f"env_kwargs {', '.join(refused)} are not arguments of {spec.id}'s "
            "registration or constructor (replay them with --replay-trust-env-args, "
            "or trust_env_args=True, if you trust this file)"
        )


def _notes(
    files: Sequence[tuple[str, Mapping[str, Any]]], reason: str, codes: frozenset[str]
) -> Iterator[Finding]:
    if "TK300" in codes:
        for path, _ in files:
            yield Finding("TK300", f"cannot replay: {reason}", path)


def _replay_group(
    files: list[tuple[str, Mapping[str, Any]]],
    options: LintOptions,
    max_bytes: int | None,
    replayed: list[str],
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
        yield from _Replay(first, options).run(files, max_bytes, replayed)
    yield from _notes(
        missing,
        f"index {consecutive} of the recording is not among the files, so what follows it "
        "cannot be replayed",
        options.codes,
    )


def _leaves(tree: Any) -> dict[tuple[Any, ...], AnyArray]:
    return {tuple(path): np.asarray(leaf) for path, leaf in _tree.flatten(tree)}


def _compare(
    got_tree: Any,
    held: list[tuple[Any, AnyArray]],
    field: str,
    what: str,
    place: tuple[str, int, int],
) -> Finding | None:
    """TK301 at `place` (path, env, step or row) where the env's value differs from the file's."""
    replayed = _leaves(got_tree)
    path, b, t = place
    for leaf_path, value in held:
        name = _tree.format_path(field, leaf_path)
        got = replayed.get(tuple(leaf_path))
        if got is None:
            return Finding("TK301", f"replay gives no {name}", path, b, t)
        got = np.asarray(got)
        if got.shape != value.shape or not np.array_equal(got.astype(value.dtype), value):
            where = ""
            if got.shape == value.shape and value.ndim:
                i = tuple(int(x) for x in np.argwhere(got.astype(value.dtype) != value)[0])
                where = f"[..., {', '.join(map(str, i))}]"
                got, value = got[i], value[i]
            return Finding(
                "TK301",
                f"replay gives {what}: {name}{where} is {_shown(got)} in the env, "
                f"{_shown(np.asarray(value))} in the file",
                path,
                b,
                t,
            )
    return None


def _shown(value: AnyArray) -> str:
    """A value as NumPy prints it: float32 with the digits float32 has."""
    return str(value[()]) if value.ndim == 0 else np.array2string(value, separator=", ")


class _Replay:
    """One recording, replayed env by env."""

    def __init__(self, recording: Mapping[str, Any], options: LintOptions) -> None:
        self.recording = recording
        self.codes = options.codes
        self.trust = options.trust_env_args
        self.num_envs = int(recording["num_envs"])
        self.seed = int(recording["seed"])
        self.envs: list[Any] = []
        self.at: int | None = None  # the step of env b being replayed (None: its reset)
        self.current: list[Any] = [None] * self.num_envs  # env b's current observation
        self.done = [False] * self.num_envs  # env b's episodes no longer match the file's
        self.reported: list[set[str]] = [set() for _ in range(self.num_envs)]

    def run(
        self,
        files: Sequence[tuple[str, Mapping[str, Any]]],
        max_bytes: int | None,
        replayed: list[str],
    ) -> Iterator[Finding]:
        try:
            for k, (path, _) in enumerate(files):
                if all(self.done):
                    why = f"the replay of every env stopped in {files[k - 1][0]} or before"
                    yield from _notes(files[k:], why, self.codes)
                    return
                rollout, problem = self._load(path, max_bytes)
                if problem is None and not self.envs:
                    problem = self._make()
                if problem is not None or rollout is None:
                    yield from _notes(files[k:], problem or "", self.codes)
                    return
                yield from self._file(path, rollout, first=k == 0)
                replayed.append(path)
        finally:
            for env in self.envs:
                with contextlib.suppress(Exception):  # a failing close changes no finding
                    env.close()

    def _load(self, path: str, max_bytes: int | None) -> tuple[Rollout | None, str | None]:
        """The file's rollout, or why it cannot be replayed."""
        try:
            rollout = load(path, mmap=True, max_bytes=max_bytes)
        except RolloutFileError as exc:
            return None, f"cannot load {path}: {file_error(exc)}"
        if "actions" not in rollout.model_outs.arrays:
            return None, f"{path} has no actions"
        if rollout.batch_size != self.num_envs:
            return None, (
                f"{path} holds {rollout.batch_size} env(s), but recording "
                f"{self.recording['id']} has num_envs = {self.num_envs}"
            )
        return rollout, None

    def _make(self) -> str | None:
        """Make the recording's B envs; why they cannot be made, or `None`."""
        env_id = self.recording["env_id"]
        spec = gym.spec(env_id)
        try:
            kwargs = env_arguments(self.recording, spec, trust=self.trust)
        except _RefusedError as exc:
            return str(exc)
        except Exception as exc:  # the env's module cannot be imported: a missing dependency
            return f"cannot make env {env_id!r}: {_reason(exc)}"
        try:
            for _ in range(self.num_envs):
                self.envs.append(gym.make(spec, **kwargs))
        except Exception as exc:  # arguments the env refuses, a missing dependency, ...
            shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
            called = f"{env_id!r}({shown})" if shown else repr(env_id)
            return f"cannot make env {called}: {_reason(exc)}"
        return None

    def _file(self, path: str, r: Rollout, *, first: bool) -> Iterator[Finding]:
        actions = r.model_outs.arrays["actions"]
        for b in range(self.num_envs):
            if self.done[b]:
                continue
            found: list[Finding | None] = []
            self.at = None
            try:
                if first:
                    self.current[b], _ = self.envs[b].reset(seed=self.seed + b)
                found.append(self._compare_obs(path, r, 0, b))
                self._column(path, r, b, self.envs[b], actions, found)
            except Exception as exc:  # the env raised: that env cannot be replayed further
                self.done[b] = True
                what = (
                    f"step {self.at}" if self.at is not None else "its reset" if first else "row 0"
                )
                found.append(
                    Finding(
                        "TK300",
                        f"cannot replay env {b} past {what}: the env raised {_reason(exc)}",
                        path,
                        b,
                        self.at,
                    )
                )
            for finding in found:
                if finding is not None and finding.code not in self.reported[b]:
                    self.reported[b].add(finding.code)
                    if finding.code in self.codes:
                        yield finding

    def _column(
        self,
        path: str,
        r: Rollout,
        b: int,
        env: Any,
        actions: AnyArray,
        found: list[Finding | None],
    ) -> None:
        """Replay env b through `r`; its differences, the first of each kind, go to `found`.

        An episode that ends in the env and not in the file, or the other way, stops the
        replay of env b (the env and the file no longer start episodes together).
        """
        space = env.action_space
        for t in range(r.num_steps):
            self.at = t
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
            if not self._ends_alike(
                path, r, b, t, ended, bool(truncated and not terminated), found
            ):
                self.done[b] = True
                return
            if ended and "TK301" not in self.reported[b]:
                found.append(self._compare_final(path, r, obs, t, b))
            if ended:
                obs, _ = env.reset()
            self.current[b] = obs
            if "TK301" not in self.reported[b]:
                found.append(self._compare_obs(path, r, t + 1, b))

    @staticmethod
    def _ends_alike(
        path: str, r: Rollout, b: int, t: int, ended: bool, cut: bool, found: list[Finding | None]
    ) -> bool:
        """TK303 where step t ends (or cuts) otherwise in the env; False where one ends alone."""
        trunc = r.truncated
        says_end = bool(r.dones[t + 1, b] == 1)
        says_cut = says_end and trunc is not None and bool(trunc[t, b] == 1)
        if ended == says_end and (trunc is None or cut == says_cut):
            return True
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
        return ended == says_end

    def _compare_obs(self, path: str, r: Rollout, row: int, b: int) -> Finding | None:
        held = [(p, leaf[row, b]) for p, leaf in _tree.flatten(r.obses)]
        where = f"another observation at row {row}"
        return _compare(self.current[b], held, "obses", where, (path, b, row))

    def _compare_final(self, path: str, r: Rollout, obs: Any, t: int, b: int) -> Finding | None:
        """The env's final observation of the episode step t ends, against `final_obses`."""
        if r.final_obses is None:
            return None
        ends = np.argwhere(episode_ends(r.dones))
        e = int(np.flatnonzero((ends[:, 0] == t) & (ends[:, 1] == b))[0])
        held = [(p, np.asarray(leaf)[e]) for p, leaf in _tree.flatten(r.final_obses)]
        where = f"another final observation at step {t}"
        return _compare(obs, held, "final_obses", where, (path, b, t))
