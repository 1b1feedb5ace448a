"""Actions and observations against the spaces the recording declares (TK106, TK107, TK116).

All three are exact: a value outside its declared space contradicts the recording, and is
reported at the first row (then env) where it shows, with the count of such rows.

- TK106: an action outside a Discrete (`start <= a < start + n`), MultiDiscrete (per
  entry, with `start`) or MultiBinary (0 or 1) action space.
- TK107: a continuous action outside its Box bounds (`null`, an infinite bound, is none).
  Gymnasium envs clip what they execute: the stored action is not the executed one, which
  is deliberate when the stored action is the raw sample whose log-probability is stored.
- TK116: an observation (a row, or a `final_obses` entry) outside the recording's
  observation space, leaf by leaf for Dict and Tuple spaces: an observation normalised or
  rescaled in place while the recording names the raw space. Discrete, MultiDiscrete and
  MultiBinary values are checked exactly; Box values past a finite bound, in a feature
  whose values in the file leave its box on both sides where it has two bounds (by any
  amount), and farther past its one bound than `BOX_MARGIN` times that bound (at least 1)
  where the other side is unbounded: real envs' Box bounds are soft, and an env's own
  state runs past one of them (LunarLander's lander flies as high as it likes above its
  declared y of 2.5), while values rescaled around another centre leave on both. Not
  checked where the recording names a vector wrapper that changes observations (its space
  is the wrapper's).

The action space is the recording's, else the `action_space` option (Discrete actions beside
`actor` logits are in `[0, A)` by the rules every rollout passes). A space is named as the
user wrote it: `MultiDiscrete([3, 3], start=[2, 2])`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from trajkit._base.types import AnyArray, BoolArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.rules import episode_ends
from trajkit.lint.episodes import changes_observations, count_places, first_place
from trajkit.lint.registry import Finding

__all__ = [
    "BOX_MARGIN",
    "action_findings",
    "box_bound",
    "leaf_space",
    "observation_finding",
    "space_name",
]

BOX_MARGIN = 1.0
"""TK116: how far past a Box's one finite bound (the other infinite) an observation is
reported, as a part of that bound's magnitude (at least 1)."""


def box_bound(value: Any, shape: tuple[int, ...], infinite: float) -> AnyArray:
    """A Box bound from its JSON description: a number or nested list, `null` for inf.

    Examples:
        >>> box_bound([1.0, None], (2,), float("inf")).tolist()
        [1.0, inf]
    """
    if value is None:
        return np.full(shape, infinite)
    array = np.array(value, dtype=object)
    out = np.where(array == None, infinite, array).astype(np.float64)  # noqa: E711
    return np.broadcast_to(out, shape)


def _listed(value: Any) -> str:
    return str(np.asarray(value).tolist()).replace("None", "null")


def space_name(space: Mapping[str, Any]) -> str:
    """A space as the user wrote it, `start` included where it is not 0.

    Examples:
        >>> space_name({"type": "MultiDiscrete", "nvec": [3, 3], "start": [2, 2]})
        'MultiDiscrete([3, 3], start=[2, 2])'
        >>> space_name({"type": "Discrete", "n": 4, "start": 0})
        'Discrete(4)'
        >>> space_name({"type": "Box", "low": -1.0, "high": None, "shape": [2]})
        'Box(-1.0, null, (2,))'
    """
    kind = space.get("type")
    if kind in ("Discrete", "MultiDiscrete"):
        size = space.get("n") if kind == "Discrete" else _listed(space.get("nvec"))
        start = space.get("start", 0)
        shown = f", start={_listed(start)}" if np.any(np.asarray(start) != 0) else ""
        return f"{kind}({size}{shown})"
    if kind == "Box":
        shape = tuple(space.get("shape", ()))
        return f"Box({_listed(space.get('low'))}, {_listed(space.get('high'))}, {shape})"
    return f"{kind}({_listed(space.get('n', ''))})"


def _slack(low: AnyArray, high: AnyArray, margin: float) -> AnyArray:
    """How far past Box bounds a value is still inside.

    Where one bound is infinite, `margin` times the finite one's magnitude (at least 1); 0
    where both are finite (a value past both is what counts there, see `_escapes`) and where
    neither is.

    Examples:
        >>> _slack(np.array([-2.5, 0.0, -np.inf]), np.array([2.5, np.inf, np.inf]), 0.5).tolist()
        [0.0, 0.5, 0.0]
    """
    finite_low = np.isfinite(low)
    one = np.where(finite_low, low, high)
    scale = np.where(finite_low & np.isfinite(high), 0.0, np.maximum(1.0, np.abs(one)))
    out: AnyArray = margin * np.where(np.isfinite(scale), scale, 0.0)
    return out


