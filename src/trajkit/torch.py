"""Minibatches as PyTorch tensors, on the device you train on (needs `trajkit[torch]`).

NumPy inside, tensors out at the last step: [`minibatches`][trajkit.torch.minibatches] gathers
each minibatch with [`Rollout.minibatches`][trajkit.Rollout.minibatches] and converts it with
[`to_tensors`][trajkit.torch.to_tensors]. PyTorch is imported here only, never by
`import trajkit`; without it, calling these functions raises an `ImportError` that says
`pip install 'trajkit[torch]'`.

Conversion rules, leaf by leaf (nested `obses` and `states` keep their dict/tuple structure):

- on the CPU, `torch.from_numpy` shares the gathered array's memory: no copy;
- on a CUDA device, the array is copied into pinned (page-locked) memory and sent with
  `non_blocking=True`, so the copy overlaps the work already queued on the device;
- floating-point arrays become float32 (the dtype networks train in);
- integer `actions` become int64, the dtype `torch.nn.functional.cross_entropy`,
  `one_hot` and `gather` index with; other integer and bool arrays (uint8 images, say) keep
  their dtype.

Examples:
    >>> import torch
    >>> import trajkit.torch
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=8, num_envs=4)
    >>> batch = next(trajkit.torch.minibatches(r, 16, gamma=0.99, lam=0.95, seed=0))
    >>> batch["actions"].dtype, batch["advantages"].dtype, batch["obses"].shape
    (torch.int64, torch.float32, torch.Size([16, 4]))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

from trajkit._base.optional import require
from trajkit._base.rng import as_generator
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout

if TYPE_CHECKING:
    import torch

__all__ = ["Device", "minibatches", "to_tensor", "to_tensors"]

Device: TypeAlias = "str | torch.device"
"""A torch device or its name: `"cpu"`, `"cuda"`, `"cuda:1"`, ..."""

_INT64_KEYS = frozenset({"actions"})


def _torch() -> Any:
    return require("torch", "torch", "trajkit.torch")


def to_tensor(array: AnyArray, device: Device = "cpu", *, key: str | None = None) -> torch.Tensor:
    """One array as a tensor on `device`, by the conversion rules of this module.

    Args:
        array: A NumPy array.
        device: Where the tensor should live.
        key: The name of the array in a batch: `"actions"` makes integer arrays int64.

    Returns:
        The tensor; on the CPU it shares memory with `array` when no dtype change is needed
        and the array is writable (a read-only array, such as a memory map, is copied).

    Examples:
        >>> import numpy as np
        >>> a = np.arange(3, dtype=np.float32)
        >>> t = to_tensor(a)
        >>> t[0] = 7.0
        >>> float(a[0])  # shared memory: no copy on the CPU
        7.0
        >>> to_tensor(np.arange(3, dtype=np.int32), key="actions").dtype
        torch.int64
    """
    torch = _torch()
    target = torch.device(device)
    array = np.asarray(array)
    if array.dtype.kind == "f" and array.dtype != np.float32:
        array = array.astype(np.float32)
    elif array.dtype.kind in "iu" and key in _INT64_KEYS and array.dtype != np.int64:
        array = array.astype(np.int64)
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array).copy()
    tensor = torch.from_numpy(array)
    if target.type == "cpu":
        return tensor  # type: ignore[no-any-return]
    return tensor.pin_memory().to(target, non_blocking=True)  # type: ignore[no-any-return]


def to_tensors(batch: Mapping[str, Any], device: Device = "cpu") -> dict[str, Any]:
    """Every array of a minibatch as a tensor on `device`, keeping nested structures.

    Args:
        batch: A minibatch as [`Rollout.minibatches`][trajkit.Rollout.minibatches] yields it:
            name to array, or to a dict/tuple of arrays for nested `obses` and `states`.
        device: Where the tensors should live.

    Returns:
        The same names, with tensors (dicts and tuples of tensors for nested values).

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=2, nested=True)
        >>> mb = next(r.minibatches(4, gamma=0.9, lam=0.9, seed=0))
        >>> t = to_tensors(mb)
        >>> type(t["obses"]).__name__, t["obses"]["image"].dtype
        ('dict', torch.uint8)
    """
    out: dict[str, Any] = {}
    for key, value in batch.items():

        def convert(leaf: AnyArray, key: str = key) -> torch.Tensor:
            return to_tensor(leaf, device, key=key)

        out[key] = _tree.map_leaves(convert, value)
    return out


def minibatches(
    rollout: Rollout,
    minibatch_size: int,
    *,
    gamma: float,
    lam: float,
    epochs: int = 1,
    drop_last: bool = False,
    seed: int | np.random.Generator | None = None,
    device: Device = "cpu",
    normalize_advantages: Literal["rollout", "minibatch"] | None = None,
) -> Iterator[dict[str, Any]]:
    """Shuffled PPO minibatches of a rollout, as tensors on `device`.

    The same minibatches as [`Rollout.minibatches`][trajkit.Rollout.minibatches] (same
    arguments, same `seed`, same order), each converted by
    [`to_tensors`][trajkit.torch.to_tensors].

    Args:
        rollout: The rollout (it must have a `critic` for advantages and returns).
        minibatch_size: Entries per minibatch, at least 1.
        gamma: Discount, finite, in [0, 1].
        lam: GAE λ, finite, in [0, 1].
        epochs: Passes over the data.
        drop_last: Drop each epoch's last, smaller minibatch.
        seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy.
        device: Where the tensors should live.
        normalize_advantages: `None`, `"rollout"` or `"minibatch"` (standardize each
            minibatch with the unbiased std, as stable-baselines3 and CleanRL do); see
            [`Rollout.minibatches`][trajkit.Rollout.minibatches].

    Returns:
        An iterator of minibatches, each name to tensor: `obses`, `states`, `dones`, `rews`,
        `advantages`, `returns` and every model output (`actions` as int64 when integer).

    Raises:
        ImportError: If PyTorch is not installed.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=3)
        >>> [len(mb["returns"]) for mb in minibatches(r, 5, gamma=0.99, lam=0.95, seed=0)]
        [5, 5, 2]
    """
    _torch()  # fail at the call, not at the first minibatch, when torch is missing
    rng = as_generator(seed)
    batches = rollout.minibatches(
        minibatch_size,
        gamma=gamma,
        lam=lam,
        epochs=epochs,
        drop_last=drop_last,
        seed=rng,
        normalize_advantages=normalize_advantages,
    )
    return (to_tensors(batch, device) for batch in batches)
