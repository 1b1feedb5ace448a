"""The training methods trajkit adds to `Rollout`: arrays, minibatches, episode statistics.

Mixed into [`Rollout`][trajkit.Rollout], which is one class. The minibatch methods are thin
adapters over the minibatch engine (`trajkit._core.minibatch`): `ppo_arrays` is what every
PPO source (these methods, `trajkit.torch`, `Dataset.minibatches`) starts from, and
`ppo_table` makes a rollout's PPO rows a table the engine draws from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from trajkit._base.types import ArrayTree, Seed
from trajkit._core import gae as _gae
from trajkit._core import tree as _tree
from trajkit._core.episodes import EpisodeStats, episode_stats
from trajkit._core.minibatch import (
    AdvantageNormalization,
    ArraysTable,
    MinibatchPlan,
    as_rows,
    check_size,
    sample,
)
from trajkit._models.rollout_obs_tower2 import ObsTower2Methods

__all__ = [
    "AdvantageNormalization",
    "TrainingMethods",
    "ppo_arrays",
    "ppo_finish",
    "ppo_table",
]


class TrainingMethods(ObsTower2Methods):
    """The methods trajkit adds to obs-tower2's `Rollout` (mixed into `trajkit.Rollout`)."""

    __slots__ = ()

    def episode_stats(self) -> EpisodeStats:
        """Episode ends (terminations and truncations) and the complete episodes' returns.

        See [`trajkit.episode_stats`][trajkit.episode_stats].

        Returns:
            The `EpisodeStats`.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=32, num_envs=4, truncation=True)
            >>> stats = r.episode_stats()
            >>> stats.episodes == int(r.dones[1:].sum())
            True
        """
        return episode_stats(self.rews, self.dones, self.truncated)

    def training_arrays(self, gamma: float, lam: float) -> dict[str, ArrayTree]:
        """Every array a PPO step needs, aligned on `[T, B, ...]` (rows 0..T-1).

        Keys: `obses`, `states`, `dones`, `rews`, `advantages`, `returns`, and every
        model-output key (`actions`, `log_probs`, `critic`, `actor`, ...) with one value per
        env: per-step scalar outputs (`[T+1]`, such as GAIL's `prob_pi`) have no entry per
        env, and are left out. The arrays are views where possible, not copies. Nested
        `obses` and `states` keep their structure, with every leaf cut to `[T, B, ...]`.

        Args:
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].

        Returns:
            Name to `[T, B, ...]` array.

        Raises:
            MissingModelOutputError: If there is no `critic` (advantages and returns need
                it), as every method that computes them raises.
            ValueError: If a model-output key has the name of a field, or gamma or lam is not
                a finite number in [0, 1].

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> arrays = example_rollout(num_steps=4, num_envs=3).training_arrays(0.99, 0.95)
            >>> sorted(arrays)  # doctest: +NORMALIZE_WHITESPACE
            ['actions', 'actor', 'advantages', 'critic', 'dones', 'log_probs', 'obses',
             'returns', 'rews', 'states']
        """
        return ppo_arrays(self, "training_arrays", gamma, lam)

    def minibatches(
        self,
        minibatch_size: int,
        *,
        gamma: float,
        lam: float,
        epochs: int = 1,
        drop_last: bool = False,
        seed: Seed = None,
        shuffle: bool = True,
        normalize_advantages: AdvantageNormalization = None,
    ) -> Iterator[dict[str, ArrayTree]]:
        """Yield shuffled PPO minibatches: every training array gathered at once.

        Advantages and returns are computed once, at the call; each epoch is a fresh
        permutation of all (t, b), cut into minibatches as
        [`MinibatchPlan`][trajkit.MinibatchPlan] describes. Each minibatch maps the names of
        [`training_arrays`][trajkit.Rollout.training_arrays] to `[n, ...]` arrays; nested
        `obses` and `states` come out with the same structure, every leaf gathered.

        Args:
            minibatch_size: Entries per minibatch, at least 1.
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].
            epochs: Passes over the data.
            drop_last: Drop each epoch's last, smaller minibatch.
            seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy.
            shuffle: `False` for the entries in order, `t` by `t`.
            normalize_advantages: `None`, `"rollout"` (over the rollout) or `"minibatch"`
                (each minibatch, as stable-baselines3 and CleanRL), see `MinibatchPlan`.

        Returns:
            An iterator of minibatches, each name to `[n, ...]` array.

        Raises:
            MissingModelOutputError: If there is no `critic` (advantages need it).
            ValueError: If an argument is out of range (`MinibatchPlan`'s, gamma, lam), or
                `drop_last` would yield nothing.
            TypeError: If `seed` is of another type. All of these are raised at the call.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=3)
            >>> sizes = [len(mb["advantages"]) for mb in r.minibatches(5, gamma=0.99, lam=0.95)]
            >>> sizes
            [5, 5, 2]
            >>> mb = next(r.minibatches(6, gamma=0.99, lam=0.95, normalize_advantages="minibatch"))
            >>> round(float(mb["advantages"].std(ddof=1)), 4)
            1.0
        """
        plan = MinibatchPlan(
            minibatch_size,
            epochs=epochs,
            drop_last=drop_last,
            seed=seed,
            shuffle=shuffle,
            normalize_advantages=normalize_advantages,
        )
        return sample(plan, [ppo_table(self, "minibatches", gamma, lam, plan)])

    def sequence_minibatches(
        self,
        envs_per_batch: int,
        *,
        gamma: float,
        lam: float,
        epochs: int = 1,
        drop_last: bool = False,
        seed: Seed = None,
        shuffle: bool = True,
        normalize_advantages: AdvantageNormalization = None,
    ) -> Iterator[dict[str, ArrayTree]]:
        """Yield minibatches of whole env columns (all T steps) for recurrent policies.

        Each minibatch maps the names of [`training_arrays`][trajkit.Rollout.training_arrays]
        to time-major `[T, n, ...]` arrays for a shuffled set of n envs; `states[0]` holds the
        initial recurrent state and `dones` marks where to reset it. Nested `obses` and
        `states` keep their structure.

        Args:
            envs_per_batch: Envs per minibatch, at least 1.
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].
            epochs: Passes over the envs.
            drop_last: Drop each epoch's last, smaller minibatch.
            seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy.
            shuffle: `False` for the envs in order.
            normalize_advantages: As for [`minibatches`][trajkit.Rollout.minibatches]
                (over the `[T, n]` advantages of each minibatch).

        Returns:
            An iterator of minibatches, each name to `[T, n, ...]` array.

        Raises:
            MissingModelOutputError: If there is no `critic`.
            ValueError: As for [`minibatches`][trajkit.Rollout.minibatches], at the call.
            TypeError: If `seed` is of another type.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout(num_steps=4, num_envs=3)
            >>> [mb["obses"].shape[:2] for mb in r.sequence_minibatches(2, gamma=0.9, lam=0.9)]
            [(4, 2), (4, 1)]
        """
        plan = MinibatchPlan(
            check_size("envs_per_batch", envs_per_batch, 1),
            epochs=epochs,
            drop_last=drop_last,
            seed=seed,
            shuffle=shuffle,
            normalize_advantages=normalize_advantages,
        )
        arrays = ppo_arrays(self, "sequence_minibatches", gamma, lam, plan.normalize_advantages)
        finish = ppo_finish(_tree.fields_rebuilder(arrays), plan)
        columns = ArraysTable(_tree.flatten_fields(arrays), self.batch_size, finish, axis=1)
        return sample(plan, [columns], name="envs_per_batch")


