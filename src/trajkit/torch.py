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

Transitions for offline RL and imitation learning (no critic needed) come as tensors from
[`transition_minibatches`][trajkit.torch.transition_minibatches].

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

import functools
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast, overload

import numpy as np
from typing_extensions import TypedDict

from trajkit._base.optional import require
from trajkit._base.rng import as_generator
from trajkit._base.types import AnyArray
from trajkit._core import minibatch as _mb
from trajkit._core import tree as _tree
from trajkit._models.checked import plain_view
from trajkit._models.rollout import Rollout, advantage_normalization, ppo_arrays
from trajkit._models.transitions import TransitionSource
from trajkit._models.transitions import transition_minibatches as _transition_minibatches

if TYPE_CHECKING:
    import torch

__all__ = [
    "PPO_KEYS",
    "Device",
    "PPOBatch",
    "minibatches",
    "to_tensor",
    "to_tensors",
    "training_tensors",
    "transition_minibatches",
]

Device: TypeAlias = "str | torch.device"
"""A torch device or its name: `"cpu"`, `"cuda"`, `"cuda:1"`, ..."""

TensorTree: TypeAlias = Any
"""A tensor, or a dict/tuple of them for nested observations (Gymnasium `Dict`, `Tuple`)."""

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


_INT64_KEYS = frozenset({"actions", "action"})

_torch_module: Any = None


def _torch() -> Any:
    """The `torch` module, imported on first use and then kept (no import machinery per call)."""
    global _torch_module
    module = _torch_module
    if module is None:
        module = _torch_module = require("torch", "torch", "trajkit.torch")
    return module


@functools.lru_cache(maxsize=32)
def _named_device(name: str) -> torch.device:
    return cast("torch.device", _torch().device(name))


def _device(device: Device) -> torch.device:
    """`device` as a `torch.device`; a name is parsed once, then remembered."""
    if isinstance(device, str):
        return _named_device(device)
    return device


def _host_array(array: AnyArray, key: str | None) -> AnyArray:
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
    th = _torch()
    target = _device(device)
    tensor = th.from_numpy(_host_array(array, key))
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
    target = _device(device)
    out: dict[str, Any] = {}
    for key, value in batch.items():

        def convert(leaf: AnyArray, key: str = key) -> torch.Tensor:
            return to_tensor(leaf, target, key=key)

        out[key] = _tree.map_leaves(convert, value)
    return out


# --------------------------------------------------------------------------------------------
# A rollout as tensors, once
# --------------------------------------------------------------------------------------------


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


