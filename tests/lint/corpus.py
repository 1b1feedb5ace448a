"""A corpus of recordings of real Gymnasium envs, clean and with bugs planted as people write them.

Each `Case` is a set of files (a folder to lint): recorded by `RolloutRecorder` in an autoreset
mode, or by a hand-written loop over a vector env (CleanRL-style, done right), with a random
(softmax, `log_probs` stored), an epsilon-greedy or a good (scripted or tabular-optimal)
policy, in files shorter than the episodes. A case with a bug is the same hand-written loop
with one line written the way people write it, and it knows where the bug shows: per file,
the (env, step) places a finding of its check may point at.

Bug classes (`Bug`) and the check that must find them:

- `phantom` (TK108): every `env.step` of a NEXT_STEP vector env kept, `done = terminated |
  truncated` stored on the next row, the autoreset step too;
- `late_rewards` (TK102): `rews[t]` is the reward of the step before (`prev_reward`);
- `truncation_as_termination` (TK101): `truncated` not stored, truncations flagged as ends;
- `truncation_dropped` (TK105): `done = terminated`, a truncation is no episode end;
- `dones_early` (TK109): `dones[t]` says whether step t ended an episode (SB3's convention);
- `actions_late` (TK103): the action appended after `env.step`, one row late;
- `seeded_alike` (TK112): `envs.reset(seed=[seed] * B)`;
- `logp_unclipped` (TK110): the log-probability of the unclipped Gaussian sample beside the
  clipped action;
- `rewards_clipped` (TK111): `np.clip(reward, -1, 1)` stored, with a recording of the raw env;
- `reward_scaled` (TK202): the last file's rewards scaled (a reward wrapper switched on);
- `saved_twice` (TK203): the last file saved again under another name;
- `unclipped_actions` (TK107): the unclipped Gaussian sample stored as the action (with its
  own log-probability), which the env clips.

Each case is built once per process (`build`, cached): all of them in about 6 seconds on one core.
"""

from __future__ import annotations

import functools
import os
import types
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from trajkit import Rollout

Bug = Literal[
    "phantom",
    "late_rewards",
    "truncation_as_termination",
    "truncation_dropped",
    "dones_early",
    "actions_late",
    "seeded_alike",
    "logp_unclipped",
    "rewards_clipped",
    "reward_scaled",
    "saved_twice",
    "unclipped_actions",
]

PLANTED: dict[str, str] = {
    "phantom": "TK108",
    "late_rewards": "TK102",
    "truncation_as_termination": "TK101",
    "truncation_dropped": "TK105",
    "dones_early": "TK109",
    "actions_late": "TK103",
    "seeded_alike": "TK112",
    "logp_unclipped": "TK110",
    "rewards_clipped": "TK111",
    "reward_scaled": "TK202",
    "saved_twice": "TK203",
    "unclipped_actions": "TK107",
}
"""The check that must find each bug class."""

Place = tuple[int, int]  # (env, step or row)
Policy = Callable[[Any], dict[str, Any]]


@dataclass
class Case:
    """One set of files: how it was made, and where its planted bug shows (per file)."""

    name: str
    env_id: str
    bug: Bug | None
    files: list[tuple[Rollout, dict[str, Any] | None]] = field(default_factory=list)
    places: list[set[Place]] = field(default_factory=list)

    @property
    def code(self) -> str | None:
        """The check that must find the planted bug (None when clean)."""
        return None if self.bug is None else PLANTED[self.bug]


# ------------------------------------------------------------------------------- policies


