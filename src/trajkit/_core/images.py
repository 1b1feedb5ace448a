"""Which observations hold images, and how: what the report shows as frames and lint judges whole.

`image_layout` is the one definition: `trajkit report` draws such a leaf as pictures, and
`trajkit lint`'s TK201 judges it by channel (a pixel that never changes is a frame's border
or background, a channel that never changes is a camera that does not look).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["channel_axes", "image_layout"]


def image_layout(shape: Sequence[int], dtype: DTypeLike) -> str | None:
    """How a per-step observation holds an image: `"hw"`, `"hwc"`, `"chw"`, `"nhwc"`, or `None`.

    An image is `uint8`, at least 8 pixels each way: gray `(H, W)`; `(H, W, C)` with C of 1,
    3 (RGB) or 4 (taken as a stack of 4 gray frames, as Atari's); `(C, H, W)` with C of 1, 3
    or 4; a stack of frames `(N, H, W, C)` with C of 1 or 3.

    Examples:
        >>> image_layout((84, 84, 4), "uint8"), image_layout((4, 84, 84), "uint8")
        ('hwc', 'chw')
        >>> image_layout((84, 84), "float32"), image_layout((4,), "uint8")
        (None, None)
    """
    if np.dtype(dtype) != np.uint8:
        return None
    dims = tuple(int(d) for d in shape)

    def big(*sides: int) -> bool:
        return all(side >= 8 for side in sides)

    if len(dims) == 2 and big(*dims):
        return "hw"
    if len(dims) == 3 and dims[2] in (1, 3, 4) and big(dims[0], dims[1]):
        return "hwc"
    if len(dims) == 3 and dims[0] in (1, 3, 4) and big(dims[1], dims[2]):
        return "chw"
    if len(dims) == 4 and dims[3] in (1, 3) and big(dims[1], dims[2]):
        return "nhwc"
    return None


def channel_axes(layout: str) -> tuple[int, ...]:
    """The axes of a per-step image that span one channel's pixels (H and W).

    Examples:
        >>> channel_axes("hw"), channel_axes("hwc"), channel_axes("chw"), channel_axes("nhwc")
        ((0, 1), (0, 1), (1, 2), (1, 2))
    """
    return (1, 2) if layout in ("chw", "nhwc") else (0, 1)
