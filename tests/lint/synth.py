"""A configurable Gymnasium env for the generated lint corpora (`tests/lint/worlds.py`).

`SynthEnv(config)` is a small MDP whose every property that real data varies is a key of a
JSON config, so that a recording of it replays (`trajkit lint --replay` passes `config`, an
argument its constructor names):

- `obs`, `act`: the observation and action spaces, in `describe_space`'s JSON form (Box with
  any bounds and dtype, Discrete and MultiDiscrete with `start`, MultiBinary, Dict and Tuple
  of those). A leaf with `"rare": p` changes only on a rare event (probability p a step).
- `start`: `"fixed"` (every reset lands on one state) or `"random"`.
- `noise`: the dynamics' noise (0: a deterministic env).
- `end`: `{"kind": "hazard", "p": p}` (a random length), `{"kind": "fixed", "k": k}` (exactly
  k steps; k = 1 is a one-step bandit), `{"kind": "threshold", "c": c}` (when the state leaves
  a range) or `{"kind": "never"}` (only a time limit ends it).
- `reward`: `dense` (continuous, negative), `signed` (continuous, both signs), `saturated`
  (continuous, clipped at ±1 by the env itself), `effort` (the cost of the action, which a
  bang-bang controller saturates), `constant` (+1), `negative` (-1), `sparse` (+1 in a goal
  region), `terminal` (±1 on the last step only).
- `params`: the seed of the env's fixed weights.

The hidden state z (4 floats) moves as `z' = 0.9 z + 0.4 e(a) + noise`; every observation leaf
is a fixed function of z (clipped to its Box, quantised for the discrete spaces).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_ID = "TrajkitSynth-v0"
_Z = 4


def make_space(desc: dict[str, Any]) -> spaces.Space[Any]:
    """A Gymnasium space from its JSON description (the `describe_space` form)."""
    kind = desc["type"]
    if kind == "Box":
        low, high = box_bounds(desc)
        dtype = np.dtype(desc["dtype"])
        return spaces.Box(low.astype(dtype), high.astype(dtype), tuple(desc["shape"]), dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(desc["n"], start=desc.get("start", 0))
    if kind == "MultiDiscrete":
        nvec = np.asarray(desc["nvec"])
        start = np.asarray(desc.get("start", np.zeros_like(nvec)))
        return spaces.MultiDiscrete(nvec, start=start)
    if kind == "MultiBinary":
        return spaces.MultiBinary(desc["n"])
    if kind == "Dict":
        return spaces.Dict({k: make_space(v) for k, v in desc["spaces"].items()})
    if kind == "Tuple":
        return spaces.Tuple([make_space(v) for v in desc["spaces"]])
    raise ValueError(kind)


def leaf_descs(desc: dict[str, Any]) -> list[dict[str, Any]]:
    """The leaf spaces of a description, in the order `trajkit`'s tree flattens them."""
    if desc["type"] == "Dict":
        return [d for k in sorted(desc["spaces"]) for d in leaf_descs(desc["spaces"][k])]
    if desc["type"] == "Tuple":
        return [d for s in desc["spaces"] for d in leaf_descs(s)]
    return [desc]


def leaf_size(desc: dict[str, Any]) -> int:
    """The number of elements of a leaf space."""
    kind = desc["type"]
    if kind == "Box":
        return int(np.prod(desc["shape"]))
    if kind == "MultiDiscrete":
        return int(np.asarray(desc["nvec"]).size)
    if kind == "MultiBinary":
        return int(np.prod(desc["n"]))
    return 1


def box_bounds(desc: dict[str, Any]) -> tuple[Any, Any]:
    """A Box description's bounds as float64 arrays of its shape (inf where unbounded)."""
    shape = tuple(desc["shape"])
    out = []
    for key, inf in (("low", -np.inf), ("high", np.inf)):
        value = np.array(desc[key], dtype=object)
        value = np.where(value == None, inf, value).astype(np.float64)  # noqa: E711
        out.append(np.broadcast_to(value, shape))
    return out[0], out[1]