def _outside(values: AnyArray, space: Mapping[str, Any], margin: float = 0.0) -> BoolArray | None:
    """`[N, ...]` values (N leading rows) against one leaf space: where each is outside.

    Box values count as outside past the `_slack` of `margin` (see `BOX_MARGIN`). Returns a
    `[N, K]` mask (K the flattened element count), or `None` for a space this module cannot
    read.
    """
    kind = space.get("type")
    shape = tuple(values.shape[1:])
    flat = values.reshape(values.shape[0], -1)
    out: BoolArray
    try:
        if kind == "Discrete":
            first, n = int(space.get("start", 0)), int(space["n"])
            out = (flat < first) | (flat >= first + n) | (flat != np.round(flat))
            return out
        if kind == "MultiDiscrete":
            nvec = np.broadcast_to(np.asarray(space["nvec"]), shape).reshape(-1)
            lowest = np.broadcast_to(np.asarray(space.get("start", 0)), shape).reshape(-1)
            out = (flat < lowest) | (flat >= lowest + nvec) | (flat != np.round(flat))
            return out
        if kind == "MultiBinary":
            out = (flat != 0) & (flat != 1)
            return out
        if kind == "Box":
            low = box_bound(space.get("low"), shape, -np.inf).reshape(-1)
            high = box_bound(space.get("high"), shape, np.inf).reshape(-1)
            slack = _slack(low, high, margin)
            low, high = low - slack, high + slack
            if values.dtype.kind == "f":  # the bounds as the data's dtype holds them
                low, high = low.astype(values.dtype), high.astype(values.dtype)
            out = (flat < low) | (flat > high)
            return out
    except (KeyError, TypeError, ValueError):  # a description this module cannot read
        return None
    return None


def action_findings(
    rollout: Rollout,
    space: Mapping[str, Any] | None,
    codes: frozenset[str],
    path: str | None,
) -> Iterator[Finding]:
    """TK106 (discrete spaces) or TK107 (Box) for the stored actions.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=1, keys=("actions",))
        >>> r.model_outs.arrays["actions"][:] = 1
        >>> r.model_outs.arrays["actions"][2, 0] = 7
        >>> space = {"type": "Discrete", "n": 3, "start": 1}
        >>> [f.message for f in action_findings(r, space, frozenset({"TK106"}), "a.npz")]
        ['actions[2, 0] = 7 is outside Discrete(3, start=1) (1 row in 1 env, rows 0 to 4)']
    """
    outs = rollout.model_outs.arrays
    actions = outs.get("actions")
    if actions is None:
        return
    if space is None or space.get("type") not in (
        "Discrete",
        "MultiDiscrete",
        "MultiBinary",
        "Box",
    ):
        return
    code = "TK107" if space.get("type") == "Box" else "TK106"
    R, B = actions.shape[:2]
    bad = _outside(actions.reshape(R * B, *actions.shape[2:]), space) if code in codes else None
    if bad is None:
        return
    mask: BoolArray = bad.any(axis=-1).reshape(R, B)
    if not mask.any():
        return
    t, b = first_place(mask)
    value = actions[t, b]
    shown = value.item() if value.ndim == 0 else value.tolist()
    executed = ", which the env clips" if code == "TK107" else ""
    yield Finding(
        code,
        f"actions[{t}, {b}] = {shown} is outside {space_name(space)}{executed} "
        f"({count_places(mask, 'row')}, rows 0 to {R - 1})",
        path,
        b,
        t,
    )


def leaf_space(space: Mapping[str, Any] | None, path: tuple[Any, ...]) -> Mapping[str, Any] | None:
    """The leaf of a Dict/Tuple space description at a tree path, if it has one.

    Examples:
        >>> space = {"type": "Dict", "spaces": {"a": {"type": "Discrete", "n": 2}}}
        >>> leaf_space(space, ("a",)), leaf_space(space, ("b",))
        ({'type': 'Discrete', 'n': 2}, None)
    """
    for key in path:
        if space is None:
            return None
        inner = space.get("spaces")
        if (space.get("type") == "Dict" and isinstance(inner, Mapping) and key in inner) or (
            space.get("type") == "Tuple" and isinstance(inner, list) and key < len(inner)
        ):
            space = inner[key]
        else:
            return None
    if space is None or space.get("type") in ("Dict", "Tuple"):
        return None
    return space


