"""Test helpers for trajkit users: a deterministic example rollout and Hypothesis strategies.

`example_rollout` needs only NumPy. The strategies need Hypothesis (`pip install
trajkit[testing]`), imported when a strategy is first built, so that `import trajkit.testing`
works without it.

Examples:
    >>> from hypothesis import given
    >>> from trajkit.testing import rollouts
    >>> @given(rollouts(max_steps=5, keys={"critic", "actions"}))
    ... def test_returns_shape(r):
    ...     assert r.returns(0.99, 0.95).shape == (r.num_steps, r.batch_size)
    >>> test_returns_shape()
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.rules import episode_ends

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy

__all__ = ["ACTION_KINDS", "MODEL_OUTPUT_KEYS", "ActionKind", "example_rollout", "rollouts"]

MODEL_OUTPUT_KEYS: tuple[str, ...] = ("critic", "actions", "log_probs", "actor")
"""The model-output keys trajkit knows, in the order the strategies emit them."""

ActionKind: TypeAlias = Literal["discrete", "multi_discrete", "multi_binary", "box"]
"""The Gymnasium action spaces a test rollout can hold: `Discrete`, `MultiDiscrete`, ..."""

ACTION_KINDS: tuple[ActionKind, ...] = ("discrete", "multi_discrete", "multi_binary", "box")
"""Every `ActionKind`."""


def _actions(
    kind: str,
    shape: tuple[int, ...],
    num_actions: int,
    integers: Callable[[int, int, tuple[int, ...]], AnyArray],
    reals: Callable[[tuple[int, ...]], AnyArray],
) -> AnyArray:
    """Actions `[T+1, B]` (discrete) or `[T+1, B, *tail]` of `kind`, from the given samplers."""
    if kind == "discrete":
        return integers(0, num_actions - 1, shape)
    if kind == "multi_discrete":
        return integers(0, num_actions - 1, shape)
    if kind == "multi_binary":
        return integers(0, 1, shape)
    if kind == "box":
        return reals(shape)
    raise ValueError(f"action kind must be one of {list(ACTION_KINDS)}, got {kind!r}")


def _nest_obses(image: AnyArray, vector: AnyArray, goal: AnyArray) -> dict[str, Any]:
    """A nested observation like a goal-conditioned robotics env's: Dict(image, Tuple(...))."""
    return {"image": image, "proprio": (vector, {"goal": goal})}


