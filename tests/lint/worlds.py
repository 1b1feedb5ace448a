"""Generated clean recordings for measuring `trajkit lint` (the generated corpora).

`sample_world(rng)` draws what real data varies: the env (the configurable `SynthEnv` of
`tests/lint/synth.py`, with its spaces, rewards, episode ends, starts and noise, or a real
Gymnasium env), its time limit, B, T and the number of files, the autoreset mode, vector
wrappers, the policy (stochastic or deterministic, with or without its outputs) and who
records: trajkit's `RolloutRecorder`, or a user's hand-written loop done right for its mode
(with or without a recording, `truncated` and `final_obses`). `clean_set(world)` records it
and returns the files a user would save.

The hand loop keeps every env's real transitions as a `Column` (and, under NEXT_STEP, the
autoreset steps it drops), so that `tests/lint/plant.py` can write the same data with a bug.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tests.lint import synth
from trajkit import Rollout

Outs = dict[str, Any]
Policy = Callable[[Any], Outs]
File = tuple[Rollout, dict[str, Any] | None]

# --------------------------------------------------------------------------- the worlds

REAL_ENVS: dict[str, dict[str, Any]] = {
    # env id: its own time limit (None: none), and `"start": "fixed"` where every reset
    # lands on one state (FrozenLake's and CliffWalking's start cell); the others' are random
    "CartPole-v1": {"limit": 500},
    "MountainCar-v0": {"limit": 200},
    "Acrobot-v1": {"limit": 500},
    "Pendulum-v1": {"limit": 200},
    "MountainCarContinuous-v0": {"limit": 999},
    "FrozenLake-v1": {"limit": 100, "start": "fixed"},
    "Taxi-v4": {"limit": 200},
    "CliffWalking-v1": {"limit": None, "start": "fixed"},
    "Blackjack-v1": {"limit": None},
    "LunarLander-v3": {"limit": 1000},
}

VECTOR_WRAPPERS = (
    "RecordEpisodeStatistics",
    "NormalizeReward",
    "ClipReward",
    "NormalizeObservation",
    "ClipAction",
    "env:RecordEpisodeStatistics",  # an env wrapper, through make_vec(wrappers=...)
)


@dataclass(frozen=True)
class World:
    """One generated recording set: the env, how it is stepped and who records it.

    Attributes:
        env_id: The registered env id (`TrajkitSynth-v0` or a real env).
        config: `SynthEnv`'s config (`{}` for a real env).
        limit: The time limit passed to `make_vec` (`None`: the env's own, or none).
        B, T, files: Envs, steps per file, files.
        mode: The autoreset mode.
        maker: `recorder` or `loop` (a user's hand-written loop).
        recorded: The loop saves a recording (the recorder always does).
        finals: The loop stores `final_obses`.
        policy: The policy's kind (see `make_policy`).
        wrapper: A vector wrapper around the env, or `None`.
        seed: The seed of everything random in this world.
    """

    env_id: str
    config: dict[str, Any]
    limit: int | None
    B: int
    T: int
    files: int
    mode: str
    maker: str
    recorded: bool
    finals: bool
    policy: str
    wrapper: str | None
    seed: int

    @property
    def name(self) -> str:
        """A short description, for messages."""
        what = self.env_id
        if self.config:
            c = self.config
            what = (
                f"synth[obs={c['obs']['type']} act={c['act']['type']} rew={c['reward']} "
                f"end={c['end']['kind']} start={c['start']} noise={c['noise']}]"
            )
        return (
            f"{what} L={self.limit} B={self.B} T={self.T}x{self.files} {self.maker}-{self.mode} "
            f"policy={self.policy} wrapper={self.wrapper} rec={self.recorded} "
            f"finals={self.finals} seed={self.seed}"
        )

    @property
    def start(self) -> str:
        """`fixed` where every reset lands on one state, else `random`."""
        if self.config:
            return str(self.config["start"])
        return str(REAL_ENVS[self.env_id].get("start", "random"))

    @property
    def deterministic(self) -> bool:
        """Whether the env's dynamics, starts and the policy are all deterministic."""
        return (
            bool(self.config)
            and self.config["noise"] == 0
            and self.config["start"] == "fixed"
            and self.config["end"]["kind"] != "hazard"
            and self.policy in ("greedy", "constant", "bangbang", "function")
        )


def _box(rng: np.random.Generator, shape: list[int], dtype: str = "float32") -> dict[str, Any]:
    bounds = rng.choice(["none", "symmetric", "mixed", "unit"])
    low: Any
    high: Any
    if dtype == "uint8":
        low, high = 0.0, 255.0
    elif bounds == "none":
        low, high = None, None
    elif bounds == "symmetric":
        c = float(rng.choice([1.0, 2.0, 5.0]))
        low, high = -c, c
    elif bounds == "unit":
        low, high = 0.0, 1.0
    else:
        size = int(np.prod(shape))
        lows = [None if rng.random() < 0.4 else -float(rng.choice([1.0, 3.0])) for _ in range(size)]
        highs = [None if rng.random() < 0.4 else float(rng.choice([1.0, 3.0])) for _ in range(size)]
        low, high = (
            np.array(lows, dtype=object).reshape(shape).tolist(),
            np.array(highs, dtype=object).reshape(shape).tolist(),
        )
    return {"type": "Box", "shape": shape, "dtype": dtype, "low": low, "high": high}


def _leaf_space(rng: np.random.Generator, *, actions: bool = False) -> dict[str, Any]:
    kinds = ["box", "discrete", "multidiscrete", "multibinary"] + ([] if actions else ["image"])
    kind = rng.choice(kinds, p=[0.4, 0.3, 0.15, 0.15] if actions else [0.35, 0.25, 0.15, 0.15, 0.1])
    if kind == "box":
        shape = [int(rng.integers(1, 4))]
        space = _box(rng, shape, "float32" if rng.random() < 0.8 else "float64")
        if actions and (
            space["low"] is None or space["high"] is None or not np.isscalar(space["low"])
        ):
            c = float(rng.choice([1.0, 2.0]))
            space.update(low=-c, high=c, dtype="float32")
        return space
    if kind == "image":
        return _box(rng, [2, 3], "uint8")
    if kind == "discrete":
        return {
            "type": "Discrete",
            "n": int(rng.integers(2, 6)),
            "start": int(rng.choice([0, 0, -2, 3])),
        }
    if kind == "multidiscrete":
        nvec = [int(x) for x in rng.integers(2, 5, size=2)]
        start = [int(x) for x in rng.choice([0, 0, 2, -1], size=2)]
        return {"type": "MultiDiscrete", "nvec": nvec, "start": start}
    return {"type": "MultiBinary", "n": int(rng.integers(2, 5))}


def _obs_space(rng: np.random.Generator) -> dict[str, Any]:
    shape = rng.choice(["leaf", "leaf", "dict", "tuple"])
    if shape == "leaf":
        return _leaf_space(rng)
    rare = _leaf_space(rng)
    rare["rare"] = float(rng.choice([0.002, 0.01, 0.05]))
    parts = [_leaf_space(rng), rare, *([_leaf_space(rng)] if rng.random() < 0.5 else [])]
    if shape == "tuple":
        return {"type": "Tuple", "spaces": parts}
    return {"type": "Dict", "spaces": {f"k{i}": p for i, p in enumerate(parts)}}


def _synth_config(rng: np.random.Generator) -> dict[str, Any]:
    ends = [
        {"kind": "hazard", "p": float(rng.choice([0.02, 0.05, 0.2]))},
        {"kind": "fixed", "k": int(rng.choice([1, 1, 3, 10, 40]))},
        {"kind": "threshold", "c": float(rng.choice([1.2, 2.0]))},
        {"kind": "never"},
    ]
    rewards = [
        "dense",
        "signed",
        "saturated",
        "effort",
        "constant",
        "negative",
        "sparse",
        "terminal",
    ]
    return {
        "obs": _obs_space(rng),
        "act": _leaf_space(rng, actions=True),
        "start": str(rng.choice(["fixed", "random"])),
        "noise": float(rng.choice([0.0, 0.0, 0.1, 0.3])),
        "end": ends[int(rng.integers(len(ends)))],
        "reward": str(rng.choice(rewards)),
        "params": int(rng.integers(2**31)),
    }


def _policies(action: dict[str, Any]) -> list[str]:
    kind = action["type"]
    if kind == "Discrete":
        return ["softmax", "softmax", "greedy", "eps", "constant"]
    if kind == "Box":
        return ["gaussian", "gaussian", "bangbang", "uniform", "function"]
    return ["uniform", "function"]


def sample_world(rng: np.random.Generator) -> World:
    """One random world (see the module docstring)."""
    seed = int(rng.integers(2**31))
    if rng.random() < 0.3:
        env_id = str(rng.choice(list(REAL_ENVS)))
        config: dict[str, Any] = {}
        action = _real_action_space(env_id)
        own = REAL_ENVS[env_id]["limit"]
        limit = None if rng.random() < 0.5 else int(rng.choice([20, 50, 100]))
        limit = limit if own is None or limit is None else min(limit, own)
    else:
        env_id = synth.ENV_ID
        config = _synth_config(rng)
        action = config["act"]
        limit = None if rng.random() < 0.3 else int(rng.choice([1, 5, 12, 30, 100]))
        end = config["end"]
        if end["kind"] == "fixed" and limit is not None and end["k"] >= limit:
            # An env that always terminates on the step its time limit cuts sets both flags
            # in every episode: its data is that of a loop that drops truncations (Known
            # limits of TK101). The generator does not draw it.
            limit = None if end["k"] == limit else limit
            if limit is not None and end["k"] > limit:
                end["k"] = max(1, limit - 1) if limit > 1 else end["k"]
                if end["k"] >= limit:
                    limit = None
    maker = str(rng.choice(["recorder", "loop"]))
    wrapper = None if rng.random() < 0.75 else str(rng.choice(VECTOR_WRAPPERS))
    mode = str(rng.choice(["NEXT_STEP", "SAME_STEP", "DISABLED"]))
    if wrapper in ("NormalizeObservation", "NormalizeReward") and mode != "NEXT_STEP":
        wrapper = None  # Gymnasium's vector versions take NEXT_STEP envs only
    if wrapper == "NormalizeObservation" and not _float_box_obs(env_id, config):
        wrapper = None
    if wrapper == "ClipAction" and action["type"] != "Box":
        wrapper = None
    return World(
        env_id=env_id,
        config=config,
        limit=limit,
        B=int(rng.choice([1, 2, 2, 3, 4])),
        T=int(rng.choice([2, 8, 16, 32, 64])),
        files=int(rng.choice([1, 2, 3, 4, 6])),
        mode=mode,
        maker=maker,
        recorded=maker == "recorder" or rng.random() < 0.7,
        finals=maker == "recorder" or rng.random() < 0.5,
        policy=str(rng.choice(_policies(action))),
        wrapper=wrapper,
        seed=seed,
    )


def _float_box_obs(env_id: str, config: dict[str, Any]) -> bool:
    if config:
        obs = config["obs"]
        return bool(obs["type"] == "Box" and obs["dtype"] != "uint8")
    return env_id in (
        "CartPole-v1",
        "MountainCar-v0",
        "Acrobot-v1",
        "Pendulum-v1",
        "LunarLander-v3",
    )


def _real_action_space(env_id: str) -> dict[str, Any]:
    if env_id in ("Pendulum-v1", "MountainCarContinuous-v0"):
        return {"type": "Box"}
    return {"type": "Discrete"}


# --------------------------------------------------------------------------- making envs


def make_envs(world: World, *, seeded_alike: bool = False) -> Any:
    """The world's vector env (seeding is the caller's)."""
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    synth.register()
    kwargs: dict[str, Any] = {}
    if world.config:
        kwargs["config"] = world.config
    if world.limit is not None:
        kwargs["max_episode_steps"] = world.limit
    if world.wrapper == "env:RecordEpisodeStatistics":
        kwargs["wrappers"] = [gym.wrappers.RecordEpisodeStatistics]
    envs = gym.make_vec(
        world.env_id,
        num_envs=world.B,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode[world.mode]},
        **kwargs,
    )
    if world.wrapper is not None and not world.wrapper.startswith("env:"):
        wrappers = gym.wrappers.vector
        if world.wrapper == "ClipReward":
            envs = wrappers.ClipReward(envs, min_reward=-1.0, max_reward=1.0)
        else:
            envs = getattr(wrappers, world.wrapper)(envs)
    return envs


# ------------------------------------------------------------------------------ policies


def _base_action_space(envs: Any) -> Any:
    """The env's own action space (a ClipAction wrapper declares an unbounded one)."""
    while hasattr(envs, "env") and not hasattr(envs, "envs"):
        envs = envs.env
    return envs.single_action_space


def _features(obs: Any, B: int) -> Any:
    """`[B, F]` float features of a batch of observations (any tree)."""
    leaves = _leaves(obs)
    return np.concatenate([np.asarray(x, dtype=np.float64).reshape(B, -1) for x in leaves], axis=1)


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, dict):
        return [x for k in sorted(tree) for x in _leaves(tree[k])]
    if isinstance(tree, tuple | list):
        return [x for t in tree for x in _leaves(t)]
    return [tree]


