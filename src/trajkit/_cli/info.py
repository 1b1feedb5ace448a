"""`trajkit info` (one file, described) and `trajkit schema` (the JSON schemas)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from trajkit._base.errors import RolloutFileError
from trajkit._cli.common import (
    printable,
    refused,
)
from trajkit._core import gae as _gae
from trajkit._core import tree as _tree
from trajkit._io.files import load, read_metadata
from trajkit._io.metadata import RolloutFileMetadata
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, discrete_actions, output_name
from trajkit._models.spec import RolloutSpec


def _stats(values: np.ndarray[Any, Any]) -> str:
    v = values.astype(np.float64)
    return f"mean {v.mean():.6g}, std {v.std():.6g}, min {v.min():.6g}, max {v.max():.6g}"


def _episode_lines(r: Rollout) -> Iterator[str]:
    stats = r.episode_stats()
    line = f"episode ends:      {stats.episodes} within the steps (dones[1:] == 1)"
    if r.truncated is not None:
        line += f", {stats.truncations} of them truncated"
    yield line
    starts, first = int((r.dones == 1).sum()), int((r.dones[0] == 1).sum())
    yield f"episode starts:    {starts} (dones == 1), {first} at t=0"
    complete = f"complete episodes: {len(stats.returns)} (start and end inside the rollout)"
    if len(stats.returns):
        complete += f", mean return {stats.mean_return:.6g}, mean length {stats.lengths.mean():.6g}"
    yield complete


def info_command(args: argparse.Namespace) -> int:
    path: str = args.path
    try:
        meta = read_metadata(path, max_bytes=args.max_bytes)
        r = load(path, mmap=True, max_bytes=args.max_bytes)
    except RolloutFileError as exc:
        print(refused(path, exc), file=sys.stderr)
        return 1
    size = os.path.getsize(path)
    lines = [
        f"file:              {path} ({size} bytes; format {meta.format} v{meta.format_version}, "
        f"written by trajkit {meta.trajkit_version})",
        f"steps (T):         {r.num_steps}",
        f"envs (B):          {r.batch_size}",
        *_episode_lines(r),
        f"model outputs:     {', '.join(r.model_outs.keys()) or '(none)'}",
        f"actions:           {_action_kind(r.model_outs.arrays)}",
        "arrays:",
    ]
    arrays: list[tuple[str, np.ndarray[Any, Any] | None]] = [
        (_tree.format_path(name, path), leaf)
        for name in FIELD_RULES  # (unset ones count in the width, as they always did)
        for path, leaf in _tree.flatten(getattr(r, name))
    ]
    arrays += [(output_name(k), a) for k, a in r.model_outs.arrays.items()]
    width = max(len(name) for name, _ in arrays)
    for name, array in arrays:
        if array is not None:
            lines.append(f"  {name.ljust(width)}  {str(array.dtype).ljust(8)} {array.shape}")
    keys = sorted({key for row in r.infos for item in row for key in item})
    lines.append(
        f"infos:             {r.num_steps} x {r.batch_size} dicts; keys: "
        f"{', '.join(keys) or '(none)'}"
    )
    if r.num_steps == 0:
        lines.append("rewards:           (no steps)")
    else:
        rews = np.asarray(r.rews, np.float64)
        lines.append(f"rewards:           sum {rews.sum():.6g}, {_stats(rews)}")
        if "critic" in r.model_outs.arrays:
            with _gae.preferring("numpy"):  # one file: numba's import would cost more
                adv = r.advantages(args.gamma, args.lam)
            lines.append(f"advantages:        {_stats(adv)} (gamma={args.gamma}, lam={args.lam})")
    print("\n".join(map(printable, lines)))
    return 0


def _action_kind(outs: Mapping[str, np.ndarray[Any, Any]]) -> str:
    """The kind of action space the stored actions come from, as far as the arrays tell."""
    actions = outs.get("actions")
    if actions is None:
        return "(none)"
    shape = f"per step {tuple(actions.shape[2:])}"
    if actions.dtype.kind == "f":
        return f"continuous (Box), float, {shape}"
    if discrete_actions(outs):
        return f"discrete, integer in [0, {outs['actor'].shape[-1]}) (A from model_outs['actor'])"
    if actions.ndim == 2:
        return "discrete, integer"
    return f"multi-discrete or multi-binary, integer, {shape}"


def schema_command(args: argparse.Namespace) -> int:
    model = RolloutFileMetadata if args.metadata else RolloutSpec
    print(json.dumps(model.model_json_schema(), indent=2))
    return 0
