"""Gymnasium's vector infos turned into the rollout's per-env, JSON-compatible infos.

Gymnasium's vector info dict holds arrays with `_key` masks and nested dicts (such as
`RecordEpisodeStatistics`' `episode`); the recorder keeps, per step and env, a dict of the
keys present for that env (`step_info`), and the returns the env reports
(`episode_returns`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import numpy as np

__all__ = ["BOOKKEEPING_KEYS", "episode_returns", "keeps_infos", "step_info"]

BOOKKEEPING_KEYS: Final = frozenset({"final_obs", "final_info"})
"""SAME_STEP's keys that say how the env reset, not what happened: never recorded."""


def _jsonable(value: Any) -> Any:
    """NumPy scalars to Python scalars and arrays to (nested) lists, recursively."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist()) if value.dtype == object else value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def _is_per_env(value: Any, num_envs: int) -> bool:
    """Whether `value` holds one entry per env (an array or sequence of length B)."""
    if isinstance(value, np.ndarray):
        return value.ndim >= 1 and value.shape[0] == num_envs
    return isinstance(value, list | tuple) and len(value) == num_envs


def _env_info(vector_info: Mapping[str, Any], b: int, num_envs: int) -> dict[str, Any]:
    """Env `b`'s part of a Gymnasium vector info dict (arrays with `_key` masks, nested dicts).

    Keeps only the keys present for env `b` (mask true, or no mask), recursively.
    """
    out: dict[str, Any] = {}
    for key, value in vector_info.items():
        name = str(key)
        if name.startswith("_") and name[1:] in vector_info:
            continue  # the mask of key name[1:]
        mask = vector_info.get(f"_{name}")
        if mask is not None and not bool(np.asarray(mask)[b]):
            continue
        if isinstance(value, Mapping):
            out[name] = _env_info(value, b, num_envs)
        elif _is_per_env(value, num_envs):
            out[name] = _jsonable(value[b])
        else:
            out[name] = _jsonable(value)
    return out


def keeps_infos(infos: Mapping[str, Any], info_keys: frozenset[str] | None) -> bool:
    """Whether a step's vector info can hold anything the rollout keeps (of `info_keys`)."""
    if info_keys is not None and not info_keys:
        return False
    for key, value in infos.items():
        name = str(key)
        if name.startswith("_") and name[1:] in infos:
            continue  # a mask
        if name not in BOOKKEEPING_KEYS or (name == "final_info" and value):
            return True
    return False


def episode_returns(infos: Mapping[str, Any], num_envs: int) -> dict[int, float]:
    """The returns the env reports this step in `info["episode"]["r"]`, by env.

    As `RecordEpisodeStatistics` (the vector wrapper, or the per-env one inside the
    vector env) puts them: a dict of per-env arrays with the mask `_episode`; under
    SAME_STEP the per-env wrapper's are in `final_info` (which wins, as in `infos`).
    Anything else is ignored (the recorder's own sums stand).
    """
    B = num_envs
    found: dict[int, float] = {}
    for source in (infos, infos.get("final_info")):
        if not isinstance(source, Mapping):
            continue
        episode = source.get("episode")
        if not isinstance(episode, Mapping) or "r" not in episode:
            continue
        returns = np.asarray(episode["r"])
        mask = np.asarray(source.get("_episode", np.ones(B, bool)))
        if returns.shape != (B,) or returns.dtype.kind not in "biuf" or mask.shape != (B,):
            continue
        for b in np.flatnonzero(mask).tolist():
            found[b] = float(returns[b])
    return found


def step_info(
    infos: Mapping[str, Any], b: int, num_envs: int, info_keys: frozenset[str] | None
) -> dict[str, Any]:
    """Env `b`'s info for a step: JSON-compatible, final_info merged, `info_keys` kept."""
    if info_keys is not None and not info_keys:
        return {}
    B = num_envs
    info = {
        key: value for key, value in _env_info(infos, b, B).items() if key not in BOOKKEEPING_KEYS
    }
    final_info = infos.get("final_info")
    final_mask = infos.get("_final_info")
    if isinstance(final_info, Mapping) and final_mask is not None and np.asarray(final_mask)[b]:
        info.update(_env_info(final_info, b, B))  # SAME_STEP: the ending step's own info
    if info_keys is not None:
        info = {key: value for key, value in info.items() if key in info_keys}
    return info