def example_rollout(
    num_steps: int = 4,
    num_envs: int = 2,
    *,
    num_actions: int = 3,
    obs_shape: Sequence[int] = (4,),
    keys: Collection[str] = MODEL_OUTPUT_KEYS,
    done_prob: float = 0.2,
    truncation: bool = False,
    seed: int = 0,
    action_kind: ActionKind = "discrete",
    action_shape: Sequence[int] = (2,),
    nested: bool = False,
    final_obs: bool = False,
) -> Rollout:
    """Build a small, valid, deterministic rollout from random data.

    Args:
        num_steps: T.
        num_envs: B.
        num_actions: A, the number of discrete actions (width of `actor`).
        obs_shape: Trailing shape of each float32 observation.
        keys: Which model-output keys to include.
        done_prob: Probability that an observation starts a new episode.
        truncation: Include `truncated` and `final_values` (about half of the episode ends
            become truncations).
        seed: Seed of the data.
        action_kind: The action space: `"discrete"` (int32 `[T+1, B]` in `[0, A)`),
            `"multi_discrete"` (int32 `[T+1, B, *action_shape]` in `[0, A)`),
            `"multi_binary"` (int32 0/1) or `"box"` (float32 `[T+1, B, *action_shape]`).
        action_shape: Trailing shape of the actions of every kind but `"discrete"`.
        nested: Make `obses` a Gymnasium-`Dict`-like structure `{"image": uint8
            [T+1, B, *obs_shape], "proprio": (float32 [T+1, B, 3], {"goal": float32
            [T+1, B, 2]})}` and `states` a dict `{"h": ..., "c": ...}` of float32 `[T+1, B, 2]`.
        final_obs: Include `final_obses`: a random true final observation for each episode
            end, laid out as `obses` (drawn after everything else, so the other fields are the
            same with and without it).

    Returns:
        A validated `Rollout`.

    Examples:
        >>> r = example_rollout(num_steps=8, num_envs=4, truncation=True)
        >>> r.num_steps, r.batch_size, r.truncated is not None
        (8, 4, True)
        >>> r = example_rollout(nested=True, action_kind="box", action_shape=(3,))
        >>> r.obses["proprio"][1]["goal"].shape, r.actions().shape
        ((5, 2, 2), (5, 2, 3))
    """
    rng = np.random.default_rng(seed)
    T, B = num_steps, num_envs
    dones = rng.random((T + 1, B)) < done_prob
    outs: dict[str, AnyArray] = {}
    logits = rng.normal(size=(T + 1, B, num_actions)).astype(np.float32)
    if "critic" in keys:
        outs["critic"] = rng.normal(size=(T + 1, B)).astype(np.float32)
    if "actions" in keys:
        tail = () if action_kind == "discrete" else tuple(action_shape)
        outs["actions"] = _actions(
            action_kind,
            (T + 1, B, *tail),
            num_actions,
            lambda low, high, shape: rng.integers(low, high + 1, size=shape).astype(np.int32),
            lambda shape: rng.normal(size=shape).astype(np.float32),
        )
    if "log_probs" in keys:
        outs["log_probs"] = -rng.random((T + 1, B)).astype(np.float32)
    if "actor" in keys:
        outs["actor"] = logits
    truncated = final_values = None
    if truncation:
        truncated = episode_ends(dones) & (rng.random((T, B)) < 0.5)
        final_values = rng.normal(size=(T, B)).astype(np.float32)
    states: Any = rng.normal(size=(T + 1, B, 2)).astype(np.float32)
    obses: Any = rng.normal(size=(T + 1, B, *obs_shape)).astype(np.float32)
    if nested:
        states = {"h": states, "c": rng.normal(size=(T + 1, B, 2)).astype(np.float32)}
        obses = _nest_obses(
            rng.integers(0, 256, size=(T + 1, B, *obs_shape)).astype(np.uint8),
            rng.normal(size=(T + 1, B, 3)).astype(np.float32),
            rng.normal(size=(T + 1, B, 2)).astype(np.float32),
        )
    rews = rng.normal(size=(T, B)).astype(np.float32)
    ends = int(np.count_nonzero(episode_ends(dones)))
    return Rollout(
        states=states,
        obses=obses,
        rews=rews,
        dones=dones,
        infos=[[{"t": t, "env": b} for b in range(B)] for t in range(T)],
        model_outs=outs,
        truncated=truncated,
        final_values=final_values,
        final_obses=_final_obses(obses, ends, rng) if final_obs else None,
    )


def _final_obses(obses: Any, ends: int, rng: np.random.Generator) -> Any:
    """Random final observations laid out as `obses`, one per episode end."""

    def leaf(obs: AnyArray) -> AnyArray:
        shape = (ends, *obs.shape[2:])
        if obs.dtype.kind == "f":
            return rng.normal(size=shape).astype(obs.dtype)
        return rng.integers(0, 256, size=shape).astype(obs.dtype)

    return _tree.map_leaves(leaf, obses)


