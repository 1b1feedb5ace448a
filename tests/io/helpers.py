"""What the file tests share: rollouts whose members hold a given number of bytes, ZIP members."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Literal

import numpy as np

from trajkit import Rollout

Kind = Literal["obses", "states", "dones", "model_outs", "infos"]
Pattern = Literal["zeros", "random", "runs"]
KINDS: tuple[Kind, ...] = ("obses", "states", "dones", "model_outs", "infos")
PATTERNS: tuple[Pattern, ...] = ("zeros", "random", "runs")


def values(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, pattern: Pattern) -> Any:
    """An array of `shape` and `dtype`: zeros, random values, or runs of one random value."""
    size = int(np.prod(shape))
    if pattern == "zeros" or size == 0:
        return np.zeros(shape, dtype)
    if dtype == "bool":
        flat = rng.integers(0, 2, size).astype(bool)
    elif dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    else:
        flat = rng.standard_normal(size).astype(dtype)
    if pattern == "runs":  # long repeats: matches longer than any buffer
        flat = np.repeat(flat[: max(1, size // 5000)], 5000)[:size]
        flat = np.resize(flat, size)
    return flat.reshape(shape)


def rollout_with(
    kind: Kind, nbytes: int, pattern: Pattern, dtype: str = "float32", seed: int = 0
) -> Rollout:
    """A rollout whose `kind` member holds about `nbytes` bytes of data (exactly, where it can)."""
    rng = np.random.default_rng(seed)
    itemsize = np.dtype(dtype).itemsize
    T, B, width = 0, 1, 1
    obs_dtype, out_dtype = "float32", "int16"
    if kind in ("obses", "model_outs"):
        width = nbytes // itemsize
        obs_dtype = out_dtype = dtype
    elif kind == "states":
        width = nbytes // 4
    elif kind == "dones":
        T = max(0, nbytes // 4 - 1)
    obs_width = width if kind == "obses" else 2
    state_width = width if kind == "states" else 1
    out_width = width if kind == "model_outs" else 1
    dones = np.zeros((T + 1, B), np.float32)
    if pattern != "zeros":
        dones = values(rng, (T + 1, B), "bool", pattern).astype(np.float32)
    infos = None
    if kind == "infos":
        T = 1
        dones = np.zeros((T + 1, B), np.float32)
        text = "a" * nbytes if pattern != "random" else rng.bytes(nbytes // 2).hex()
        infos = [[{"s": text, "n": list(range(8))}]]
    return Rollout(
        obses=values(rng, (T + 1, B, obs_width), obs_dtype, pattern),
        states=values(rng, (T + 1, B, state_width), "float32", pattern),
        rews=values(rng, (T, B), "float32", pattern),
        dones=dones,
        infos=infos,
        model_outs={"x": values(rng, (T + 1, B, out_width), out_dtype, pattern)},
    )


def members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def rebuild(path: Path, contents: dict[str, bytes], *, compress: bool = False) -> Path:
    """A well-formed ZIP with these members, in this order (metadata.json first if present)."""
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in contents.items():
            archive.writestr(name, data)
    return path