@functools.cache
def _tabular(env_id: str, slippery: bool = True) -> Any:
    """An optimal action per state of a tabular env, by value iteration over its `P`."""
    import gymnasium as gym

    env = gym.make(env_id, **({"is_slippery": slippery} if env_id == "FrozenLake-v1" else {}))
    P = env.unwrapped.P  # type: ignore[attr-defined]
    env.close()
    S, A = len(P), len(P[0])
    K = max(len(P[s][a]) for s in range(S) for a in range(A))
    prob, nxt, rew = np.zeros((S, A, K)), np.zeros((S, A, K), dtype=np.int64), np.zeros((S, A, K))
    go = np.zeros((S, A, K))
    for s in range(S):
        for a in range(A):
            for k, (p, s2, r, d) in enumerate(P[s][a]):
                prob[s, a, k], nxt[s, a, k], rew[s, a, k], go[s, a, k] = p, s2, r, not d
    value = np.zeros(S)
    for _ in range(300):
        q = (prob * (rew + 0.99 * go * value[nxt])).sum(-1)
        value = q.max(axis=1)
    return q.argmax(axis=1)


def _good_actions(env_id: str, obs: Any, table: Any) -> Any:
    """The scripted or tabular-optimal action per env."""
    if table is not None:
        return table[np.asarray(obs)]
    if env_id == "CartPole-v1":
        return (obs[:, 2] + 0.3 * obs[:, 3] > 0).astype(np.int64)
    if env_id == "MountainCar-v0":
        return np.where(obs[:, 1] > 0, 2, 0)
    if env_id == "Acrobot-v1":
        return np.where(obs[:, 4] > 0, 2, 0)
    if env_id == "Blackjack-v1":
        return (obs[0] < 17).astype(np.int64)  # the dealer's rule: hit below 17
    if env_id == "LunarLander-v3":  # Gymnasium's own heuristic lander
        from gymnasium.envs.box2d.lunar_lander import heuristic

        discrete = types.SimpleNamespace(unwrapped=types.SimpleNamespace(continuous=False))
        return np.array([heuristic(discrete, row) for row in obs])  # type: ignore[no-untyped-call]
    raise KeyError(env_id)


def _pendulum_mean(obs: Any, good: bool) -> Any:
    """A swing-up and balance controller (good), or a zero mean (random)."""
    if not good:
        return np.zeros((len(obs), 1))
    cos, sin, speed = obs[:, 0], obs[:, 1], obs[:, 2]
    angle = np.arctan2(sin, cos)
    energy = 0.5 * speed**2 + 10.0 * (cos - 1.0)  # 0 upright at rest
    pump = np.clip(-energy * speed * 2.0, -2.0, 2.0)
    balance = -(12.0 * angle + 2.5 * speed)
    return np.where(cos > 0.85, np.clip(balance, -2.0, 2.0), pump)[:, None]


def make_policy(
    env_id: str, kind: str, num_actions: int | None, rng: np.random.Generator, table: Any = None
) -> Policy:
    """Batch of observations -> model outputs, as the recorder and the loops call it."""

    def discrete(obs: Any) -> dict[str, Any]:
        assert num_actions is not None
        B = len(obs[0]) if isinstance(obs, tuple) else len(obs)
        if kind == "random":
            actor = rng.normal(size=(B, num_actions))
            logp = actor - np.log(np.exp(actor).sum(-1, keepdims=True))
            actions = np.array([rng.choice(num_actions, p=np.exp(row)) for row in logp])
            chosen = logp[np.arange(B), actions]
            return {"actions": actions, "actor": actor, "log_probs": chosen}
        if kind == "left":
            good = np.zeros(B, dtype=np.int64)
        else:
            good = np.asarray(_good_actions(env_id, obs, table)).astype(np.int64)
        actor = np.eye(num_actions)[good] * 4.0
        if kind == "eps":
            explore = rng.random(B) < 0.15
            actions = np.where(explore, rng.integers(0, num_actions, B), good)
            return {"actions": actions, "actor": actor}
        logp = actor - np.log(np.exp(actor).sum(-1, keepdims=True))
        return {"actions": good, "actor": actor, "log_probs": logp[np.arange(B), good]}

    def gaussian(obs: Any) -> dict[str, Any]:
        mean = _pendulum_mean(obs, kind == "good")
        std = np.full_like(mean, 0.2 if kind == "good" else 1.2)
        sample = mean + std * rng.normal(size=mean.shape)
        actions = np.clip(sample, -2.0, 2.0)
        return {"actions": actions, "mean": mean, "std": std, "sample": sample}

    return gaussian if num_actions is None else discrete