class SynthEnv(gym.Env[Any, Any]):
    """The configurable MDP described in the module docstring."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's own attribute

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.observation_space = make_space(config["obs"])
        self.action_space = make_space(config["act"])
        rng = np.random.default_rng(config["params"])
        self._leaves = leaf_descs(config["obs"])
        self._weights = [rng.normal(size=(leaf_size(d), _Z)) for d in self._leaves]
        self._offsets = [rng.normal(size=leaf_size(d)) for d in self._leaves]
        self._start = rng.normal(size=_Z)
        self._embed = rng.normal(size=(64, _Z))
        self._rare = next((float(d["rare"]) for d in self._leaves if "rare" in d), 0.0)
        self._z = np.zeros(_Z)
        self._t = 0
        self._events = 0

    # ------------------------------------------------------------------------ dynamics

    def _act(self, action: Any) -> tuple[Any, Any]:
        """The action's effect on z, and the action as executed (Box: clipped)."""
        act = self.config["act"]
        kind = act["type"]
        if kind == "Discrete":
            return self._embed[int(action) - act.get("start", 0)], np.zeros(1)
        if kind == "MultiDiscrete":
            start = np.asarray(act.get("start", 0)).reshape(-1)
            index = np.asarray(action).reshape(-1) - start
            return self._embed[(index + 7 * np.arange(index.size)) % 64].sum(axis=0), np.zeros(1)
        if kind == "MultiBinary":
            bits = np.asarray(action).reshape(-1).astype(np.float64)
            return bits @ self._embed[: bits.size], np.zeros(1)
        low, high = box_bounds(act)
        a = np.clip(np.asarray(action, dtype=np.float64), low, high).reshape(-1)
        return a @ self._embed[: a.size], a

    def _leaf(self, i: int, desc: dict[str, Any]) -> Any:
        kind = desc["type"]
        size = leaf_size(desc)
        if "rare" in desc:  # changes only on a rare event
            base = np.full(size, float(self._events % 3))
        else:
            base = self._weights[i] @ self._z + self._offsets[i]
        if kind == "Box":
            shape = tuple(desc["shape"])
            dtype = np.dtype(desc["dtype"])
            value = (np.tanh(base) + 1.0) * 127.5 if dtype.kind == "u" else base * 2.0
            low, high = box_bounds(desc)
            value = np.clip(value.reshape(shape), low, high)
            return value.astype(dtype)
        if kind == "Discrete":
            n, start = desc["n"], desc.get("start", 0)
            level = int(base[0]) % n if "rare" in desc else int((np.tanh(base[0]) + 1) / 2 * n)
            return np.int64(start + min(level, n - 1))
        if kind == "MultiDiscrete":
            nvec = np.asarray(desc["nvec"])
            start = np.broadcast_to(np.asarray(desc.get("start", 0)), nvec.shape)
            if "rare" in desc:
                level = base.astype(np.int64).reshape(nvec.shape) % nvec
            else:
                level = ((np.tanh(base) + 1) / 2 * nvec.reshape(-1)).astype(np.int64)
                level = np.minimum(level.reshape(nvec.shape), nvec - 1)
            return (start + level).astype(np.int64)
        shape = tuple(np.atleast_1d(desc["n"]))
        bits = base % 2 if "rare" in desc else base > 0
        return bits.astype(np.int8).reshape(shape)

    def _observation(self) -> Any:
        values = iter([self._leaf(i, d) for i, d in enumerate(self._leaves)])
        return self._assemble(self.config["obs"], values)

    def _assemble(self, desc: dict[str, Any], values: Any) -> Any:
        if desc["type"] == "Dict":
            built = {k: self._assemble(desc["spaces"][k], values) for k in sorted(desc["spaces"])}
            return {k: built[k] for k in desc["spaces"]}
        if desc["type"] == "Tuple":
            return tuple(self._assemble(s, values) for s in desc["spaces"])
        return next(values)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        if self.config["start"] == "fixed":
            self._z = self._start.copy()
        else:
            self._z = self.np_random.normal(size=_Z)
        self._t = 0
        self._events = 0
        return self._observation(), {}

    def _reward(self, executed: Any, terminated: bool) -> float:
        kind = self.config["reward"]
        z = self._z
        rewards = {
            "dense": lambda: -float((z**2).sum()),
            "signed": lambda: float(z[0] - 0.5 * z[1]),
            "saturated": lambda: float(np.clip(2.0 * z[0], -1.0, 1.0)),
            "effort": lambda: -0.1 * float((executed**2).sum()),
            "constant": lambda: 1.0,
            "negative": lambda: -1.0,
            "sparse": lambda: 1.0 if z[0] > 1.0 else 0.0,
            "terminal": lambda: (1.0 if z[1] > 0 else -1.0) if terminated else 0.0,
        }
        return rewards[kind]()

    def _ended(self) -> bool:
        end = self.config["end"]
        kind = end["kind"]
        if kind == "hazard":
            return bool(self.np_random.random() < end["p"])
        if kind == "fixed":
            return bool(self._t >= end["k"])
        if kind == "threshold":
            return bool(abs(self._z[0]) > end["c"])
        return False

    def step(self, action: Any) -> Any:
        effect, executed = self._act(action)
        self._z = 0.9 * self._z + 0.4 * np.tanh(effect)
        if self.config["noise"]:
            self._z = self._z + self.config["noise"] * self.np_random.normal(size=_Z)
        if self._rare and self.np_random.random() < self._rare:
            self._events += 1
        self._t += 1
        terminated = self._ended()
        return self._observation(), self._reward(executed, terminated), terminated, False, {}


def register() -> None:
    """Register `SynthEnv` as `TrajkitSynth-v0` (once)."""
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=SynthEnv)  # type: ignore[arg-type]
