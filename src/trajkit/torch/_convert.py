"""Arrays and a rollout's training arrays as PyTorch tensors, by the rules of `trajkit.torch`.

PyTorch is imported here, on first use, never by `import trajkit`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast, overload

import numpy as np
from typing_extensions import TypedDict

from trajkit._base.optional import require
from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._models.checked import plain_view
from trajkit._models.rollout import Rollout
from trajkit._models.rollout_training import ppo_arrays
from trajkit._models.rules import STEP_COLUMNS

if TYPE_CHECKING:
    import torch

__all__ = [
    "PPO_KEYS",
    "Device",
    "PPOBatch",
    "device_of",
    "rollout_tensors",
    "to_tensor",
    "to_tensors",
    "torch_module",
    "training_tensors",
]

Device: TypeAlias = "str | torch.device"
"""A torch device or its name: `"cpu"`, `"cuda"`, `"cuda:1"`, ..."""

TensorTree: TypeAlias = Any
"""A tensor, or a dict/tuple of them for nested observations (Gymnasium `Dict`, `Tuple`)."""


_INT64_KEYS = frozenset({"actions", STEP_COLUMNS["actions"]})

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
    array = np.asarray(plain_view(array))  # a rollout's array: its memory, shared on the CPU
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


# --------------------------------------------------------------------------------------------
# A rollout as tensors, once
# --------------------------------------------------------------------------------------------

PPO_KEYS: Final = ("obses", "actions", "log_probs", "advantages", "returns", "critic")
"""What a minibatch carries by default: the arrays a PPO update reads.

Observations, actions and the old log-probabilities for the policy ratio, advantages, returns
(the value targets), and the old values (`critic`) for a clipped value loss, as CleanRL's
default `clip_vloss` and stable-baselines3's `clip_range_vf` read them.
"""


class PPOBatch(TypedDict):
    """The arrays PPO reads, as tensors: what [`minibatches`][trajkit.torch.minibatches] yields.

    A minibatch has `[n, ...]` tensors; [`training_tensors`][trajkit.torch.training_tensors]
    gives the whole rollout as `[T·B, ...]` tensors with the same keys. Asking for other
    arrays with `keys=` gives a plain `dict[str, Any]` instead.

    Attributes:
        obses: Observations: a tensor, or a dict/tuple of tensors for nested observations.
        actions: Actions taken, int64 when integer (discrete), float32 otherwise.
        log_probs: Log-probabilities of the actions under the policy that took them.
        advantages: GAE advantages (normalized as `normalize_advantages` asks).
        returns: λ-returns, the value targets: advantages plus the old values.
        critic: The old value predictions, for a clipped value loss.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> from trajkit.torch import minibatches
        >>> mb: PPOBatch = next(minibatches(example_rollout(), 4, gamma=0.9, lam=0.9, seed=0))
        >>> mb["log_probs"].shape
        torch.Size([4])
    """

    obses: TensorTree
    actions: torch.Tensor
    log_probs: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    critic: torch.Tensor


def _select(arrays: dict[str, Any], keys: object, method: str) -> dict[str, Any]:
    """The training arrays that `keys` names (see `minibatches`), in `keys`' order."""
    if keys is None:
        missing = [key for key in PPO_KEYS if key not in arrays]
        if missing:
            raise ValueError(
                f"{method}() carries the arrays PPO reads by default, {list(PPO_KEYS)}, but "
                f"this rollout has no {missing} (it has {sorted(arrays)}): pass keys= with "
                "the names you need, or record them as model_outs"
            )
        return {key: arrays[key] for key in PPO_KEYS}
    if keys == "all":
        return arrays
    if isinstance(keys, str) or not isinstance(keys, Collection):
        raise ValueError(
            f"keys must be a collection of array names or 'all', got {keys!r}"
            + (f": write keys=({keys!r},) for that one array" if isinstance(keys, str) else "")
        )
    selected: dict[str, Any] = {}
    for key in keys:
        if key not in arrays:
            raise ValueError(
                f"keys names {key!r}, which this rollout's training arrays do not have: they "
                f"are {sorted(arrays)}"
            )
        selected[key] = arrays[key]
    if not selected:
        raise ValueError("keys must name at least one array, got an empty collection")
    return selected