def rollouts(
    *,
    min_steps: int = 0,
    max_steps: int = 8,
    min_envs: int = 1,
    max_envs: int = 4,
    keys: Collection[str] | None = None,
    truncation: bool | None = None,
    max_actions: int = 4,
    action_kinds: Collection[ActionKind] = ACTION_KINDS[:1],
    nested: bool | None = False,
    final_obs: bool | None = False,
) -> SearchStrategy[Rollout]:
    """A Hypothesis strategy for valid rollouts.

    Rewards, values, log-probs and logits are finite float32 values within ±100; observations
    are uint8 or float32 with a small random trailing shape; infos hold small JSON-compatible
    dicts.

    Args:
        min_steps: Smallest T (0 allowed).
        max_steps: Largest T.
        min_envs: Smallest B (at least 1).
        max_envs: Largest B.
        keys: Exactly these model-output keys, or `None` for a random subset of
            `MODEL_OUTPUT_KEYS` (possibly empty).
        truncation: Always (`True`), never (`False`) or sometimes (`None`) include
            `truncated`/`final_values`.
        max_actions: Largest A.
        action_kinds: The action spaces to draw `actions` from (see `ActionKind`): integer
            `[T+1, B]` in `[0, A)` for `"discrete"`, integer `[T+1, B, K]` for
            `"multi_discrete"` and `"multi_binary"`, finite float32 `[T+1, B, ...]` for `"box"`.
        nested: Always (`True`), never (`False`) or sometimes (`None`) make `obses` and
            `states` nested dicts/tuples of arrays (Gymnasium `Dict`/`Tuple` spaces) with one
            to three leaves each, of mixed dtypes and trailing shapes.
        final_obs: Always (`True`), never (`False`) or sometimes (`None`) include
            `final_obses`, one drawn final observation per episode end.

    Returns:
        A strategy of `Rollout`.

    Raises:
        ValueError: On inconsistent bounds.

    Examples:
        >>> from hypothesis import find
        >>> r = find(rollouts(min_steps=3, keys={"critic"}), lambda r: r.batch_size > 1)
        >>> r.num_steps >= 3 and r.model_outs.keys() == ("critic",)
        True
        >>> r = find(rollouts(nested=True, action_kinds=["box"], keys={"actions"}), bool)
        >>> r.actions().dtype, isinstance(r.obses, dict | tuple)
        (dtype('float32'), True)
    """
    from hypothesis import strategies as st

    if min_steps < 0 or max_steps < min_steps or min_envs < 1 or max_envs < min_envs:
        raise ValueError(
            f"need 0 <= min_steps <= max_steps and 1 <= min_envs <= max_envs, got "
            f"steps [{min_steps}, {max_steps}] and envs [{min_envs}, {max_envs}]"
        )
    kinds = list(action_kinds)
    unknown = [k for k in kinds if k not in ACTION_KINDS]
    if not kinds or unknown:
        raise ValueError(
            f"action_kinds must be a non-empty collection of {list(ACTION_KINDS)}, got {kinds}"
        )

    draw_rollout = st.composite(_draw_rollout)
    return draw_rollout(
        (min_steps, max_steps),
        (min_envs, max_envs),
        keys,
        truncation,
        max_actions,
        kinds,
        nested,
        final_obs,
    )


def _draw_rollout(
    draw: DrawFn,
    steps: tuple[int, int],
    envs: tuple[int, int],
    keys: Collection[str] | None,
    truncation: bool | None,
    max_actions: int,
    kinds: list[ActionKind],
    nested: bool | None,
    final_obs: bool | None = False,
) -> Rollout:
    """One rollout of `rollouts`, its arguments checked there."""
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    T = draw(st.integers(*steps))
    B = draw(st.integers(*envs))
    d = _Drawer(draw, T, B, draw(st.integers(1, max_actions)))
    chosen = (
        [k for k in MODEL_OUTPUT_KEYS if k in keys]
        if keys is not None
        else draw(st.lists(st.sampled_from(MODEL_OUTPUT_KEYS), unique=True))
    )
    outs = {key: d.output(key, kinds) for key in chosen}
    use_nested = draw(st.booleans()) if nested is None else nested
    obses = d.tree(d.observation) if use_nested else d.observation()
    dones = draw(hnp.arrays(np.bool_, (T + 1, B)))
    use_truncation = draw(st.booleans()) if truncation is None else truncation
    truncated = final_values = None
    if use_truncation:
        truncated = episode_ends(dones) & draw(hnp.arrays(np.bool_, (T, B)))
        final_values = d.real((T, B))
    info = st.dictionaries(
        st.sampled_from(["step", "lives", "tag"]),
        st.integers(-5, 5) | st.text(max_size=3) | st.booleans(),
        max_size=2,
    )
    infos = [[draw(info) for _ in range(B)] for _ in range(T)]
    states = d.tree(d.state) if use_nested else d.state()
    rews = d.real((T, B))
    use_final = draw(st.booleans()) if final_obs is None else final_obs
    return Rollout(
        states=states,
        obses=obses,
        rews=rews,
        dones=dones,
        infos=infos,
        model_outs=outs,
        truncated=truncated,
        final_values=final_values,
        final_obses=d.final_obses(obses, dones) if use_final else None,
    )