def gaussian_logp(x: Any, mean: Any, std: Any) -> Any:
    """The diagonal normal log-density, summed over the last axis."""
    return (-0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)


# ---------------------------------------------------------------------------- recording


def _take(obs: Any, b: int) -> Any:
    return tuple(o[b] for o in obs) if isinstance(obs, tuple) else obs[b]


def _stack(rows: list[Any]) -> Any:
    if isinstance(rows[0], tuple):
        return tuple(np.stack([r[i] for r in rows]) for i in range(len(rows[0])))
    return np.stack(rows)


def _make(env_id: str, B: int, mode: str, limit: int | None, kwargs: dict[str, Any]) -> Any:
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    extra: dict[str, Any] = {} if limit is None else {"max_episode_steps": limit}
    return gym.make_vec(
        env_id,
        num_envs=B,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode[mode]},
        **extra,
        **kwargs,
    )


def _outs_of(outs: dict[str, Any], b: int) -> dict[str, Any]:
    kept = {k: np.asarray(v)[b] for k, v in outs.items()}
    if "mean" in outs:  # the log-probability of the stored (clipped) action
        kept["log_probs"] = gaussian_logp(kept["actions"], kept["mean"], kept["std"])
        kept["unclipped"] = gaussian_logp(np.asarray(outs["sample"])[b], kept["mean"], kept["std"])
    return kept


@dataclass
class _Column:
    """One env's rows and steps, as the hand-written loop stores them."""

    obs: list[Any] = field(default_factory=list)
    flag: list[int] = field(default_factory=list)
    outs: list[dict[str, Any]] = field(default_factory=list)
    rew: list[float] = field(default_factory=list)
    raw: list[float] = field(default_factory=list)  # the env's reward, for late_rewards
    trunc: list[int] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)  # whether the step ended an episode
    phantom: list[int] = field(default_factory=list)
    cuts: list[int] = field(default_factory=list)  # steps the time limit cut


def hand_loop(
    env_id: str,
    policy: Policy,
    *,
    B: int,
    steps: int,
    seed: int,
    limit: int | None,
    bug: Bug | None = None,
    mode: str = "NEXT_STEP",
    kwargs: dict[str, Any] | None = None,
) -> tuple[list[_Column], dict[str, Any]]:
    """A CleanRL-style loop over a vector env, done right, or with `bug` (loop-level bugs)."""
    from trajkit.gym._describe import describe_env

    envs = _make(env_id, B, mode, limit, kwargs or {})
    recording = {
        "id": uuid.uuid4().hex,
        "index": 0,
        **describe_env(envs),
        "num_envs": B,
        "seed": seed,
        "autoreset_mode": mode,
    }
    obs, _ = envs.reset(seed=[seed] * B if bug == "seeded_alike" else seed)
    cols = [_Column() for _ in range(B)]
    flag = np.ones(B, dtype=np.int64)
    pending = np.zeros(B, dtype=bool)  # NEXT_STEP: the next step of env b is the reset step
    while min(len(c.rew) for c in cols) <= steps:  # row steps too
        outs = policy(obs)
        new, rew, term, trunc, _ = envs.step(np.asarray(outs["actions"]))
        for b in range(B):
            c = cols[b]
            keep_phantom = bug == "phantom"
            if pending[b] and not keep_phantom:
                flag[b] = 1  # the reset observation starts the next episode
                continue
            c.obs.append(_take(obs, b))
            c.flag.append(int(flag[b]))
            c.outs.append(_outs_of(outs, b))
            c.rew.append(float(rew[b]))
            c.raw.append(float(rew[b]))
            c.phantom.append(int(pending[b]))
            ended = bool(term[b] or trunc[b])
            cut = bool(trunc[b] and not term[b])
            if cut:
                c.cuts.append(len(c.rew) - 1)
            if bug == "truncation_dropped" and cut:
                ended = cut = False
            if bug == "truncation_as_termination":
                cut = False
            c.trunc.append(int(cut))
            c.ended.append(int(ended))
            flag[b] = int(ended)
        if mode == "NEXT_STEP":
            pending = term | trunc
        obs = new
    envs.close()
    return cols, recording


