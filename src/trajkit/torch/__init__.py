"""Minibatches as PyTorch tensors, on the device you train on (needs `trajkit[torch]`).

A rollout becomes tensors once, minibatches are cut from them by torch where they live:
[`training_tensors`][trajkit.torch.training_tensors] computes advantages and returns and turns
the arrays PPO reads into `[T·B, ...]` tensors (zero-copy on the CPU, one transfer to a GPU), and
[`minibatches`][trajkit.torch.minibatches] draws each epoch's permutation exactly as
[`Rollout.minibatches`][trajkit.Rollout.minibatches] does and gathers every minibatch where the
tensors live: `Tensor.index_select` on a GPU, NumPy's faster `take` on the memory the CPU
tensors share. PyTorch is imported here only, never by
`import trajkit`; without it, calling these functions raises an `ImportError` that says
`pip install 'trajkit[torch]'`.

Conversion rules, leaf by leaf (nested `obses` and `states` keep their dict/tuple structure):

- on the CPU, `torch.from_numpy` shares the array's memory: no copy (a read-only or
  non-contiguous array, such as a memory map, is copied once);
- on a CUDA device, each array is sent once per rollout by
  [`training_tensors`][trajkit.torch.training_tensors]; [`to_tensor`][trajkit.torch.to_tensor]
  on its own copies into pinned (page-locked) memory and sends with `non_blocking=True`;
- floating-point arrays become float32 (the dtype networks train in);
- integer actions (`actions` of a PPO minibatch, `action` of a transition minibatch), signed
  or unsigned, become int64, the dtype `torch.nn.functional.cross_entropy`, `one_hot` and
  `gather` index with; other integer and bool arrays (uint8 images, say) keep their dtype.

Transitions for offline RL and imitation learning (no critic needed) become tensors by
[`to_tensors`][trajkit.torch.to_tensors]:
`(to_tensors(mb, device) for mb in trajkit.transition_minibatches(source, ...))`.

The package holds one concept per module: `_convert` (arrays, and a rollout's training
arrays, to tensors) and `_sampler` (minibatches, on the minibatch engine of
`trajkit._core.minibatch`).

Examples:
    >>> import torch
    >>> import trajkit.torch
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=8, num_envs=4)
    >>> batch = next(trajkit.torch.minibatches(r, 16, gamma=0.99, lam=0.95, seed=0))
    >>> sorted(batch)
    ['actions', 'advantages', 'critic', 'log_probs', 'obses', 'returns']
    >>> batch["actions"].dtype, batch["advantages"].dtype, batch["obses"].shape
    (torch.int64, torch.float32, torch.Size([16, 4]))
"""

from __future__ import annotations

from typing import Any

from trajkit.torch._convert import (
    PPO_KEYS,
    Device,
    PPOBatch,
    to_tensor,
    to_tensors,
    training_tensors,
)
from trajkit.torch._sampler import minibatches

__all__ = [
    "PPO_KEYS",
    "Device",
    "PPOBatch",
    "minibatches",
    "to_tensor",
    "to_tensors",
    "training_tensors",
]


def __getattr__(name: str) -> Any:
    """The deprecated names, kept out of `__all__`: each warns when it is called."""
    if name == "transition_minibatches":
        from trajkit.torch._sampler import transition_minibatches

        return transition_minibatches
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