def _rollout_tensors(
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
    th = _torch()
    target = _device(device)
    arrays = ppo_arrays(rollout, method, gamma, lam, normalize)  # type: ignore[arg-type]
    selected = _select(arrays, keys, method)
    on_cpu = target.type == "cpu"
    n = rollout.num_steps * rollout.batch_size
    flat: dict[str, torch.Tensor] = {}
    for name, tree in selected.items():
        for path, leaf in _tree.flatten(tree):
            host = _host_array(leaf.reshape((n, *leaf.shape[2:])), name)
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
    flat, rebuild = _rollout_tensors(
        rollout, gamma, lam, keys, device, normalize_advantages, "training_tensors"
    )
    return rebuild(flat)


# --------------------------------------------------------------------------------------------
# Minibatches
# --------------------------------------------------------------------------------------------


class _Minibatch(dict[str, Any]):
    """A minibatch: a dict whose missing keys say how to ask for them."""

    __slots__ = ()

    def __missing__(self, key: str) -> Any:
        raise KeyError(
            f"{key!r} is not in this minibatch, which carries {sorted(self)}: pass "
            "keys=(...) (or keys='all') to trajkit.torch.minibatches to gather it too"
        )


def _standardized(advantages: torch.Tensor) -> torch.Tensor:
    """`(a - mean) / (std + 1e-8)` with the unbiased std, as `normalize_advantages(ddof=1)`.

    Computed in float64 where the device has it (not on Apple's MPS), like the NumPy path.
    """
    if advantages.numel() <= 1:
        return advantages
    wide = advantages if advantages.device.type == "mps" else advantages.double()
    return ((wide - wide.mean()) / (wide.std() + 1e-8)).to(advantages.dtype)


def _minibatch_stream(
    flat: dict[str, torch.Tensor],
    rebuild: Callable[[Mapping[str, Any]], dict[str, Any]],
    plan: _mb.MinibatchPlan,
    rng: np.random.Generator,
    per_minibatch: bool,
    device: torch.device,
) -> Iterator[dict[str, Any]]:
    """Gather the minibatches of `flat` (`[T·B, ...]` tensors) where the tensors live.

    The rows come from the minibatch engine (`trajkit._core.minibatch.epoch_rows`, the
    permutations `Rollout.minibatches` draws for the same seed). On the CPU the tensors share
    memory with NumPy arrays, and the engine's `take_rows` (NumPy's `take`) gathers rows
    1.3-4x faster than `index_select` (one thread, measured by
    `benchmarks/bench_ppo_path.py`); `torch.from_numpy` wraps each result without a copy. On a
    GPU each epoch's rows are sent once and every minibatch is `index_select` there.
    """
    th = _torch()
    starts, size = plan.starts(), plan.size
    on_cpu = device.type == "cpu"
    items = list(flat.items())
    host = {key: tensor.numpy() for key, tensor in items} if on_cpu else {}

    def gather(rows: Any) -> _Minibatch:
        if on_cpu:
            flat = {k: th.from_numpy(a) for k, a in _mb.take_rows(host, rows).items()}
        else:
            flat = {key: tensor.index_select(0, rows) for key, tensor in items}
        batch = rebuild(flat)
        if per_minibatch:
            batch["advantages"] = _standardized(batch["advantages"])
        return _Minibatch(batch)

    for order in _mb.epoch_rows(plan, rng):
        rows: Any = order
        if not on_cpu:  # the epoch's indices: one small transfer
            rows = th.from_numpy(order.astype(np.int64, copy=False)).to(device)
        for start in starts:
            # No local keeps the minibatch while the caller holds it: once the caller drops
            # it, its memory is free for the next one.
            yield gather(rows[start : start + size])


@overload
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
    keys: None = None,
) -> Iterator[PPOBatch]: ...


@overload
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
    keys: Collection[str] | Literal["all"],
) -> Iterator[dict[str, Any]]: ...


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
    keys: Collection[str] | Literal["all"] | None = None,
) -> Iterator[PPOBatch] | Iterator[dict[str, Any]]:
    """Shuffled PPO minibatches of a rollout, as tensors on `device`.

    The rollout is converted once, by [`training_tensors`][trajkit.torch.training_tensors]
    (zero-copy on the CPU, one transfer to a GPU); each minibatch is then gathered on
    `device`, from indices sent there once per epoch. The minibatches hold the same entries
    in the same order as [`Rollout.minibatches`][trajkit.Rollout.minibatches] with the same
    arguments and `seed` (each epoch a fresh permutation of all (t, b), the last minibatch
    smaller unless `drop_last`), restricted to `keys`.

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
        keys: Which arrays each minibatch carries. `None` (the default): the arrays PPO
            reads, [`PPO_KEYS`][trajkit.torch.PPO_KEYS] = `obses`, `actions`, `log_probs`,
            `advantages`, `returns`, `critic` (typed as [`PPOBatch`][trajkit.torch.PPOBatch]).
            `"all"`: every one of [`Rollout.training_arrays`][trajkit.Rollout.training_arrays]
            (also `states`, `dones`, `rews` and every model output, such as `actor`). Or a
            collection of those names. Nothing else is gathered.

    Returns:
        An iterator of minibatches, each name to tensor (`actions` as int64 when integer).
        Reading a key that was not asked for raises a `KeyError` that says how to ask.

    Raises:
        ImportError: If PyTorch is not installed.
        trajkit.MissingModelOutputError: If the rollout has no `critic` (a `ValueError`).
        ValueError: If the rollout lacks a key that `keys` names (by default, one of
            `PPO_KEYS`: pass `keys=` for a rollout without `log_probs`), or a size argument
            is invalid.
        TypeError: If `seed` is of another type. All of these are raised at the call, not at
            the first minibatch.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=3)
        >>> [len(mb["returns"]) for mb in minibatches(r, 5, gamma=0.99, lam=0.95, seed=0)]
        [5, 5, 2]
        >>> mb = next(minibatches(r, 5, gamma=0.99, lam=0.95, seed=0, keys=["obses", "actor"]))
        >>> sorted(mb)
        ['actor', 'obses']
    """
    per_minibatch = advantage_normalization(normalize_advantages)
    plan = _mb.plan_minibatches(
        rollout.num_steps, rollout.batch_size, minibatch_size, epochs=epochs, drop_last=drop_last
    )
    rng = as_generator(seed)
    target = _device(device)
    flat, rebuild = _rollout_tensors(
        rollout, gamma, lam, keys, target, normalize_advantages, "minibatches"
    )
    return _minibatch_stream(flat, rebuild, plan, rng, per_minibatch, target)