def _file(
    cols: list[_Column], i: int, T: int, bug: Bug | None, recording: dict[str, Any] | None
) -> tuple[Rollout, dict[str, Any] | None, set[Place]]:
    """File i of the loop's columns: rows [iT, (i+1)T], with the bug's places."""
    B = len(cols)
    lo, hi = i * T, (i + 1) * T
    obs = _stack([_stack(c.obs[lo : hi + 1]) for c in cols])
    obses = (
        tuple(np.swapaxes(o, 0, 1) for o in obs)
        if isinstance(obs, tuple)
        else np.swapaxes(obs, 0, 1)
    )
    flags = np.array([c.flag[lo : hi + 1] for c in cols], dtype=np.float64).T
    rews = np.array([c.rew[lo:hi] for c in cols]).T
    trunc = np.array([c.trunc[lo:hi] for c in cols], dtype=np.float64).T
    keys = [k for k in cols[0].outs[0] if k not in ("unclipped", "sample")]
    outs = {
        k: np.stack([np.stack([o[k] for o in c.outs[lo : hi + 1]]) for c in cols], 1) for k in keys
    }
    places: set[Place] = set()
    R = T + 1
    if bug == "phantom":
        places = {(b, t) for b in range(B) for t in range(T) if cols[b].phantom[lo + t]}
    elif bug == "late_rewards":
        raw = np.array([c.raw[max(lo - 1, 0) : hi] for c in cols]).T
        late = raw[:-1] if lo else np.vstack([np.zeros((1, B)), raw[:-1]])
        places = {(b, t) for t, b in np.argwhere(late != rews)}
        rews = late
    elif bug == "truncation_as_termination":
        places = {(b, d - lo) for b in range(B) for d in cols[b].cuts if lo <= d < hi}
    elif bug == "truncation_dropped":
        places = {(b, d + 1 - lo) for b in range(B) for d in cols[b].cuts if lo <= d + 1 < hi}
    elif bug == "dones_early":
        flags = np.array(
            [[c.ended[t] if t < len(c.ended) else 0 for t in range(lo, hi + 1)] for c in cols],
            dtype=np.float64,
        ).T
        places = {(b, t) for t, b in np.argwhere(flags == 1)}
    elif bug == "actions_late":
        true = outs["actions"]
        before = np.stack(
            [np.stack([o["actions"] for o in c.outs[max(lo - 1, 0) : hi]]) for c in cols], 1
        )
        late = before if lo else np.concatenate([true[:1], before], axis=0)
        outs["actions"] = late[:R]
        places = {(b, t) for t, b in np.argwhere(outs["actions"] != true)}
    elif bug == "seeded_alike":
        places = {(b, t) for t, b in np.argwhere(flags == 1)}
    elif bug == "logp_unclipped":
        clipped = np.stack(
            [np.stack([o["unclipped"] for o in c.outs[lo : hi + 1]]) for c in cols], 1
        )
        places = {(b, t) for t, b in np.argwhere(~np.isclose(clipped, outs["log_probs"]))}
        outs["log_probs"] = clipped
    elif bug == "unclipped_actions":
        sample = np.stack([np.stack([o["sample"] for o in c.outs[lo : hi + 1]]) for c in cols], 1)
        unclipped = np.stack(
            [np.stack([o["unclipped"] for o in c.outs[lo : hi + 1]]) for c in cols], 1
        )
        places = {(b, t) for t, b in np.argwhere((np.abs(sample) > 2.0).any(-1))}
        outs["actions"], outs["log_probs"] = sample, unclipped
    elif bug == "rewards_clipped":
        clipped = np.clip(rews, -1.0, 1.0)
        places = {(b, t) for t, b in np.argwhere(clipped != rews)}
        rews = clipped
    places = {(int(b), int(t)) for b, t in places}
    no_flags = bug in ("truncation_as_termination", "dones_early")
    rollout = Rollout(
        states=np.zeros((R, B, 0)),
        obses=obses,
        rews=rews,
        dones=flags,
        infos=None,
        model_outs=outs,
        truncated=None if no_flags else trunc,
        final_values=None if no_flags else np.zeros((T, B)),
    )
    rec = None if recording is None else {**recording, "index": i}
    return rollout, rec, places