def rollout_tensors(
    rollout: Rollout,
    gamma: float,
    lam: float,
    keys: object,
    device: Device,
    normalize: object,
    method: str,
) -> tuple[dict[str, torch.Tensor], Callable[[Mapping[str, Any]], dict[str, Any]]]:
    """The selected training arrays as flat `[T·B, ...]` tensors on `device`, and a rebuilder.

    The flat tensors are keyed like `trajkit._core.tree.flatten_fields` (one per leaf); the
    rebuilder puts nested fields back together from tensors keyed that way.
    """
    th = torch_module()
    target = device_of(device)
    arrays = ppo_arrays(rollout, method, gamma, lam, normalize)  # type: ignore[arg-type]
    selected = _select(arrays, keys, method)
    on_cpu = target.type == "cpu"
    n = rollout.num_steps * rollout.batch_size
    flat: dict[str, torch.Tensor] = {}
    for name, tree in selected.items():
        for path, leaf in _tree.flatten(tree):
            host = host_array(leaf.reshape((n, *leaf.shape[2:])), name)
            tensor = th.from_numpy(host)
            flat[_tree.format_path(name, path)] = tensor if on_cpu else tensor.to(target)
    return flat, _tree.fields_rebuilder(selected)


@overload
def training_tensors(
    rollout: Rollout,
    *,
    gamma: float,
    lam: float,
    keys: None = None,
    device: Device = "cpu",
    normalize_advantages: Literal["rollout"] | None = None,
) -> PPOBatch: ...


@overload
def training_tensors(
    rollout: Rollout,
    *,
    gamma: float,
    lam: float,
    keys: Collection[str] | Literal["all"],
    device: Device = "cpu",
    normalize_advantages: Literal["rollout"] | None = None,
) -> dict[str, Any]: ...


def training_tensors(
    rollout: Rollout,
    *,
    gamma: float,
    lam: float,
    keys: Collection[str] | Literal["all"] | None = None,
    device: Device = "cpu",
    normalize_advantages: Literal["rollout"] | None = None,
) -> PPOBatch | dict[str, Any]:
    """A rollout's training arrays as `[T·B, ...]` tensors on `device`, converted once.

    Step `t` of env `b` is row `t * B + b`, as in the flattened buffers CleanRL trains from.
    On the CPU each tensor shares memory with the rollout's array (or with the new
    advantages and returns) where the conversion rules need no dtype change: treat them as
    read-only. On a GPU each array is sent once.

    Args:
        rollout: The rollout (it must have a `critic` for advantages and returns).
        gamma: Discount, finite, in [0, 1].
        lam: GAE λ, finite, in [0, 1].
        keys: Which arrays to convert: `None` for [`PPO_KEYS`][trajkit.torch.PPO_KEYS],
            `"all"` for every one of [`Rollout.training_arrays`][trajkit.Rollout.training_arrays],
            or a collection of those names.
        device: Where the tensors should live.
        normalize_advantages: `None`, or `"rollout"` to standardize the advantages over the
            whole rollout (population std).

    Returns:
        Name to tensor (dicts and tuples of tensors for nested `obses` and `states`).

    Raises:
        ImportError: If PyTorch is not installed.
        trajkit.MissingModelOutputError: If the rollout has no `critic` (a `ValueError`).
        ValueError: If the rollout lacks a key that `keys` names (by default, one of
            `PPO_KEYS`), or `keys` is not a collection of names or `"all"`.

    Examples:
        >>> import numpy as np
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=3)
        >>> t = training_tensors(r, gamma=0.99, lam=0.95)
        >>> t["obses"].shape, t["actions"].dtype
        (torch.Size([12, 4]), torch.int64)
        >>> t["obses"].data_ptr() == r.obses.ctypes.data  # zero-copy
        True
        >>> sorted(training_tensors(r, gamma=0.99, lam=0.95, keys=["rews", "dones"]))
        ['dones', 'rews']
    """
    if normalize_advantages not in (None, "rollout"):
        raise ValueError(
            "normalize_advantages must be None or 'rollout' for a whole rollout, got "
            f"{normalize_advantages!r}"
        )
    flat, rebuild = rollout_tensors(
        rollout, gamma, lam, keys, device, normalize_advantages, "training_tensors"
    )
    return rebuild(flat)


# --------------------------------------------------------------------------------------------
