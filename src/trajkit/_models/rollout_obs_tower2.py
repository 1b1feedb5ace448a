"""The obs-tower2 methods of `Rollout`: its sizes, model-output accessors, GAE and batches.

Mixed into [`Rollout`][trajkit.Rollout], which is one class: the methods live here so that
each module holds one concept. Every name, argument, result, dtype and shape is obs-tower2's;
trajkit adds keyword-only `seed=` arguments and its error messages.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np

from trajkit._base.types import AnyArray, ArrayTree, Float32Array, Int32Array
from trajkit._core import gae as _gae
from trajkit._core import minibatch as _mb
from trajkit._models.errors import MissingModelOutputError
from trajkit._models.model_outputs import ModelOutputs

__all__ = ["ObsTower2Methods", "missing_critic"]


class ObsTower2Methods:
    """The methods of obs-tower2's `Rollout` (mixed into `trajkit.Rollout`)."""

    __slots__ = ()

    if TYPE_CHECKING:
        # The fields these methods read; `Rollout` declares and validates them.
        @property
        def states(self) -> ArrayTree: ...
        @property
        def obses(self) -> ArrayTree: ...
        @property
        def rews(self) -> Float32Array: ...
        @property
        def dones(self) -> Float32Array: ...
        @property
        def model_outs(self) -> ModelOutputs: ...
        @property
        def truncated(self) -> Float32Array | None: ...
        @property
        def final_values(self) -> Float32Array | None: ...

    @property
    def num_steps(self) -> int:
        """T, the number of steps (rows of `rews`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=6, num_envs=2).num_steps
            6
        """
        return int(self.rews.shape[0])

    @property
    def batch_size(self) -> int:
        """B, the number of environments.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=6, num_envs=2).batch_size
            2
        """
        return int(self.dones.shape[1])

    def _complete_outs(self, method: str) -> Mapping[str, AnyArray]:
        """The model-output arrays, or a ValueError when they are still being filled in."""
        problem = self.model_outs.incomplete()
        if problem is not None:
            raise ValueError(f"{method}() needs complete model outputs, but {problem}")
        return self.model_outs.arrays  # (read-only: the rollout's, checked)

    def _model_out(self, key: str, method: str) -> AnyArray:
        """Model output `key`, or the `MissingModelOutputError` naming `method`."""
        outs = self._complete_outs(method)
        if key not in outs:
            raise MissingModelOutputError(f"{method}()", key, outs)
        return outs[key]

    def _critic(self, method: str) -> AnyArray:
        """The critic's values for `method`, which computes advantages from them."""
        outs = self._complete_outs(method)
        if "critic" not in outs:
            raise missing_critic(f"{method}()", outs)
        return outs["critic"]

    def value_predictions(self) -> Float32Array:
        """The critic's values at each timestep: `model_outs[t]['critic']`, float32 `[T+1, B]`.

        Raises:
            MissingModelOutputError: If there is no `critic` key (a `KeyError`; the message
                lists the keys present).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3).value_predictions().shape
            (5, 3)
        """
        return np.array(self._model_out("critic", "value_predictions"))

    def actions(self) -> Int32Array | Float32Array:
        """The actions taken at each timestep: `model_outs[t]['actions']`, a new array.

        int32 for integer actions (Discrete `[T+1, B]`, MultiDiscrete and MultiBinary
        `[T+1, B, K]`), as in obs-tower2; float32 `[T+1, B, ...]` for continuous (Box) actions.

        Raises:
            MissingModelOutputError: If there is no `actions` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3).actions().dtype
            dtype('int32')
            >>> box = example_rollout(num_steps=4, num_envs=3, action_kind="box")
            >>> box.actions().dtype, box.actions().shape
            (dtype('float32'), (5, 3, 2))
        """
        return np.array(self._model_out("actions", "actions"))  # as stored: int32 or float32

    def log_probs(self) -> Float32Array:
        """Log-probabilities of the actions taken: `model_outs[t]['log_probs']`, float32 `[T+1, B]`.

        Raises:
            MissingModelOutputError: If there is no `log_probs` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3).log_probs().shape
            (5, 3)
        """
        return np.array(self._model_out("log_probs", "log_probs"))

    def logits(self) -> Float32Array:
        """The actor's logits: `model_outs[t]['actor']`, float32 `[T+1, B, A]`.

        Raises:
            MissingModelOutputError: If there is no `actor` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3, num_actions=5).logits().shape
            (5, 3, 5)
        """
        return np.array(self._model_out("actor", "logits"))

    def advantages(self, gamma: float, lam: float) -> Float32Array:
        r"""Generalized advantage estimates, float32 `[T, B]` (Schulman et al. 2015).

        $\hat A_t = \delta_t + \gamma\lambda(1 - d_{t+1})\hat A_{t+1}$ with
        $\delta_t = r_t + \gamma(1 - d_{t+1})V_{t+1} - V_t$, plus $\gamma V^{final}_t$ in
        $\delta_t$ where `truncated[t]` is 1. See [`trajkit.gae`][trajkit.gae].

        Args:
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].

        Returns:
            The advantages.

        Raises:
            ValueError: If gamma or lam is not a finite number in [0, 1].
            MissingModelOutputError: If there is no `critic` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=3)
            >>> targets = r.advantages(0.99, 0.95) + r.value_predictions()[:-1]
            >>> targets.shape, targets.dtype
            ((4, 3), dtype('float32'))
        """
        return _gae.gae(
            self.rews,
            self._critic("advantages"),
            self.dones,
            gamma,
            lam,
            truncated=self.truncated,
            final_values=self.final_values,
        )

    def returns(self, gamma: float, lam: float) -> Float32Array:
        """λ-returns, the PPO value targets: `advantages(gamma, lam) + value_predictions()[:-1]`.

        Args:
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].

        Returns:
            float32 `[T, B]`.

        Raises:
            ValueError: If gamma or lam is not a finite number in [0, 1].
            MissingModelOutputError: If there is no `critic` key (a `KeyError`).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> example_rollout(num_steps=4, num_envs=3).returns(0.99, 0.95).shape
            (4, 3)
        """
        return _gae.lambda_returns(
            self.rews,
            self._critic("returns"),
            self.dones,
            gamma,
            lam,
            truncated=self.truncated,
            final_values=self.final_values,
        )

    def batches(
        self,
        batch_size: int,
        count: int,
        *,
        seed: int | np.random.Generator | random.Random | None = None,
    ) -> Iterator[list[tuple[int, int]]]:
        """Yield `count` batches, each a list of `batch_size` `(timestep, env)` tuples.

        As in obs-tower2, batches are cut from an endless stream of shuffled permutations of all
        (t, b) (see `entries`), so a batch may span two permutations. For array indices, use
        [`minibatches`][trajkit.Rollout.minibatches] or
        [`trajkit.minibatch_indices`][trajkit.minibatch_indices].

        Args:
            batch_size: Entries per batch, at least 1.
            count: Number of batches, at least 0.
            seed: `None` (the default) shuffles with Python's global `random` exactly as
                obs-tower2 did, so `random.seed(s)` reproduces its batches entry for entry; a
                `random.Random` does the same with its own state; an int or a
                `numpy.random.Generator` shuffles with NumPy (faster, independent of `random`).

        Raises:
            ValueError: If batch_size < 1, count < 0, or the rollout is empty (T = 0) and
                count > 0. Raised at the call, not at the first `next()`.
            TypeError: If `seed` is of another type.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=2, num_envs=2)
            >>> [sorted(batch) for batch in r.batches(4, 1, seed=0)]
            [[(0, 0), (0, 1), (1, 0), (1, 1)]]
        """
        stream = _mb.obs_tower2_batches(
            self.num_steps, self.batch_size, batch_size, count, seed, method="batches()"
        )
        return _tuple_batches(stream)

    def entries(
        self, *, seed: int | np.random.Generator | random.Random | None = None
    ) -> Iterator[tuple[int, int]]:
        """Yield an endless, shuffled stream of `(timestep, env)` tuples.

        Every consecutive run of T·B entries (from the start) is a permutation of all (t, b).

        Args:
            seed: `None` (the default) shuffles with Python's global `random` exactly as
                obs-tower2 did (see [`batches`][trajkit.Rollout.batches]); a `random.Random`, an int
                or a `numpy.random.Generator` as there.

        Raises:
            ValueError: If the rollout has no steps (T = 0), where obs-tower2 would hang.
                Raised at the call, not at the first `next()`.
            TypeError: If `seed` is of another type.

        Examples:
            >>> from itertools import islice
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=2, num_envs=2)
            >>> sorted(islice(r.entries(seed=1), 4))
            [(0, 0), (0, 1), (1, 0), (1, 1)]
        """
        stream = _mb.obs_tower2_epochs(self.num_steps, self.batch_size, seed, method="entries()")
        return _tuple_entries(stream)