def recorder_case(
    env_id: str,
    kind: str,
    mode: str,
    *,
    B: int,
    T: int,
    files: int,
    seed: int,
    limit: int | None,
    kwargs: dict[str, Any] | None = None,
) -> Case:
    """A clean case recorded by `RolloutRecorder` in autoreset `mode`."""
    from trajkit.gym import RolloutRecorder

    envs = _make(env_id, B, mode, limit, kwargs or {})
    n = getattr(envs.single_action_space, "n", None)
    rng = np.random.default_rng(seed)
    table = _table_for(env_id, kind, kwargs or {})
    policy = make_policy(env_id, kind, None if n is None else int(n), rng, table)

    def recorded(obs: Any) -> dict[str, Any]:
        outs = policy(obs)
        if "mean" in outs:
            outs["log_probs"] = gaussian_logp(outs["actions"], outs["mean"], outs["std"])
            del outs["sample"]
        return outs

    recorder = RolloutRecorder(envs, recorded, seed=seed)
    case = Case(f"{env_id}/recorder-{mode}/{kind}", env_id, None)
    for _ in range(files):
        case.files.append((recorder.record(T), recorder.recording))
        case.places.append(set())
    envs.close()
    return case


def _table_for(env_id: str, kind: str, kwargs: dict[str, Any]) -> Any:
    if kind == "random" or env_id not in ("FrozenLake-v1", "Taxi-v4", "CliffWalking-v1"):
        return None
    return _tabular(env_id, bool(kwargs.get("is_slippery", True)))


def loop_case(
    env_id: str,
    kind: str,
    *,
    B: int,
    T: int,
    files: int,
    seed: int,
    limit: int | None,
    bug: Bug | None = None,
    mode: str = "NEXT_STEP",
    kwargs: dict[str, Any] | None = None,
    recorded: bool = True,
) -> Case:
    """A case recorded by the hand-written loop, clean or with `bug`."""
    import gymnasium as gym

    probe = gym.make(env_id, **(kwargs or {}))
    n = getattr(probe.action_space, "n", None)
    probe.close()
    rng = np.random.default_rng(seed)
    policy = make_policy(
        env_id, kind, None if n is None else int(n), rng, _table_for(env_id, kind, kwargs or {})
    )
    cols, recording = hand_loop(
        env_id,
        policy,
        B=B,
        steps=T * files,
        seed=seed,
        limit=limit,
        bug=bug,
        mode=mode,
        kwargs=kwargs,
    )
    case = Case(f"{env_id}/loop-{mode}/{kind}" + (f"/{bug}" if bug else ""), env_id, bug)
    for i in range(files):
        rollout, rec, places = _file(cols, i, T, bug, recording if recorded else None)
        case.files.append((rollout, rec))
        case.places.append(places)
    if bug == "reward_scaled":
        last = case.files[-1][0]
        last.rews[...] = last.rews * (100.0 if env_id == "Pendulum-v1" else 0.01)
        case.places = [set() for _ in case.files[:-1]] + [{(-1, -1)}]  # the file itself
    if bug == "saved_twice":
        case.files.append(case.files[-1])
        case.places = [set() for _ in case.files[:-1]] + [{(-1, -1)}]
    return case


