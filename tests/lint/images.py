"""Generated image datasets for TK201: frames whose border, background and HUD never change.

`image_set(seed, frozen=False)` draws a dataset of uint8 frames as Atari-, Procgen- or
MiniGrid-like envs give them: a layout (`(H, W)`, `(H, W, 3)`, a stack `(H, W, 4)`,
`(3, H, W)`, `(2, H, W, 3)`), a size, a background colour, a border and a HUD bar of
constant colour, and a 3x3 sprite that moves at random; 1 to 3 files of 1 to 4 envs, just
over TK201's 10,000 observations, with episode ends at random. Most pixels never change:
the background where the sprite never passes, the border, the HUD. With `frozen`, one
channel never changes in any file (a frame-stack slot never filled, a colour channel
dropped; a gray `(H, W)` frame is one still picture): the bug TK201 is for.

`rates(seeds)` counts the clean sets TK201 reports on and the frozen ones it finds.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from trajkit import Rollout
from trajkit.lint.config import LintOptions
from trajkit.lint.crossfile import MIN_OBSERVATIONS
from trajkit.lint.registry import Finding
from trajkit.lint.run import LintFold, lint_rollout
from trajkit.testing import example_rollout

Frames = np.ndarray[tuple[int, ...], np.dtype[np.uint8]]

LAYOUTS: dict[str, tuple[int, int]] = {
    "hw": (1, 1),  # the frames N and channels C of each layout
    "hwc": (1, 3),
    "stack": (1, 4),
    "chw": (1, 3),
    "nhwc": (2, 3),
}


def _frames(
    rng: np.random.Generator, rows: int, B: int, layout: str, scene: dict[str, int]
) -> Frames:
    """`[rows, B, ...]` frames of `layout`: the background, a sprite, a border and a HUD."""
    N, C = LAYOUTS[layout]
    H, W, hud, border = scene["H"], scene["W"], scene["hud"], scene["border"]
    canonical = np.full((rows, B, H, W, N, C), scene["background"], np.uint8)
    ys = rng.integers(hud + border, H - border - 2, (rows, B))
    xs = rng.integers(border, W - border - 2, (rows, B))
    t, b = np.ogrid[:rows, :B]
    delta = np.arange(3)
    Y = (ys[:, :, None] + delta)[:, :, :, None]
    X = (xs[:, :, None] + delta)[:, :, None, :]
    color = rng.integers(0, 256, (rows, B), dtype=np.uint8)
    canonical[t[:, :, None, None], b[:, :, None, None], Y, X] = color[:, :, None, None, None, None]
    canonical[:, :, :hud] = 200  # the HUD bar
    if border:
        edge = np.zeros((H, W), bool)
        edge[:border] = edge[-border:] = edge[:, :border] = edge[:, -border:] = True
        canonical[:, :, edge] = scene["border_color"]
    if layout == "hw":
        view = canonical[..., 0, 0]
    elif layout == "chw":
        view = canonical[..., 0, :].transpose(0, 1, 4, 2, 3)
    elif layout == "nhwc":
        view = canonical.transpose(0, 1, 4, 2, 3, 5)
    else:
        view = canonical[..., 0, :]
    return np.ascontiguousarray(view)


def _freeze(frames: Frames, layout: str, seed: int) -> None:
    """One channel that never changes: the last, the first frame's last, or a still picture."""
    if layout == "hw":
        frames[:] = np.random.default_rng(seed).integers(0, 256, frames.shape[2:], dtype=np.uint8)
    elif layout == "chw":
        frames[:, :, 0] = 0
    elif layout == "nhwc":
        frames[:, :, 1, ..., 2] = 0
    else:
        frames[..., -1] = 0


def image_set(seed: int, *, frozen: bool = False) -> list[Rollout]:
    """One generated image dataset (see the module); `frozen` plants a channel that never changes.

    Examples:
        >>> files = image_set(0)
        >>> sum(r.batch_size * (r.num_steps + 1) for r in files) >= 10_000
        True
    """
    rng = np.random.default_rng(seed)
    layout = str(rng.choice(list(LAYOUTS)))
    H, W = (int(x) for x in rng.integers(12, 25, 2))
    scene = {
        "H": H,
        "W": W,
        "hud": int(rng.integers(0, 4)),
        "border": int(rng.integers(0, 3)),
        "background": int(rng.integers(0, 256)),
        "border_color": int(rng.integers(0, 256)),
    }
    files, B = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    T = -(-(MIN_OBSERVATIONS + 500) // (files * B))
    out = []
    for f in range(files):
        r = example_rollout(num_steps=T, num_envs=B, seed=seed * 10 + f, done_prob=0.05, keys=())
        frames = _frames(rng, T + 1, B, layout, scene)
        if frozen:
            _freeze(frames, layout, seed)
        out.append(r.replace(obses=frames))
    return out


def tk201(files: list[Rollout]) -> list[Finding]:
    """TK201's findings on in-memory files, as `trajkit lint --select TK201` gives them."""
    options = LintOptions(frozenset({"TK201"}))
    fold = LintFold(options)
    found = []
    for i, r in enumerate(files):
        found += fold.add(lint_rollout(r, f"r{i}.npz", None, options))
    return found + fold.finish()


def rates(seeds: Iterable[int]) -> tuple[int, int, int]:
    """Over `seeds`: the sets, the clean ones TK201 reports on, the frozen ones it finds."""
    sets = false = found = 0
    for seed in seeds:
        sets += 1
        false += bool(tk201(image_set(seed)))
        found += bool(tk201(image_set(seed, frozen=True)))
    return sets, false, found
