"""Shuffled PPO minibatches of a rollout as tensors, gathered where they live (`trajkit.torch`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from trajkit._base.deprecation import deprecated
from trajkit._base.types import IntArray, Seed
from trajkit._core.minibatch import MinibatchPlan, Table, sample, take_rows
from trajkit._models.rollout import Rollout
from trajkit._models.rollout_training import ppo_finish
from trajkit._models.transitions import transition_minibatches as _transition_minibatches
from trajkit.torch._convert import (
    Device,
    PPOBatch,
    device_of,
    rollout_tensors,
    to_tensors,
    torch_module,
)

if TYPE_CHECKING:
    import torch

__all__ = ["minibatches", "transition_minibatches"]


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


class _TensorRows(Table):
    """A rollout's `[T·B, ...]` tensors: the engine's table, gathered where the tensors live.

    On the CPU the tensors share memory with NumPy arrays, and NumPy's `take` (the engine's
    `take_rows`) gathers rows 1.3-4x faster than `index_select` (one thread, measured by
    `benchmarks/bench_ppo_path.py`); `torch.from_numpy` wraps each result without a copy. On
    a GPU each epoch's rows are sent once and every minibatch is `index_select` there.
    """

    def __init__(
        self,
        flat: dict[str, torch.Tensor],
        rows: int,
        finish: Callable[[dict[str, Any]], Any],
        device: torch.device,
    ) -> None:
        super().__init__(rows, finish, "T*B")
        self.on_cpu, self.device = device.type == "cpu", device
        self.from_numpy = torch_module().from_numpy
        self.items = list(flat.items())
        self.host = {key: tensor.numpy() for key, tensor in self.items} if self.on_cpu else {}

    def take(self, rows: Any) -> dict[str, Any]:
        if self.on_cpu:
            return {key: self.from_numpy(a) for key, a in take_rows(self.host, rows).items()}
        if isinstance(rows, np.ndarray):  # the rows of one minibatch, not the epoch's
            rows = self.from_numpy(rows.astype(np.int64, copy=False)).to(self.device)
        return {key: tensor.index_select(0, rows) for key, tensor in self.items}

    def cut(self, order: IntArray, size: int) -> Iterator[Any]:
        rows: Any = order
        if not self.on_cpu:  # the epoch's indices: one small transfer
            rows = self.from_numpy(order.astype(np.int64, copy=False)).to(self.device)
        for at in range(0, len(order), size):
            # No local keeps the minibatch while the caller holds it: once the caller drops
            # it, its memory is free for the next one.
            yield self.finish(self.take(rows[at : at + size]))


@overload
def minibatches(
    rollout: Rollout,
    minibatch_size: int,
    *,
    gamma: float,
    lam: float,
    epochs: int = 1,
    drop_last: bool = False,
    seed: Seed = None,
    shuffle: bool = True,
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
    seed: Seed = None,
    shuffle: bool = True,
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
    seed: Seed = None,
    shuffle: bool = True,
    device: Device = "cpu",
    normalize_advantages: Literal["rollout", "minibatch"] | None = None,
    keys: Collection[str] | Literal["all"] | None = None,
) -> Iterator[PPOBatch] | Iterator[dict[str, Any]]:
    """Shuffled PPO minibatches of a rollout, as tensors on `device`.

    The rollout is converted once, by [`training_tensors`][trajkit.torch.training_tensors]
    (zero-copy on the CPU, one transfer to a GPU); each minibatch is then gathered on
    `device`, from indices sent there once per epoch. The minibatches hold the same entries
    in the same order as [`Rollout.minibatches`][trajkit.Rollout.minibatches] with the same
    arguments (as [`MinibatchPlan`][trajkit.MinibatchPlan] describes), restricted to `keys`.

    Args:
        rollout: The rollout (it must have a `critic` for advantages and returns).
        minibatch_size: Entries per minibatch, at least 1.
        gamma: Discount, finite, in [0, 1].
        lam: GAE λ, finite, in [0, 1].
        epochs: Passes over the data.
        drop_last: Drop each epoch's last, smaller minibatch.
        seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy.
        shuffle: `False` for the entries in order, `t` by `t`.
        device: Where the tensors should live.
        normalize_advantages: As for [`Rollout.minibatches`][trajkit.Rollout.minibatches].
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
            `PPO_KEYS`: pass `keys=` for a rollout without `log_probs`), or another argument
            is out of range.
        TypeError: If `seed` is of another type. All of these are raised at the call.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> r = example_rollout(num_steps=4, num_envs=3)
        >>> [len(mb["returns"]) for mb in minibatches(r, 5, gamma=0.99, lam=0.95, seed=0)]
        [5, 5, 2]
        >>> mb = next(minibatches(r, 5, gamma=0.99, lam=0.95, seed=0, keys=["obses", "actor"]))
        >>> sorted(mb)
        ['actor', 'obses']
    """
    plan = MinibatchPlan(
        minibatch_size,
        epochs=epochs,
        drop_last=drop_last,
        seed=seed,
        shuffle=shuffle,
        normalize_advantages=normalize_advantages,
    )
    target = device_of(device)
    flat, rebuild = rollout_tensors(
        rollout, gamma, lam, keys, target, plan.normalize_advantages, "minibatches"
    )
    finish = ppo_finish(rebuild, plan, _standardized, _Minibatch)
    rows = _TensorRows(flat, rollout.num_steps * rollout.batch_size, finish, target)
    return sample(plan, [rows])


def transition_minibatches(
    source: Any, minibatch_size: int, *, device: Device = "cpu", **kwargs: Any
) -> Iterator[dict[str, Any]]:
    """Deprecated: [`to_tensors`][trajkit.torch.to_tensors] of each transition minibatch.

    Deprecated after 0.1.0: write
    `(to_tensors(mb, device) for mb in trajkit.transition_minibatches(source, ...))`, the
    same tensors. It warns with a `DeprecationWarning` and will be removed.

    Examples:
        >>> import warnings
        >>> import trajkit.torch
        >>> from trajkit.testing import example_rollout
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     mb = next(trajkit.torch.transition_minibatches(example_rollout(), 16, seed=0))
        >>> caught[0].category.__name__, mb["action"].dtype
        ('DeprecationWarning', torch.int64)
    """
    deprecated(
        "trajkit.torch.transition_minibatches",
        "trajkit.torch.to_tensors over trajkit.transition_minibatches",
    )
    target = device_of(device)  # (torch is imported here, or the ImportError raised)
    batches = _transition_minibatches(source, minibatch_size, **kwargs)
    return (to_tensors(batch, target) for batch in batches)