# ------------------------------------------------------------------------------- the corpus

ENVS: dict[str, dict[str, Any]] = {
    # env id: time limit (None: the env has none), T, files, policies
    "CartPole-v1": {"limit": 40, "T": 16, "files": 4, "kinds": ("random", "eps", "good")},
    "Pendulum-v1": {"limit": 60, "T": 20, "files": 4, "kinds": ("random", "good")},
    "MountainCar-v0": {"limit": 60, "T": 16, "files": 4, "kinds": ("random", "good")},
    "Acrobot-v1": {"limit": 60, "T": 16, "files": 4, "kinds": ("random", "eps")},
    "FrozenLake-v1": {"limit": 8, "T": 16, "files": 4, "kinds": ("random", "eps", "good")},
    "Blackjack-v1": {"limit": None, "T": 16, "files": 3, "kinds": ("random", "good")},
    "Taxi-v4": {"limit": 50, "T": 16, "files": 4, "kinds": ("random", "eps", "good")},
    "CliffWalking-v1": {"limit": None, "T": 8, "files": 6, "kinds": ("eps", "good")},
    "LunarLander-v3": {"limit": 400, "T": 64, "files": 4, "kinds": ("random", "good")},
}
"""The envs of the corpus and how they are recorded (files shorter than the episodes)."""

BUGS: dict[str, tuple[tuple[str, str], ...]] = {
    "phantom": (
        ("CartPole-v1", "random"),
        ("Pendulum-v1", "random"),
        ("MountainCar-v0", "random"),
        ("Acrobot-v1", "random"),
        ("FrozenLake-v1", "random"),
        ("Blackjack-v1", "random"),
        ("Taxi-v4", "random"),
        ("CliffWalking-v1", "good"),
        ("LunarLander-v3", "random"),
    ),
    "late_rewards": (("FrozenLake-v1", "good"), ("Taxi-v4", "good")),
    "truncation_as_termination": (
        ("CartPole-v1", "good"),
        ("Pendulum-v1", "good"),
        ("MountainCar-v0", "random"),
        ("Acrobot-v1", "random"),
    ),
    "truncation_dropped": (
        ("CartPole-v1", "good"),
        ("Pendulum-v1", "random"),
        ("Taxi-v4", "random"),
    ),
    "dones_early": (  # envs whose episodes terminate (no truncation: that would be TK101's)
        ("CartPole-v1", "random"),
        ("CartPole-v1", "left"),
        ("LunarLander-v3", "random"),
    ),
    "actions_late": (
        ("CartPole-v1", "random"),
        ("CartPole-v1", "eps"),
        ("CartPole-v1", "good"),
        ("Acrobot-v1", "eps"),
        ("FrozenLake-v1", "random"),
        ("Taxi-v4", "eps"),
    ),
    "seeded_alike": (
        ("CartPole-v1", "random"),
        ("Pendulum-v1", "random"),
        ("Acrobot-v1", "random"),
        ("MountainCar-v0", "random"),
    ),
    "logp_unclipped": (("Pendulum-v1", "random"), ("Pendulum-v1", "good")),
    "rewards_clipped": (("Pendulum-v1", "random"), ("Pendulum-v1", "good")),
    "reward_scaled": (
        ("CartPole-v1", "random"),
        ("Pendulum-v1", "random"),
        ("MountainCar-v0", "random"),
    ),
    "saved_twice": (("Taxi-v4", "random"), ("Pendulum-v1", "good")),
    "unclipped_actions": (("Pendulum-v1", "random"), ("Pendulum-v1", "good")),
}
"""Each bug class, planted in the hand-written loop over these envs and policies."""

_LIMITS = {
    ("MountainCar-v0", "good", None): 200,
    ("Acrobot-v1", "random", None): 30,
    ("CartPole-v1", "random", "dones_early"): 500,
    ("CartPole-v1", "left", "dones_early"): 500,
    ("LunarLander-v3", "random", "dones_early"): 1000,
}
_KWARGS = {("FrozenLake-v1", "late_rewards"): {"is_slippery": False}}
_SAME_STEP_BUGS = ("truncation_dropped",)


