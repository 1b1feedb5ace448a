"""The episodes the report shows: picked by return, then read from their files alone.

The best and the worst complete episodes are exact (tracked in every file); the median one
is the median of the sampled episodes. Only the (at most three) files that hold them are
opened again, memory-mapped, and only what is shown is read: `FRAMES` frames of an image
leaf, at most `MAX_POINTS` rows of the vector leaves, the episode's rewards. Without a
complete episode, the first steps of the first env of the first valid file are shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from trajkit._base.errors import RolloutFileError
from trajkit._base.types import AnyArray, Float64Array
from trajkit._core import tree as _tree
from trajkit._io.files import DEFAULT_MAX_BYTES
from trajkit._io.remote import load_any
from trajkit._models.rollout import Rollout
from trajkit._models.rules import episode_ends
from trajkit.report._collect import Collection
from trajkit.report._profile import MAX_FEATURES, image_layout

__all__ = ["FRAMES", "MAX_POINTS", "MAX_TRACES", "Pick", "View", "episode_views", "picks"]

FRAMES = 8
"""Frames shown per episode of image observations, evenly spaced."""

MAX_POINTS = 2000
"""The most rows of an episode drawn as traces (longer episodes are strided)."""

MAX_TRACES = 8
"""The most observation dimensions drawn as traces."""

_SEGMENT_STEPS = 200  # steps shown when no episode is complete


@dataclass(frozen=True)
class Pick:
    """An episode chosen for the viewer.

    Attributes:
        title: Why it was chosen: `"Best return"`, `"Median return"`, `"Worst return"`, or
            `"First steps"` (no complete episode).
        path: Its file.
        env: Its env column.
        first: Its first row.
        length: Its number of steps.
        ret: Its return.
        ending: `"terminated"`, `"truncated"`, or `"goes on"` (a segment).
    """

    title: str
    path: str
    env: int
    first: int
    length: int
    ret: float
    ending: str


@dataclass(frozen=True)
class View:
    """What the viewer draws of one picked episode.

    Attributes:
        pick: The episode.
        steps: The rows drawn as traces (episode steps, from 0).
        rewards: The rewards at those steps.
        ends: Steps within the episode where an episode ended (a segment's ends).
        traces: `(label, values)` of the observation dimensions drawn.
        frame_steps: The steps of the frames shown.
        frames: `(leaf name, frames)`: each frame `[H, W]` (gray) or `[H, W, 3]`, uint8.
    """

    pick: Pick
    steps: AnyArray
    rewards: Float64Array
    ends: list[int] = field(default_factory=list)
    traces: list[tuple[str, Float64Array]] = field(default_factory=list)
    frame_steps: list[int] = field(default_factory=list)
    frames: list[tuple[str, list[AnyArray]]] = field(default_factory=list)


def picks(collection: Collection) -> list[Pick]:
    """The best, median and worst complete episodes (each once), or a first segment.

    Examples:
        >>> from trajkit.report._collect import Collection
        >>> from trajkit.report._profile import profile_rollout
        >>> from trajkit.testing import example_rollout
        >>> c = Collection()
        >>> c.add(profile_rollout(example_rollout(num_steps=64, num_envs=2), "a.npz"))
        >>> [p.title for p in picks(c)]
        ['Best return', 'Median return', 'Worst return']
    """
    if collection.episodes is None or collection.best is None or collection.worst is None:
        return _segment(collection)
    rows = collection.episodes.values
    median = rows[np.argsort(rows[:, 0], kind="stable")[(len(rows) - 1) // 2]]
    chosen: list[Pick] = []
    seen: set[tuple[float, ...]] = set()
    for title, row in (
        ("Best return", collection.best),
        ("Median return", median),
        ("Worst return", collection.worst),
    ):
        key = (row[-1], row[3], row[4])  # file, env, first row
        if key in seen:
            continue
        seen.add(key)
        ret, length, cut, env, first, number = row.tolist()
        chosen.append(
            Pick(
                title,
                collection.path_of(int(number)),
                int(env),
                int(first),
                int(length),
                ret,
                "truncated" if cut else "terminated",
            )
        )
    return chosen


def _segment(collection: Collection) -> list[Pick]:
    meta, path = collection.metadata, collection.first_path
    if meta is None or path is None or meta.num_steps == 0:
        return []
    length = min(meta.num_steps, _SEGMENT_STEPS)
    return [Pick("First steps", path, 0, 0, length, math.nan, "goes on")]


def episode_views(chosen: list[Pick], *, max_bytes: int | None = DEFAULT_MAX_BYTES) -> list[View]:
    """Read what the viewer shows of each picked episode (its file memory-mapped).

    A file that can no longer be read (replaced or removed since) is left out.
    """
    views: list[View] = []
    for pick in chosen:
        try:
            rollout = load_any(pick.path, mmap=True, max_bytes=max_bytes)
        except RolloutFileError:  # changed or removed since it was read: not shown
            continue
        views.append(_view(rollout, pick))
        del rollout
    return views


def _view(rollout: Rollout, pick: Pick) -> View:
    stop = pick.first + pick.length
    stride = max(1, math.ceil(pick.length / MAX_POINTS))
    rows = np.arange(pick.first, stop, stride)
    rewards = np.asarray(rollout.rews)[pick.first : stop, pick.env].astype(np.float64)
    ends = np.flatnonzero(episode_ends(np.asarray(rollout.dones)[pick.first : stop + 1, pick.env]))
    if pick.ending != "goes on":
        ends = ends[:-1]  # the episode's own end is drawn apart
    frame_steps = np.unique(np.linspace(0, pick.length - 1, FRAMES).round().astype(int))
    traces: list[tuple[str, Float64Array]] = []
    frames: list[tuple[str, list[AnyArray]]] = []
    for where, leaf in _tree.flatten(rollout.obses):
        name = _tree.format_path("obses", where)
        layout = image_layout(leaf.shape[2:], leaf.dtype)
        if layout is not None:
            shown = [_display(leaf[pick.first + int(s), pick.env], layout) for s in frame_steps]
            frames.append((name, shown))
        elif len(traces) < MAX_TRACES and math.prod(leaf.shape[2:]) <= MAX_FEATURES:
            traces.extend(_traces(name, leaf, rows, pick.env, MAX_TRACES - len(traces)))
    return View(
        pick,
        rows - pick.first,
        rewards[::stride] if stride > 1 else rewards,
        ends.tolist(),
        traces,
        frame_steps.tolist() if frames else [],
        frames,
    )


def _traces(
    name: str, leaf: AnyArray, rows: AnyArray, env: int, most: int
) -> list[tuple[str, Float64Array]]:
    shape = leaf.shape[2:]
    values = np.asarray(leaf[rows, env], dtype=np.float64).reshape(len(rows), -1)
    out: list[tuple[str, Float64Array]] = []
    for index in range(min(values.shape[1], most)):
        where = np.unravel_index(index, shape) if shape else ()
        label = name + "".join(f"[{int(i)}]" for i in where)
        out.append((label, values[:, index]))
    return out


def _display(frame: AnyArray, layout: str) -> AnyArray:
    """One observation as a picture: `[H, W]` gray or `[H, W, 3]` RGB (a stack's last frame)."""
    image = np.asarray(frame)
    if layout == "nhwc":
        image = image[-1]
    elif layout == "chw":
        image = image[-1] if image.shape[0] == 4 else np.moveaxis(image, 0, -1)
    if image.ndim == 3 and image.shape[-1] in (1, 4):
        image = image[..., -1]  # one gray channel, or the last of a stack of 4
    return np.ascontiguousarray(image)
