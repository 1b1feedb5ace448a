"""Arrays as PyTorch tensors, by trajkit's conversion rules (see `trajkit.torch`).

PyTorch is imported here, on first use, never by `import trajkit`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np

from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree

if TYPE_CHECKING:
    import torch

__all__ = [
    "Device",
    "TensorTree",
    "device_of",
    "host_array",
    "to_tensor",
    "to_tensors",
    "torch_module",
]

Device: TypeAlias = "str | torch.device"
"""A torch device or its name: `"cpu"`, `"cuda"`, `"cuda:1"`, ..."""

TensorTree: TypeAlias = Any
"""A tensor, or a dict/tuple of them for nested observations (Gymnasium `Dict`, `Tuple`)."""


_INT64_KEYS = frozenset({"actions", "action"})

_torch_module: Any = None


def torch_module() -> Any:
    """The `torch` module, imported on first use and then kept (no import machinery per call)."""
    global _torch_module
    module = _torch_module
    if module is None:
        module = _torch_module = require("torch", "torch", "trajkit.torch")
    return module


@functools.lru_cache(maxsize=32)
def _named_device(name: str) -> torch.device:
    return cast("torch.device", torch_module().device(name))


def device_of(device: Device) -> torch.device:
    """`device` as a `torch.device`; a name is parsed once, then remembered."""
    if isinstance(device, str):
        return _named_device(device)
    return device


def host_array(array: AnyArray, key: str | None) -> AnyArray:
    """`array` with the dtype of the conversion rules, writable and C-contiguous."""
    array = np.asarray(array)
    kind = array.dtype.kind
    if kind == "f" and array.dtype != np.float32:
        array = array.astype(np.float32)
    elif kind in "iu" and key in _INT64_KEYS and array.dtype != np.int64:
        array = array.astype(np.int64)
    if not array.flags.writeable or not array.flags.c_contiguous:
        array = np.ascontiguousarray(array).copy()
    return array


def to_tensor(array: AnyArray, device: Device = "cpu", *, key: str | None = None) -> torch.Tensor:
    """One array as a tensor on `device`, by the conversion rules of this module.

    Args:
        array: A NumPy array.
        device: Where the tensor should live.
        key: The name of the array in a batch: `"actions"` and `"action"` make integer
            arrays int64.

    Returns:
        The tensor; on the CPU it shares memory with `array` when no dtype change is needed
        and the array is writable (a read-only array, such as a memory map, is copied). On
        a CUDA device it is copied through pinned memory, without blocking.

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
    th = torch_module()
    target = device_of(device)
    tensor = th.from_numpy(host_array(array, key))
    if target.type == "cpu":
        return cast("torch.Tensor", tensor)
    return cast("torch.Tensor", tensor.pin_memory().to(target, non_blocking=True))


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
    target = device_of(device)
    out: dict[str, Any] = {}
    for key, value in batch.items():

        def convert(leaf: AnyArray, key: str = key) -> torch.Tensor:
            return to_tensor(leaf, target, key=key)

        out[key] = _tree.map_leaves(convert, value)
    return out


# --------------------------------------------------------------------------------------------
# A rollout as tensors, once
# --------------------------------------------------------------------------------------------