class _Drawer:
    """The arrays of one rollout of T steps, B envs and A actions, drawn with `draw`."""

    def __init__(self, draw: DrawFn, T: int, B: int, A: int) -> None:
        self.draw, self.T, self.B, self.A = draw, T, B, A

    def real(self, shape: tuple[int, ...]) -> AnyArray:
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp

        floats = st.floats(-100, 100, allow_nan=False, width=32)
        return self.draw(hnp.arrays(np.float32, shape, elements=floats))

    def small_shape(self, min_dims: int = 0) -> tuple[int, ...]:
        from hypothesis import strategies as st

        shape: tuple[int, ...] = self.draw(
            st.lists(st.integers(1, 3), min_size=min_dims, max_size=2).map(tuple)
        )
        return shape

    def observation(self) -> AnyArray:
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp

        obs_dtype = self.draw(st.sampled_from([np.uint8, np.float32]))
        obs = self.draw(hnp.arrays(obs_dtype, (self.T + 1, self.B, *self.small_shape())))
        if obs_dtype is np.float32:
            obs = np.nan_to_num(obs, nan=0.0, posinf=1.0, neginf=-1.0)
        return obs

    def final_obses(self, obses: Any, dones: AnyArray) -> Any:
        """One drawn observation per episode end (`episode_ends(dones)`), laid out as `obses`."""
        from hypothesis.extra import numpy as hnp

        ends = int(np.count_nonzero(episode_ends(dones)))

        def leaf(obs: AnyArray) -> AnyArray:
            drawn: AnyArray = self.draw(hnp.arrays(obs.dtype, (ends, *obs.shape[2:])))
            if obs.dtype.kind == "f":
                drawn = np.nan_to_num(drawn, nan=0.0, posinf=1.0, neginf=-1.0)
            return drawn

        return _tree.map_leaves(leaf, obses)

    def state(self) -> AnyArray:
        from hypothesis import strategies as st

        return self.real((self.T + 1, self.B, self.draw(st.integers(0, 2))))

    def tree(self, leaf: Callable[[], AnyArray]) -> Any:
        """A dict or tuple of one to three leaves or one-leaf subtrees."""
        from hypothesis import strategies as st

        draw = self.draw
        items = [
            leaf() if draw(st.booleans()) else {"x": leaf()} for _ in range(draw(st.integers(1, 3)))
        ]
        if draw(st.booleans()):
            return tuple(items)
        return dict(zip(["a", "b", "c"], items, strict=False))

    def output(self, key: str, kinds: list[ActionKind]) -> AnyArray:
        """Model output `key`: `actions` of one of `kinds`, `actor` logits, or `[T+1, B]`."""
        from hypothesis import strategies as st
        from hypothesis.extra import numpy as hnp

        T, B, A, draw = self.T, self.B, self.A, self.draw
        if key == "actions":
            kind = draw(st.sampled_from(kinds))
            tail = () if kind == "discrete" else self.small_shape(1)
            return _actions(
                kind,
                (T + 1, B, *tail),
                A,
                lambda low, high, shape: draw(
                    hnp.arrays(np.int32, shape, elements=st.integers(low, high))
                ),
                self.real,
            )
        if key == "actor":
            return self.real((T + 1, B, A))
        return self.real((T + 1, B))