def ppo_arrays(
    rollout: ObsTower2Methods,
    method: str,
    gamma: float,
    lam: float,
    normalize: AdvantageNormalization = None,
) -> dict[str, ArrayTree]:
    """The training arrays of `rollout` for `method` (named in every refusal), checked now.

    What every minibatch adapter starts from (`Rollout.minibatches`, `trajkit.torch`,
    `Dataset.minibatches`): a rollout without a `critic` raises `MissingModelOutputError`.
    With `normalize="rollout"` the advantages are standardized over the whole rollout.
    """
    outs = rollout._complete_outs(method)
    T = rollout.num_steps
    critic = rollout._critic(method)
    advantages = _gae.gae(
        rollout.rews,
        critic,
        rollout.dones,
        gamma,
        lam,
        truncated=rollout.truncated,
        final_values=rollout.final_values,
    )
    arrays: dict[str, ArrayTree] = {
        "obses": _tree.map_leaves(lambda leaf: leaf[:T], rollout.obses),
        "states": _tree.map_leaves(lambda leaf: leaf[:T], rollout.states),
        "dones": rollout.dones[:T],
        "rews": rollout.rews,
        "advantages": advantages,
        "returns": advantages + critic[:T],
    }
    for key, array in outs.items():
        if key in arrays:
            raise ValueError(f"model_outs key {key!r} clashes with the field of that name")
        if array.ndim > 1:  # per-step scalars `[T+1]` have no entry per env
            arrays[key] = array[:T]
    if normalize == "rollout":
        arrays["advantages"] = _gae.normalize_advantages(advantages)
    return arrays


def _unbiased(advantages: Any) -> Any:
    return _gae.normalize_advantages(advantages, ddof=1)


def ppo_finish(
    rebuild: Callable[[Any], dict[str, Any]],
    plan: MinibatchPlan,
    standardize: Callable[[Any], Any] = _unbiased,
    kind: Callable[[dict[str, Any]], Any] = dict,
) -> Callable[[dict[str, Any]], Any]:
    """What makes taken rows a minibatch of `kind`: the nested fields rebuilt, as `plan` says.

    With `normalize_advantages="minibatch"`, each minibatch's advantages are standardized
    with the unbiased std (`standardize`: NumPy's by default, torch's for tensors).
    """
    per_minibatch = plan.normalize_advantages == "minibatch"
    if not per_minibatch and kind is dict:
        return rebuild

    def finish(flat: dict[str, Any]) -> Any:
        batch = rebuild(flat)
        if per_minibatch:
            batch["advantages"] = standardize(batch["advantages"])
        return batch if kind is dict else kind(batch)

    return finish


def ppo_table(
    rollout: ObsTower2Methods, method: str, gamma: float, lam: float, plan: MinibatchPlan
) -> ArraysTable:
    """The PPO rows of `rollout` (`ppo_arrays`, checked now) as a table for the engine."""
    arrays = ppo_arrays(rollout, method, gamma, lam, plan.normalize_advantages)
    rows = rollout.num_steps * rollout.batch_size
    finish = ppo_finish(_tree.fields_rebuilder(arrays), plan)
    return ArraysTable(as_rows(_tree.flatten_fields(arrays)), rows, finish)
