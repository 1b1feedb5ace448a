"""Every minibatch and batches call checks its arguments and the critic when it is called.

One behaviour for a missing critic: `MissingModelOutputError` (a `KeyError` and a
`ValueError`), at the call, from every method that computes advantages. Sizes and seeds are
refused at the call too, never at the first `next()`.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import numpy as np
import pytest

import trajkit
from trajkit import MissingModelOutputError, Rollout
from trajkit.testing import example_rollout

CRITIC = (
    "{method}() needs model_outs['critic'] to compute advantages and returns, but this "
    "rollout has keys ['actions', 'log_probs']: record the critic's values as "
    "model_outs['critic'], or gather your own arrays with trajkit.minibatch_indices and "
    "trajkit.gather"
)


def no_critic() -> Rollout:
    return example_rollout(num_steps=4, num_envs=2, keys={"actions", "log_probs"})


CRITIC_CALLS: list[tuple[str, Callable[[Rollout], object]]] = [
    ("advantages", lambda r: r.advantages(0.9, 0.9)),
    ("returns", lambda r: r.returns(0.9, 0.9)),
    ("training_arrays", lambda r: r.training_arrays(0.9, 0.9)),
    ("minibatches", lambda r: r.minibatches(4, gamma=0.9, lam=0.9)),
    ("sequence_minibatches", lambda r: r.sequence_minibatches(1, gamma=0.9, lam=0.9)),
]


@pytest.mark.parametrize(("method", "call"), CRITIC_CALLS)
def test_a_missing_critic_is_refused_at_the_call(
    method: str, call: Callable[[Rollout], object]
) -> None:
    # No next(): the generators refuse before they are iterated.
    with pytest.raises(MissingModelOutputError) as info:
        call(no_critic())
    assert str(info.value) == CRITIC.format(method=method)
    assert isinstance(info.value, KeyError)  # as obs-tower2's dict lookup raised
    assert isinstance(info.value, ValueError)  # as every other refusal of trajkit's
    assert (info.value.method, info.value.key) == (f"{method}()", "critic")
    assert info.value.keys == ["actions", "log_probs"]


def test_an_accessor_without_its_key_names_the_key_only() -> None:
    r = example_rollout(keys={"actions"})
    with pytest.raises(MissingModelOutputError) as info:
        r.value_predictions()
    assert str(info.value) == (
        "value_predictions() needs model_outs['critic'], but this rollout has keys ['actions']"
    )
    with pytest.raises(KeyError, match=re.escape("log_probs() needs model_outs['log_probs']")):
        r.log_probs()


Call = Callable[[Rollout], object]

ARGUMENT_ERRORS: list[tuple[Call, type[Exception], str]] = [
    (
        lambda r: r.minibatches(0, gamma=0.9, lam=0.9),
        ValueError,
        "minibatch_size must be >= 1, got 0",
    ),
    (
        lambda r: r.minibatches(4, gamma=0.9, lam=0.9, epochs=-1),
        ValueError,
        "epochs must be >= 0, got -1",
    ),
    (
        lambda r: r.minibatches(9, gamma=0.9, lam=0.9, drop_last=True),
        ValueError,
        "minibatch_size=9 is larger than the 8 entries available (T*B=8), so drop_last=True "
        "would yield no minibatch at all",
    ),
    (
        lambda r: r.minibatches(4, gamma=1.5, lam=0.9),
        ValueError,
        "gamma must be a finite number in [0, 1], got 1.5",
    ),
    (lambda r: r.minibatches(4, gamma=0.9, lam=0.9, seed=1.5), TypeError, "seed must be an int"),  # type: ignore[arg-type]
    (
        lambda r: r.minibatches(4, gamma=0.9, lam=0.9, normalize_advantages="env"),  # type: ignore[arg-type]
        ValueError,
        "normalize_advantages must be None, 'rollout' or 'minibatch', got 'env'",
    ),
    (
        lambda r: r.sequence_minibatches(0, gamma=0.9, lam=0.9),
        ValueError,
        "envs_per_batch must be >= 1, got 0",
    ),
    (
        lambda r: r.sequence_minibatches(3, gamma=0.9, lam=0.9, drop_last=True),
        ValueError,
        "envs_per_batch=3 is larger than the 2 entries available (B=2)",
    ),
    (lambda r: r.batches(0, 1), ValueError, "batch_size must be >= 1, got 0"),
    (lambda r: r.batches(1, -1), ValueError, "count must be >= 0, got -1"),
    (lambda r: r.batches(1, 1, seed=1.5), TypeError, "seed must be an int"),  # type: ignore[arg-type]
    (lambda r: r.entries(seed="x"), TypeError, "seed must be an int"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("call", "error", "message"), ARGUMENT_ERRORS)
def test_arguments_are_refused_at_the_call(
    call: Call, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)):
        call(example_rollout(num_steps=4, num_envs=2))


def empty() -> Rollout:
    return example_rollout(num_steps=0, num_envs=2)


def test_an_empty_rollout_is_refused_at_the_call_where_obs_tower2_would_hang() -> None:
    with pytest.raises(
        ValueError,
        match=re.escape(
            "entries() needs at least one entry, got num_steps=0, num_envs=2 (T*B == 0)"
        ),
    ):
        empty().entries()
    with pytest.raises(
        ValueError,
        match=re.escape("batches() cannot draw 1 batches from an empty rollout, got num_steps=0"),
    ):
        empty().batches(4, 1)
    assert list(empty().batches(4, 0)) == []
    assert list(empty().minibatches(4, gamma=0.9, lam=0.9)) == []


def test_batches_keeps_obs_tower2s_global_random_use() -> None:
    r = example_rollout(num_steps=3, num_envs=2)
    random.seed(7)
    state = random.getstate()
    batches = r.batches(4, 3)  # the call draws nothing yet
    assert random.getstate() == state
    first = list(batches)
    random.seed(7)
    assert list(r.batches(4, 3)) == first
    # obs-tower2's batches, rebuilt: a list of every (t, b) shuffled in place per pass.
    random.seed(7)
    entries = [(t, b) for t in range(3) for b in range(2)]
    stream: list[tuple[int, int]] = []
    while len(stream) < 12:
        random.shuffle(entries)
        stream += entries
    assert first == [stream[0:4], stream[4:8], stream[8:12]]


def test_minibatches_compute_once_at_the_call() -> None:
    r = example_rollout(num_steps=4, num_envs=3)
    batches = r.minibatches(5, gamma=0.9, lam=0.9, seed=0)
    r.rews[...] = 0.0  # after the call: the advantages were computed already
    advantages = np.concatenate([mb["advantages"] for mb in batches])
    assert not np.allclose(advantages, 0.0)


def test_missing_critic_is_the_public_class() -> None:
    assert trajkit.MissingModelOutputError is MissingModelOutputError
    assert repr(MissingModelOutputError("x()", "critic", []))[:24] == "MissingModelOutputError("