def observation_finding(
    rollout: Rollout, recording: Mapping[str, Any] | None, path: str | None
) -> Finding | None:
    """TK116: the first observation (row or final observation) outside the declared space.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=1)
        >>> r.obses[3, 0, 1], r.obses[4, 0, 1] = 20.0, -20.0
        >>> space = {"type": "Box", "low": -5.0, "high": 5.0, "shape": [4], "dtype": "float32"}
        >>> observation_finding(r, {"observation_space": space}, "a.npz").message
        ... # doctest: +ELLIPSIS
        'obses[3, 0][1] = 20 is outside Box(-5.0, 5.0, (4,)) (2 rows in 1 env): observations ...
    """
    recording = recording or {}
    declared = recording.get("observation_space")
    if not declared or changes_observations(recording):
        return None
    R, B = rollout.num_steps + 1, rollout.batch_size
    ends = np.nonzero(episode_ends(rollout.dones))
    finals = dict(_tree.flatten(rollout.final_obses)) if rollout.final_obses is not None else {}
    found: list[tuple[int, int, str, str, BoolArray]] = []
    for leaf_path, leaf in _tree.flatten(rollout.obses):
        space = leaf_space(declared, tuple(leaf_path))
        if space is None:
            continue
        name = _tree.format_path("obses", leaf_path)
        final = finals.get(tuple(leaf_path))
        final = np.asarray(final) if final is not None and len(final) else None
        flat = leaf.reshape(R * B, *leaf.shape[2:])
        rows = _outside(flat, space, BOX_MARGIN)
        bad = None if final is None else _outside(final, space, BOX_MARGIN)
        escapes = _escapes(space, rows, bad, flat, final)
        if rows is not None and (rows & escapes).any():
            mask = (rows & escapes).any(axis=-1).reshape(R, B)
            t, b = first_place(mask)
            i = int(np.flatnonzero((rows & escapes)[t * B + b])[0])
            value = leaf[t, b].reshape(-1)[i]
            found.append(
                (t, b, f"{name}[{t}, {b}]{_index(leaf, i)} = {value:g}", space_name(space), mask)
            )
        if final is not None and bad is not None and (bad & escapes).any():
            e = int(np.flatnonzero((bad & escapes).any(axis=-1))[0])
            t, b = int(ends[0][e]), int(ends[1][e])
            i = int(np.flatnonzero((bad & escapes)[e])[0])
            shown = f"final_obses{name[5:]}[{e}] (step {t}, env {b}){_index(leaf, i)}"
            value = final[e].reshape(-1)[i]
            mask = np.zeros((R, B), dtype=bool)
            mask[t, b] = True
            found.append((t, b, f"{shown} = {value:g}", space_name(space), mask))
    if not found:
        return None
    t, b, what, space_text, mask = min(found, key=lambda f: (f[0], f[1]))
    return Finding(
        "TK116",
        f"{what} is outside {space_text} ({count_places(mask, 'row')}): observations "
        "normalised, rescaled or clipped in place, while the recording names the raw space?",
        path,
        b,
        t,
    )


def _escapes(
    space: Mapping[str, Any],
    rows: BoolArray | None,
    bad: BoolArray | None,
    values: AnyArray,
    final: AnyArray | None,
) -> BoolArray | bool:
    """TK116, per feature of a Box leaf: whether its values leave the box as a rescale does.

    A feature bounded on both sides must be found past both, in the file's rows or final
    observations: an env's own state that runs past a soft bound leaves the box on one side
    (LunarLander's lander flies up past y = 2.5, as far as it likes), values rescaled around
    another centre leave it on both. Past its one bound suffices where the other side is
    unbounded. Other spaces are exact: every value outside counts.

    Examples:
        >>> box = {"type": "Box", "low": -1.0, "high": 1.0, "shape": [2]}
        >>> x = np.array([[9.0, 0.0], [-9.0, 9.0]])
        >>> _escapes(box, _outside(x, box, 1.0), None, x, None).tolist()
        [True, False]
    """
    if space.get("type") != "Box" or rows is None:
        return True
    shape = tuple(values.shape[1:])
    low = box_bound(space.get("low"), shape, -np.inf).reshape(-1)
    high = box_bound(space.get("high"), shape, np.inf).reshape(-1)
    both = [values.reshape(values.shape[0], -1)]
    if final is not None:
        both.append(final.reshape(final.shape[0], -1))
    flat = np.concatenate(both).astype(np.float64)
    out = np.concatenate([rows] + ([bad] if bad is not None else [])).astype(bool)
    below, above = (out & (flat < low)).any(axis=0), (out & (flat > high)).any(axis=0)
    two_sided = np.isfinite(low) & np.isfinite(high)
    result: BoolArray = np.where(two_sided, below & above, below | above)
    return result


def _index(leaf: AnyArray, i: int) -> str:
    """`[1]` or `[0, 2]`: the element `i` of a leaf's per-step shape (nothing for scalars)."""
    shape = leaf.shape[2:]
    if not shape:
        return ""
    return "[" + ", ".join(str(int(x)) for x in np.unravel_index(i, shape)) + "]"