def make_policy(world: World, action_space: Any, rng: np.random.Generator) -> Policy:
    """The world's policy: a batch of observations -> model outputs, `actions` among them."""
    from gymnasium import spaces

    policy = _Policy(world, action_space, rng)
    if isinstance(action_space, spaces.Discrete):
        return policy.discrete
    if isinstance(action_space, spaces.Box):
        return policy.box
    return policy.multi


class _Policy:
    """The policies of `make_policy`, by `World.policy` and the kind of action space."""

    def __init__(self, world: World, space: Any, rng: np.random.Generator) -> None:
        self.world, self.space, self.rng, self.kind = world, space, rng, world.policy
        self.weights: dict[int, Any] = {}

    def linear(self, obs: Any, out: int) -> Any:
        x = _features(obs, self.world.B)
        x = np.tanh(x / (1.0 + np.abs(x)))
        if x.shape[1] not in self.weights:
            seeded = np.random.default_rng(self.world.seed + 7)
            self.weights[x.shape[1]] = seeded.normal(size=(x.shape[1], 8))
        h = x @ self.weights[x.shape[1]]
        return h[:, :out] if out <= 8 else np.tile(h, (1, out // 8 + 1))[:, :out]

    def critic(self, obs: Any) -> Any:
        return self.linear(obs, 1)[:, 0] * 0.5

    def discrete(self, obs: Any) -> Outs:
        rng, kind = self.rng, self.kind
        n, start = int(self.space.n), int(self.space.start)
        logits = 2.0 * self.linear(obs, n)
        logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        B = len(logits)
        if start:  # trajkit pairs `actor` logits with actions in [0, A): none stored then
            index = logits.argmax(-1) if kind == "greedy" else rng.integers(0, n, B)
            return {"actions": index + start, "critic": self.critic(obs)}
        if kind == "eps":
            greedy = logits.argmax(-1)
            index = np.where(rng.random(B) < 0.2, rng.integers(0, n, B), greedy)
            return {"actions": index + start, "actor": logits, "critic": self.critic(obs)}
        if kind == "constant":
            return {"actions": np.full(B, start), "critic": self.critic(obs)}
        if kind == "softmax":
            index = np.array([rng.choice(n, p=np.exp(row)) for row in logp])
        else:
            index = logits.argmax(-1)
        chosen = logp[np.arange(B), index]
        return {
            "actions": index + start,
            "actor": logits,
            "log_probs": chosen,
            "critic": self.critic(obs),
        }

    def box(self, obs: Any) -> Outs:
        space, B = self.space, self.world.B
        shape = space.shape
        size = int(np.prod(shape))
        low, high = space.low.reshape(-1), space.high.reshape(-1)
        h = self.linear(obs, size)
        if self.kind == "uniform":
            a = self.rng.uniform(low, high, size=(B, size))
            return {"actions": a.reshape(B, *shape).astype(space.dtype)}
        if self.kind in ("bangbang", "function"):
            a = np.where(h > 0, high, low) if self.kind == "bangbang" else np.clip(h, low, high)
            return {"actions": a.reshape(B, *shape).astype(space.dtype), "critic": self.critic(obs)}
        mean = np.tanh(h) * (high - low) / 2 + (high + low) / 2
        std = np.full_like(mean, 0.3 * float(np.mean(high - low)))
        sample = mean + std * self.rng.normal(size=mean.shape)
        a = np.clip(sample, low, high).astype(space.dtype)
        logp = gaussian_logp(a.astype(np.float64), mean, std)
        return {
            "_sample": sample.reshape(B, *shape),  # kept for the planted bugs, never saved
            "actions": a.reshape(B, *shape),
            "mean": mean.reshape(B, *shape),
            "std": std.reshape(B, *shape),
            "log_probs": logp,
            "critic": self.critic(obs),
        }

    def multi(self, obs: Any) -> Outs:
        from gymnasium import spaces

        space, B, uniform = self.space, self.world.B, self.kind == "uniform"
        shape = space.shape
        if isinstance(space, spaces.MultiBinary):
            if uniform:
                a = self.rng.integers(0, 2, size=(B, *shape))
            else:
                a = (self.linear(obs, int(np.prod(shape))) > 0).reshape(B, *shape)
            return {"actions": a.astype(np.int8), "critic": self.critic(obs)}
        nvec, start = space.nvec.reshape(-1), space.start.reshape(-1)
        if uniform:
            level = self.rng.integers(0, nvec, size=(B, nvec.size))
        else:
            level = ((np.tanh(self.linear(obs, nvec.size)) + 1) / 2 * nvec).astype(np.int64)
            level = np.minimum(level, nvec - 1)
        return {"actions": (start + level).reshape(B, *shape).astype(np.int64)}


def gaussian_logp(x: Any, mean: Any, std: Any) -> Any:
    """The diagonal normal log-density, summed over the last axis."""
    return (-0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)


# ------------------------------------------------------------------------- the hand loop


@dataclass
class Column:
    """One env's rows and steps, as a correct hand-written loop keeps them.

    Row k: `obs[k]`, `flag[k]` (1: an episode starts there), `outs[k]`; step k: `rew[k]`,
    `term[k]`, `trunc[k]` (Gymnasium's flags) and `final[k]` (the true final observation
    when step k ended an episode). `phantom` holds NEXT_STEP's autoreset steps the loop
    drops, by the index of the row they would have followed, as (final obs row, outs).
    """

    obs: list[Any] = field(default_factory=list)
    flag: list[int] = field(default_factory=list)
    outs: list[Outs] = field(default_factory=list)
    rew: list[float] = field(default_factory=list)
    term: list[bool] = field(default_factory=list)
    trunc: list[bool] = field(default_factory=list)
    final: list[Any] = field(default_factory=list)
    phantom: dict[int, Outs] = field(default_factory=dict)

    @property
    def cut(self) -> list[bool]:
        """Whether step k was cut by a time limit (truncated, not terminated)."""
        return [bool(tr and not te) for te, tr in zip(self.term, self.trunc, strict=True)]

    @property
    def ended(self) -> list[bool]:
        """Whether step k ended an episode."""
        return [bool(te or tr) for te, tr in zip(self.term, self.trunc, strict=True)]


def _take(obs: Any, b: int) -> Any:
    if isinstance(obs, dict):
        return {k: _take(v, b) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_take(v, b) for v in obs)
    return np.array(obs[b])


def _copy_tree(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _copy_tree(v) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_copy_tree(v) for v in tree)
    return np.array(tree)


def _where(mask: Any, new: Any, old: Any) -> Any:
    if isinstance(new, dict):
        return {k: _where(mask, new[k], old[k]) for k in new}
    if isinstance(new, tuple):
        return tuple(_where(mask, n, o) for n, o in zip(new, old, strict=True))
    m = np.asarray(mask).reshape(-1, *([1] * (np.ndim(new) - 1)))
    return np.where(m, new, old)


def _quiet() -> Any:
    context = warnings.catch_warnings()
    context.__enter__()
    warnings.simplefilter("ignore")
    return context


def hand_loop(world: World, *, seeded_alike: bool = False) -> tuple[list[Column], dict[str, Any]]:
    """A user's loop over the world's vector env, done right for its autoreset mode.

    Returns the columns (`T * files` real steps each) and the recording it would save
    (index 0; `None`-free: the caller drops it when the world saves none).
    """
    from trajkit.gym._describe import describe_env

    context = _quiet()
    try:
        envs = make_envs(world)
        rng = np.random.default_rng(world.seed + 1)
        policy = make_policy(world, _base_action_space(envs), rng)
        recording = {
            "id": uuid.UUID(int=int(np.random.default_rng(world.seed).integers(2**63))).hex,
            "index": 0,
            **describe_env(envs),
            "num_envs": world.B,
            "seed": world.seed,
            "autoreset_mode": world.mode,
        }
        cols = _run(envs, world, policy, seeded_alike)
        envs.close()
    finally:
        context.__exit__(None, None, None)
    return cols, recording


def _run(envs: Any, world: World, policy: Policy, seeded_alike: bool) -> list[Column]:
    B, need = world.B, world.T * world.files
    obs, _ = envs.reset(seed=[world.seed] * B if seeded_alike else world.seed)
    cols = [Column() for _ in range(B)]
    flag = np.ones(B, dtype=np.int64)
    pending = np.zeros(B, dtype=bool)  # NEXT_STEP: env b's next step is the autoreset step
    while min(len(c.rew) for c in cols) <= need:  # need + 1 rows
        outs = policy(obs)
        new, rew, term, trunc, info = envs.step(outs["actions"])
        for b in range(B):
            c = cols[b]
            mine = {k: np.array(np.asarray(v)[b]) for k, v in outs.items()}
            if pending[b]:  # the autoreset step: dropped (kept by the `phantom` bug)
                c.phantom[len(c.rew) - 1] = mine
                flag[b] = 1
                continue
            c.obs.append(_take(obs, b))
            c.flag.append(int(flag[b]))
            c.outs.append(mine)
            c.rew.append(float(rew[b]))
            c.term.append(bool(term[b]))
            c.trunc.append(bool(trunc[b]))
            ended = bool(term[b] or trunc[b])
            final = None
            if ended:
                final = (
                    _copy_tree(info["final_obs"][b]) if world.mode == "SAME_STEP" else _take(new, b)
                )
            c.final.append(final)
            flag[b] = int(ended)
        ended_now = np.asarray(term) | np.asarray(trunc)
        if world.mode == "NEXT_STEP":
            pending = ended_now & ~pending
        elif world.mode == "DISABLED" and ended_now.any():
            fresh, _ = envs.reset(options={"reset_mask": ended_now})
            new = _where(ended_now, fresh, new)
        obs = new
    for c in cols:
        del c.obs[need + 1 :], c.flag[need + 1 :], c.outs[need + 1 :]
        del c.rew[need:], c.term[need:], c.trunc[need:], c.final[need:]
        c.phantom = {k: v for k, v in c.phantom.items() if k < need - 1}
    return cols


# ------------------------------------------------------------------------------ streams


@dataclass
class Stream:
    """Every env's real transitions as arrays: what the files of a world are cut from.

    `obs` is a tree of `[N+1, B, ...]` leaves, `flag` `[N+1, B]` (dones), `outs` key ->
    `[N+1, B, ...]`, `rew`, `term`, `trunc` `[N, B]`, and `final[(k, b)]` the true final
    observation of step k of env b where it ended an episode.
    """

    obs: Any
    flag: Any
    outs: dict[str, Any]
    rew: Any
    term: Any
    trunc: Any
    final: dict[tuple[int, int], Any]

    @property
    def ended(self) -> Any:
        """`[N, B]`: step k of env b ended an episode."""
        return self.term | self.trunc

    @property
    def cut(self) -> Any:
        """`[N, B]`: step k of env b was cut by a time limit."""
        return self.trunc & ~self.term

    def copy(self) -> Stream:
        """A deep copy."""
        return Stream(
            map_tree(np.copy, self.obs),
            self.flag.copy(),
            {k: v.copy() for k, v in self.outs.items()},
            self.rew.copy(),
            self.term.copy(),
            self.trunc.copy(),
            dict(self.final),
        )


def map_tree(fn: Callable[[Any], Any], tree: Any) -> Any:
    """`fn` on every leaf of a dict/tuple tree."""
    if isinstance(tree, dict):
        return {k: map_tree(fn, v) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(map_tree(fn, v) for v in tree)
    return fn(tree)


def stack_trees(rows: list[Any]) -> Any:
    """Stack a list of same-shaped trees along a new first axis."""
    first = rows[0]
    if isinstance(first, dict):
        return {k: stack_trees([r[k] for r in rows]) for k in first}
    if isinstance(first, tuple):
        return tuple(stack_trees([r[i] for r in rows]) for i in range(len(first)))
    return np.stack([np.asarray(r) for r in rows])


def stream_of(cols: list[Column]) -> Stream:
    """The columns of a hand loop as a `Stream`."""
    obs = stack_trees([stack_trees(c.obs) for c in cols])  # [B, N+1, ...]
    obs = map_tree(lambda x: np.swapaxes(x, 0, 1), obs)
    outs = {
        k: np.stack([np.stack([o[k] for o in c.outs]) for c in cols], axis=1)
        for k in cols[0].outs[0]
    }
    final = {(k, b): f for b, c in enumerate(cols) for k, f in enumerate(c.final) if f is not None}
    return Stream(
        obs=obs,
        flag=np.array([c.flag for c in cols], dtype=np.int64).T,
        outs=outs,
        rew=np.array([c.rew for c in cols], dtype=np.float64).T,
        term=np.array([c.term for c in cols], dtype=bool).T,
        trunc=np.array([c.trunc for c in cols], dtype=bool).T,
        final=final,
    )


def cut_files(
    stream: Stream,
    world: World,
    recording: dict[str, Any] | None,
    *,
    truncated: bool = True,
    finals: bool | None = None,
) -> list[File]:
    """The files a loop saves: rows `[iT, (i+1)T]` of the stream, for i < files."""
    finals = world.finals if finals is None else finals
    files = []
    for i in range(world.files):
        lo, hi = i * world.T, (i + 1) * world.T
        dones = stream.flag[lo : hi + 1].astype(np.float64)
        cut = stream.cut[lo:hi]
        ends = np.nonzero(dones[1:] == 1)
        final_obses = None
        if (
            finals
            and len(ends[0])
            and all((lo + t, b) in stream.final for t, b in zip(*ends, strict=True))
        ):
            final_obses = stack_trees(
                [stream.final[(lo + int(t), int(b))] for t, b in zip(*ends, strict=True)]
            )
        rollout = Rollout(
            states=np.zeros((world.T + 1, world.B, 0)),
            obses=map_tree(lambda x: x[lo : hi + 1], stream.obs),  # noqa: B023 - used at once
            rews=stream.rew[lo:hi],
            dones=dones,
            infos=None,
            model_outs={k: v[lo : hi + 1] for k, v in stream.outs.items() if k[0] != "_"},
            truncated=cut.astype(np.float64) if truncated else None,
            final_values=np.zeros(cut.shape) if truncated else None,
            final_obses=final_obses,
        )
        files.append((rollout, None if recording is None else {**recording, "index": i}))
    return files


def loop_stream(
    world: World, *, seeded_alike: bool = False
) -> tuple[Stream, list[Column], dict[str, Any]]:
    """The world's hand loop: its stream, its columns and its recording."""
    cols, recording = hand_loop(world, seeded_alike=seeded_alike)
    return stream_of(cols), cols, recording


def stores_truncated(world: World, stream: Stream) -> bool:
    """Whether the world's hand loop stores `truncated` (always, when anything truncates)."""
    return bool(stream.trunc.any()) or world.finals or world.limit is not None


def recorder_files(world: World) -> list[File]:
    """The world recorded by `RolloutRecorder`, one `record(T)` per file."""
    from trajkit.gym import RolloutRecorder

    context = _quiet()
    try:
        envs = make_envs(world)
        rng = np.random.default_rng(world.seed + 1)
        policy = make_policy(world, _base_action_space(envs), rng)

        def saved(obs: Any) -> Outs:
            return {k: v for k, v in policy(obs).items() if k[0] != "_"}

        recorder = RolloutRecorder(envs, saved, seed=world.seed)
        files: list[File] = [
            (recorder.record(world.T), recorder.recording) for _ in range(world.files)
        ]
        envs.close()
    finally:
        context.__exit__(None, None, None)
    return files


def clean_set(world: World) -> list[File]:
    """The files a user saves for this world, clean."""
    if world.maker == "recorder":
        return recorder_files(world)
    stream, _, recording = loop_stream(world)
    return cut_files(
        stream,
        world,
        recording if world.recorded else None,
        truncated=stores_truncated(world, stream),
    )


def worlds(seed: int, count: int) -> Iterator[World]:
    """`count` worlds drawn with generator seed `seed`."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        yield sample_world(rng)


__all__ = ["World", "clean_set", "replace", "sample_world", "worlds"]