def missing_critic(
    method: str, keys: Iterable[str], owner: str = "this rollout"
) -> MissingModelOutputError:
    """The one error for a missing critic where advantages are computed, whoever computes them.

    Examples:
        >>> print(missing_critic("minibatches()", ["actions"]))  # doctest: +NORMALIZE_WHITESPACE
        minibatches() needs model_outs['critic'] to compute advantages and returns, but this
        rollout has keys ['actions']: record the critic's values as model_outs['critic'], or
        gather your own arrays with trajkit.minibatch_indices and trajkit.gather
    """
    return MissingModelOutputError(
        method,
        "critic",
        keys,
        owner=owner,
        purpose="to compute advantages and returns",
        hint="record the critic's values as model_outs['critic'], or gather your own arrays "
        "with trajkit.minibatch_indices and trajkit.gather",
    )


def _tuple_batches(
    stream: Iterator[tuple[AnyArray, AnyArray]],
) -> Iterator[list[tuple[int, int]]]:
    """obs-tower2's batches: each pair of index arrays as a list of `(t, b)` tuples."""
    for t_idx, b_idx in stream:
        yield list(zip(t_idx.tolist(), b_idx.tolist(), strict=True))


def _tuple_entries(stream: Iterator[tuple[AnyArray, AnyArray]]) -> Iterator[tuple[int, int]]:
    """obs-tower2's entries: every permutation, one `(t, b)` tuple at a time."""
    for t_idx, b_idx in stream:
        yield from zip(t_idx.tolist(), b_idx.tolist(), strict=True)