def box2d_available() -> bool:
    """Whether the Box2D envs can be made (`pip install box2d pygame`).

    Box2D's SWIG module warns while it loads, and crashes the interpreter when that warning
    is an error (pytest's `filterwarnings = error`): it is imported here with the warnings off.
    """
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import Box2D  # type: ignore[import-untyped]  # noqa: F401
            import pygame  # noqa: F401
    except ImportError:
        return False
    return True


def case_names() -> list[str]:
    """Every case of the corpus, by name: `ENV/MAKER/POLICY[/BUG]`."""
    names = []
    for env_id, spec in ENVS.items():
        if env_id.startswith("LunarLander") and not box2d_available():
            continue
        for mode in ("NEXT_STEP", "SAME_STEP", "DISABLED"):
            names.append(f"{env_id}/recorder-{mode}/random" if "random" in spec["kinds"] else "")
        for kind in spec["kinds"]:
            names.append(f"{env_id}/recorder-NEXT_STEP/{kind}")
            names += [f"{env_id}/loop-{mode}/{kind}" for mode in ("NEXT_STEP", "SAME_STEP")]
    for bug, where in BUGS.items():
        for env_id, kind in where:
            if env_id.startswith("LunarLander") and not box2d_available():
                continue
            mode = "SAME_STEP" if bug in _SAME_STEP_BUGS else "NEXT_STEP"
            names.append(f"{env_id}/loop-{mode}/{kind}/{bug}")
    names += ["CartPole-v1/recorder-NEXT_STEP/left-at-limit", "Pendulum-v1/loop-mixed/good+random"]
    return sorted({n for n in names if n})


@functools.cache
def build(name: str) -> Case:
    """The case `name` (built once per process)."""
    env_id, maker, kind, *rest = name.split("/")
    bug: Bug | None = rest[0] if rest else None  # type: ignore[assignment]
    spec = ENVS[env_id]
    seed = sum(map(ord, name)) % 1000
    limit = _LIMITS.get((env_id, kind, bug), _LIMITS.get((env_id, kind, None), spec["limit"]))
    shape = {"B": 2, "T": spec["T"], "files": spec["files"], "seed": seed}
    if kind == "left-at-limit":  # CartPole pushed left falls at the very step its limit cuts
        return _at_limit(seed)
    if maker == "loop-mixed":  # a swing-up controller's 50-step files beside random ones
        good = loop_case(env_id, "good", B=2, T=50, files=4, seed=seed, limit=200)
        rand = loop_case(env_id, "random", B=2, T=50, files=2, seed=seed + 1, limit=200)
        return Case(name, env_id, None, good.files + rand.files, good.places + rand.places)
    if maker.startswith("recorder-"):
        mode = maker.removeprefix("recorder-")
        return recorder_case(env_id, kind, mode, limit=limit, **shape)
    mode = maker.removeprefix("loop-")
    kwargs = _KWARGS.get((env_id, bug or ""))
    return loop_case(env_id, kind, limit=limit, bug=bug, mode=mode, kwargs=kwargs, **shape)


def _at_limit(seed: int) -> Case:
    import gymnasium as gym

    def falls(seed: int) -> int:
        probe = gym.make("CartPole-v1")
        probe.reset(seed=seed)
        length = 1
        while not probe.step(0)[2]:
            length += 1
        probe.close()
        return length

    while falls(seed) == falls(seed + 1):  # one env of two terminates at the limit
        seed += 1
    length = falls(seed)
    case = recorder_case(
        "CartPole-v1", "left", "NEXT_STEP", B=2, T=8, files=4, seed=seed, limit=length
    )
    case.name = "CartPole-v1/recorder-NEXT_STEP/left-at-limit"
    return case