def transition_minibatches(
    source: TransitionSource,
    minibatch_size: int,
    *,
    gamma: float | None = None,
    n_step: int = 1,
    epochs: int = 1,
    drop_last: bool = False,
    seed: int | np.random.Generator | None = None,
    rollouts_per_buffer: int = 4,
    device: Device = "cpu",
) -> Iterator[dict[str, Any]]:
    """Shuffled transition minibatches as tensors on `device`: behaviour cloning, offline RL.

    [`trajkit.transition_minibatches`][trajkit.transition_minibatches] (the same
    minibatches for the same arguments and `seed`: a rollout, a list of rollouts such as a
    Minari import, or a `trajkit.dataset.Dataset` streamed file by file), each converted by
    the rules of this module: `action` int64 when integer (what `cross_entropy` needs),
    float32 for Box actions; `reward`, `n_step_return`, `n_step_discount` float32;
    `terminated`, `truncated` bool; `episode` int64; observations in their stored dtype.

    Args:
        source: A `Rollout`, a sequence of rollouts, or a `Dataset`.
        minibatch_size: Transitions per minibatch, at least 1.
        gamma: The discount of the n-step columns, in [0, 1]; `None` for none.
        n_step: Rewards summed at most by `n_step_return`, at least 1.
        epochs: Passes over the data.
        drop_last: Drop each epoch's last, smaller minibatch.
        seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy.
        rollouts_per_buffer: For a dataset, files in the shuffle buffer at a time.
        device: Where the tensors should live.

    Returns:
        An iterator of minibatches, each name to tensor (a dict/tuple for nested
        observations).

    Raises:
        ImportError: If PyTorch is not installed.
        trajkit.MissingModelOutputError: If a rollout has no `model_outs['actions']`.
        ValueError: If a size argument, `gamma` or `n_step` is out of range.
        TypeError: If `source` or `seed` is of another type.

    Examples:
        >>> import torch
        >>> import torch.nn.functional as F
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=8, num_envs=2, num_actions=3)
        >>> mb = next(transition_minibatches(r, 16, seed=0))
        >>> mb["obs"].shape, mb["action"].dtype
        (torch.Size([16, 4]), torch.int64)
        >>> logits = torch.zeros(16, 3)
        >>> round(float(F.cross_entropy(logits, mb["action"])), 4)  # ln 3
        1.0986
    """
    _torch()
    target = _device(device)
    batches = _transition_minibatches(
        source,
        minibatch_size,
        gamma=gamma,
        n_step=n_step,
        epochs=epochs,
        drop_last=drop_last,
        seed=seed,
        rollouts_per_buffer=rollouts_per_buffer,
    )
    return (to_tensors(batch, target) for batch in batches)
