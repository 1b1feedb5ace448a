"""What the recorder calls: the policy and the states hook (a leaf: the guard imports it)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from trajkit._base.types import ArrayLike

__all__ = ["Policy", "StateFn"]

Policy: TypeAlias = Callable[[Any], Mapping[str, ArrayLike]]
"""A policy: a batch of observations -> model outputs, each `[B, ...]`.

The batch is what the vector env returns: an array `[B, ...]`, or for `Dict` and `Tuple`
observation spaces a dict or tuple of such arrays. The outputs must include `actions` (an
element of the action space per env: integer `[B]` for Discrete, `[B, K]` for MultiDiscrete
and MultiBinary, float `[B, ...]` for Box); `critic` (float `[B]`), `log_probs` (float `[B]`)
and `actor` (logits `[B, A]`) are recorded when present, as is any other key.
"""

StateFn: TypeAlias = Callable[[Any], ArrayLike]
"""An optional hook: the vector env -> its environments' states `[B, ...]` (stored as float32)."""
