"""obs-tower2's usage patterns run unchanged on `trajkit.Rollout`, with the seed's results.

Each test restates one pattern of obs-tower2's training code (PPO's gather, the
`run_for_rollout` idiom, GAIL's reward rewrite, Prierarchy's prior pass, recording's in-place
fill, behaviour cloning) against `ReferenceRollout`, this file's own statement of the seed's
semantics: plain lists and loops, no trajkit.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import trajkit
from trajkit import ModelOutputs, Rollout
from trajkit.testing import example_rollout

T, B, A = 6, 3, 4


class ReferenceRollout:
    """The seed's semantics, restated: arrays cast as it casts them, lists of step dicts."""

    def __init__(
        self,
        states: Any,
        obses: Any,
        rews: Any,
        dones: Any,
        infos: Any,
        model_outs: list[dict[str, Any]],
    ) -> None:
        self.states = np.array(states, dtype=np.float32)
        self.obses = np.array(obses)
        self.rews = np.array(rews, dtype=np.float32)
        self.dones = np.array(dones, dtype=np.float32)
        self.infos = infos
        self.model_outs = model_outs

    def copy(self) -> ReferenceRollout:
        return ReferenceRollout(
            self.states, self.obses, self.rews, self.dones, self.infos, self.model_outs
        )

    def column(self, key: str, dtype: Any) -> Any:
        return np.array([step[key] for step in self.model_outs], dtype=dtype)

    def advantages(self, gamma: float, lam: float) -> Any:
        values = self.column("critic", np.float32)
        steps, envs = self.rews.shape
        out = np.zeros((steps, envs), np.float32)
        running = np.zeros(envs, np.float32)
        for t in reversed(range(steps)):
            delta = self.rews[t] - values[t] + (1 - self.dones[t + 1]) * gamma * values[t + 1]
            running = running * (gamma * lam) + delta
            out[t] = running
            running = running * (1 - self.dones[t])
        return out

    def entries(self) -> Iterator[tuple[int, int]]:
        pairs = [(t, b) for t in range(len(self.rews)) for b in range(len(self.rews[0]))]
        while True:
            random.shuffle(pairs)
            yield from pairs

    def batches(self, size: int, count: int) -> Iterator[list[tuple[int, int]]]:
        stream = self.entries()
        for _ in range(count):
            yield [next(stream) for _ in range(size)]


def fields(seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    dones = (rng.random((T + 1, B)) < 0.2).astype(np.float32)
    return {
        "states": rng.normal(size=(T + 1, B, 2)),
        "obses": rng.integers(0, 255, size=(T + 1, B, 5), dtype=np.uint8),
        "rews": rng.normal(size=(T, B)),
        "dones": dones,
        "infos": [[{} for _ in range(B)] for _ in range(T)],
        "model_outs": [
            {
                "critic": rng.normal(size=B).astype(np.float32),
                "actor": rng.normal(size=(B, A)).astype(np.float32),
                "actions": rng.integers(0, A, size=B),
                "log_probs": rng.normal(size=B).astype(np.float32),
            }
            for _ in range(T + 1)
        ],
    }


def both(seed: int = 0) -> tuple[Rollout, ReferenceRollout]:
    f = fields(seed)
    return Rollout(**f), ReferenceRollout(**f)


# ------------------------------------------------------------------ PPO: entries, batches


def test_batches_without_seed_follow_python_random_like_the_seed() -> None:
    ours, ref = both()
    random.seed(7)
    expected = list(ref.batches(5, 9))  # 45 entries: spans two passes over T*B = 18
    random.seed(7)
    assert list(ours.batches(5, 9)) == expected
    random.seed(7)
    stream = ours.entries()
    ref_stream = ReferenceRollout(**fields()).entries()
    got = [next(stream) for _ in range(40)]
    random.seed(7)
    assert got == [next(ref_stream) for _ in range(40)]


def test_interleaved_random_calls_stay_in_step_with_the_seed() -> None:
    # Training code draws from `random` between batches (obs-tower2's cloning does): the
    # shuffles must happen at the same moments as the seed's lazy ones.
    def run(rollout: Rollout | ReferenceRollout) -> list[Any]:
        random.seed(3)
        out: list[Any] = []
        for batch in rollout.batches(7, 6):
            out.append(batch)
            out.append(random.random())
        return out

    ours, ref = both()
    assert run(ours) == run(ref)


@pytest.fixture
def seed_order_gae(monkeypatch: pytest.MonkeyPatch) -> None:
    """GAE in the seed's order of operations, for results equal to the last bit.

    The numba backend is the seed's reverse loop; the NumPy one (a scan) agrees only up to
    float32 rounding, so it is not used here even when `TRAJKIT_BACKEND` asks for it.
    """
    pytest.importorskip("numba", reason="bit-for-bit GAE needs the sequential numba backend")
    monkeypatch.setenv("TRAJKIT_BACKEND", "numba")


def test_random_random_instance_shuffles_like_the_seed_without_global_state() -> None:
    ours, ref = both()
    state = random.getstate()
    got = list(ours.batches(4, 5, seed=random.Random(11)))
    assert random.getstate() == state
    random.seed(11)
    assert got == list(ref.batches(4, 5))


@pytest.mark.usefixtures("seed_order_gae")
def test_ppo_inner_loop_gives_the_seeds_parameters_bit_for_bit() -> None:
    # obs-tower2's PPO: advantages, targets, then `choose(values)` per batch of entries.
    def train(rollout: Rollout | ReferenceRollout) -> Any:
        random.seed(5)
        weights = np.zeros(5, np.float32)
        advs = rollout.advantages(0.9, 0.8)
        if isinstance(rollout, Rollout):
            values = rollout.value_predictions()
        else:
            values = rollout.column("critic", np.float32)
        targets = advs + values[:-1]
        for entries in rollout.batches(4, 12):

            def choose(array: Any, entries: list[tuple[int, int]] = entries) -> Any:
                return np.array([array[t, b] for t, b in entries])

            obs = choose(rollout.obses).astype(np.float32) / 255
            error = obs @ weights - choose(targets)
            weights -= 0.1 * (obs.T @ error) / len(entries) + 0.01 * choose(advs).mean()
        return weights

    ours, ref = both()
    np.testing.assert_array_equal(train(ours), train(ref))


# ------------------------------------------------------------- the run_for_rollout idiom


def run_for_rollout(rollout: Any, scale: float) -> Any:
    """obs-tower2's `BaseModel.run_for_rollout`: copy, empty the outputs, append T+1 steps."""
    result = rollout.copy()
    result.model_outs = []
    for t in range(rollout.num_steps + 1 if isinstance(rollout, Rollout) else T + 1):
        obs = np.asarray(rollout.obses[t], np.float32)
        result.model_outs.append(
            {
                # float32, as a torch model's outputs are
                "critic": (obs.sum(axis=-1) * scale).astype(np.float32),
                "actor": (np.repeat(obs[:, :1], A, axis=1) * np.arange(A) * scale).astype(
                    np.float32
                ),
                "prob_pi": (1 / (1 + np.exp(-obs[:, 0] * scale))).astype(np.float32),
            }
        )
    return result


@pytest.mark.usefixtures("seed_order_gae")
def test_run_for_rollout_idiom_appends_t_plus_1_steps() -> None:
    ours, ref = both()
    got = run_for_rollout(ours, 0.01)
    want = run_for_rollout(ref, 0.01)
    assert len(got.model_outs) == T + 1
    assert not got.model_outs.building
    np.testing.assert_array_equal(got.value_predictions(), want.column("critic", np.float32))
    np.testing.assert_array_equal(got.advantages(0.99, 0.95), want.advantages(0.99, 0.95))
    assert ours.model_outs.keys() == ("critic", "actor", "actions", "log_probs")  # untouched


def test_a_rollout_being_built_refuses_to_compute() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    r.model_outs = []  # the seed's idiom, typed: assignment accepts what __init__ does
    r.model_outs.append({"critic": np.zeros(2)})
    r.model_outs.append({"critic": np.ones(2)})
    message = (
        "value_predictions() needs complete model outputs, but model_outs has 2 of T+1 = 5 "
        "steps: append the remaining steps with model_outs.append({key: [B, ...] array, ...})"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        r.value_predictions()
    for call in (
        lambda: r.advantages(0.9, 0.9),
        lambda: r.training_arrays(0.9, 0.9),
        lambda: next(r.minibatches(2, gamma=0.9, lam=0.9)),
        lambda: r.revalidate(),
    ):
        with pytest.raises(ValueError, match="model_outs has 2 of T\\+1 = 5 steps"):
            call()
    with pytest.raises(ValueError, match="the rollout is incomplete: model_outs has 2 of"):
        trajkit.save(r, "never-written.npz")
    list(r.batches(3, 2, seed=0))  # shuffling needs no outputs
    for _ in range(3):
        r.model_outs.append({"critic": np.ones(2)})
    assert r.value_predictions().shape == (5, 2)
    with pytest.raises(
        ValueError,
        match=re.escape(
            "model_outs already has all T+1 = 5 steps; to rebuild them, assign an empty list "
            "first (rollout.model_outs = []) and append T+1 steps"
        ),
    ):
        r.model_outs.append({"critic": np.ones(2)})


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (
            [{"critic": np.zeros(3)}],
            "model_outs[0]['critic'] has shape (3,), expected (2, ...) (B=2)",
        ),
        (
            [{"critic": np.zeros(2)}, {"actor": np.zeros((2, 3))}],
            "model_outs[1] has keys ['actor'], expected ['critic'] (the keys of model_outs[0])",
        ),
        (
            [{"critic": np.zeros(2)}, {"critic": np.zeros((2, 1))}],
            "model_outs[1]['critic'] has shape (2, 1), expected (2,) like model_outs[0]['critic']",
        ),
        (
            [{"mask": np.zeros(2, bool)}, {"mask": np.zeros(2)}],
            "model_outs[1]['mask'] has dtype float64 (float), expected the same kind as "
            "model_outs[0]['mask'] (bool, bool)",
        ),
        (
            [{"critic": np.array([0.0, np.nan])}],
            "model_outs[0]['critic'] must be finite, got nan at (b=1)",
        ),
        (
            [{"actions": np.array([0, 4]), "actor": np.zeros((2, 4))}],
            "model_outs[0]['actions'] must be in [0, A) with A=4 from model_outs['actor'], "
            "got 4 at (b=1)",
        ),
        ([{0: np.zeros(2)}], "model_outs keys must be strings, got 0"),
        (["critic"], "model_outs[0] must be a mapping of key -> array, got str"),
    ],
)
def test_each_appended_step_is_checked_at_once(steps: list[Any], message: str) -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    r.model_outs = []  # the seed's idiom, typed: assignment accepts what __init__ does
    *good, bad = steps
    for step in good:
        r.model_outs.append(step)
    with pytest.raises(ValueError, match=re.escape(message)):
        r.model_outs.append(bad)
    assert len(r.model_outs) == len(good)  # the refused step was not appended


def test_copy_of_a_rollout_being_built_keeps_its_state() -> None:
    r = example_rollout(num_steps=3, num_envs=2)
    r.model_outs = []  # the seed's idiom, typed: assignment accepts what __init__ does
    r.model_outs.append({"critic": np.zeros(2)})
    c = r.copy()
    assert c.model_outs.building
    assert len(c.model_outs) == 1
    assert c == r
    c.model_outs.append({"critic": np.ones(2)})
    assert len(r.model_outs) == 1


# --------------------------------------------------------------------------- GAIL


@pytest.mark.usefixtures("seed_order_gae")
def test_gail_reward_rewrite_on_a_copy() -> None:
    def add_rewards(rollout: Any) -> Any:
        result = rollout.copy()
        result.rews = result.rews.copy() * 0.5
        applied = run_for_rollout(result, 0.02)
        for t, outs in enumerate(applied.model_outs[1:]):
            result.rews[t - 1] -= (1 - applied.dones[t]) * outs["prob_pi"] * 0.1
        return result

    ours, ref = both()
    before = ours.rews.copy()
    got, want = add_rewards(ours), add_rewards(ref)
    np.testing.assert_array_equal(got.rews, want.rews)
    np.testing.assert_array_equal(got.advantages(0.9, 0.95), want.advantages(0.9, 0.95))
    np.testing.assert_array_equal(ours.rews, before)  # the original is untouched


def run_discriminator(rollout: Any) -> Any:
    """obs-tower2's `DiscriminatorModel` through `run_for_rollout`: per-step scalar outputs.

    Its `add_fields` sets `prob_pi` and `prob_expert` to the batch mean of log D: one value
    per step, not per env (issue 25: trajkit refused these).
    """
    result = rollout.copy()
    result.model_outs = []
    for t in range(rollout.num_steps + 1 if isinstance(rollout, Rollout) else T + 1):
        obs = np.asarray(rollout.obses[t], np.float32)
        logits = (obs[:, 0] * 0.01).astype(np.float32)
        log_disc = -np.log1p(np.exp(-logits))
        result.model_outs.append(
            {
                "logits": logits,
                "prob_pi": np.float32(log_disc.mean()),  # a 0-d array, as torch.mean gives
                "prob_expert": np.mean(-np.log1p(np.exp(logits))).astype(np.float32),
            }
        )
    return result


def test_gail_add_rewards_runs_verbatim_with_per_step_scalar_outputs() -> None:
    def add_rewards(rollout_pi: Any, rew_scale: float, real_rew_scale: float) -> Any:
        # obs-tower2's GAIL.add_rewards, verbatim.
        result = rollout_pi.copy()
        result.rews = result.rews.copy() * real_rew_scale
        applied = run_discriminator(result)
        for t, model_outs in enumerate(applied.model_outs[1:]):
            result.rews[t - 1] -= (1 - applied.dones[t]) * model_outs["prob_pi"] * rew_scale
        return result

    ours, ref = both()
    got, want = add_rewards(ours, 0.1, 0.5), add_rewards(ref, 0.1, 0.5)
    np.testing.assert_array_equal(got.rews, want.rews)
    applied = run_discriminator(ours)
    assert applied.model_outs.arrays["prob_pi"].shape == (T + 1,)
    assert applied.model_outs[2]["prob_pi"].shape == ()
    # Per-step scalars have no entry per env: minibatches leave them out.
    assert "prob_pi" not in applied.replace(
        model_outs={**applied.model_outs.arrays, "critic": np.zeros((T + 1, B))}
    ).training_arrays(0.9, 0.9)


def test_per_step_scalar_outputs_are_written_checked_saved_and_loaded(tmp_path: Any) -> None:
    applied = run_discriminator(example_rollout(num_steps=T, num_envs=B))
    applied.model_outs[1]["prob_pi"] = 2.0
    applied.model_outs[1]["prob_pi"][()] = 3.0
    assert applied.model_outs.arrays["prob_pi"][1] == 3.0
    with pytest.raises(ValueError, match=re.escape("model_outs[1]['prob_pi'] has shape (3,)")):
        applied.model_outs[1]["prob_pi"] = np.zeros(3)
    spec = trajkit.RolloutSpec.from_rollout(applied)
    assert not spec.model_outputs["prob_pi"].per_env
    assert "per_env" in spec.model_dump_json()
    assert "per_env" not in str(spec.model_outputs["logits"].model_dump())
    trajkit.save(applied, tmp_path / "gail.npz")
    assert trajkit.load(tmp_path / "gail.npz") == applied
    message = "model_outs['critic'] must be an array with at least 2"
    with pytest.raises(ValidationError, match=re.escape(message)):
        applied.replace(model_outs={**applied.model_outs.arrays, "critic": np.zeros(T + 1)})


# ---------------------------------------------------------------------- Prierarchy


def log_softmax(x: Any) -> Any:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@pytest.mark.usefixtures("seed_order_gae")
def test_prierarchy_prior_pass_and_kl_rewards() -> None:
    def add_rewards(rollout: Any) -> Any:
        prior = run_for_rollout(rollout, 0.03)
        result = rollout.copy()
        result.rews = result.rews.copy()
        q = log_softmax(np.array([m["actor"] for m in prior.model_outs]))
        p = log_softmax(np.array([m["actor"] for m in rollout.model_outs]))
        kls = np.sum(np.exp(p) * (p - q), axis=-1)
        result.rews -= kls[:-1] * 0.1
        return result

    ours, ref = both()
    got, want = add_rewards(ours), add_rewards(ref)
    np.testing.assert_array_equal(got.rews, want.rews)
    np.testing.assert_array_equal(got.advantages(0.99, 0.9), want.advantages(0.99, 0.9))
    np.testing.assert_array_equal(got.logits(), want.column("actor", np.float32))


# ---------------------------------------------------------------------- recording


def recording_rollout(cls: Any, actions: Any, rewards: Any) -> Any:
    """obs-tower2's `recording_rollout`: allocate with rows of None, fill in place per env."""
    rollout = cls(
        states=np.zeros((T + 1, B, 2), np.float32),
        obses=np.zeros((T + 1, B, 3), np.uint8),
        rews=np.zeros((T, B), np.float32),
        dones=np.zeros((T + 1, B), np.float32),
        infos=[[{} for _ in range(B)] for _ in range(T)],
        model_outs=[{"actions": [None] * B} for _ in range(T + 1)],
    )
    for b in range(B):
        rollout.obses[:, b] = b
        for t in range(T):
            rollout.rews[t, b] = rewards[t, b]
            rollout.model_outs[t]["actions"][b] = actions[t, b]
        rollout.model_outs[-1]["actions"][b] = actions[T, b]
    return rollout


def test_recording_fills_actions_in_place() -> None:
    rng = np.random.default_rng(1)
    actions, rewards = rng.integers(0, A, (T + 1, B)), rng.normal(size=(T, B))
    got = recording_rollout(Rollout, actions, rewards)
    want = recording_rollout(ReferenceRollout, actions, rewards)
    np.testing.assert_array_equal(got.actions(), want.column("actions", np.int32))
    assert got.actions().dtype == np.int32
    np.testing.assert_array_equal(got.rews, want.rews)
    # Behaviour cloning reads the actions of every step but the last.
    cloned = np.array([m["actions"] for m in got.model_outs[:-1]])
    np.testing.assert_array_equal(cloned, actions[:-1])


def test_unfilled_entries_are_refused_until_filled() -> None:
    r = Rollout(
        states=np.zeros((3, 2, 0)),
        obses=np.zeros((3, 2)),
        rews=np.zeros((2, 2)),
        dones=np.zeros((3, 2)),
        infos=None,
        model_outs=[{"actions": [None, None]} for _ in range(3)],
    )
    r.model_outs[0]["actions"][0] = 1
    message = (
        "actions() needs complete model outputs, but model_outs['actions'] has 5 unset (None) "
        "entries, the first at model_outs[0]['actions'][1]: fill them in"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        r.actions()
    for t in range(3):
        r.model_outs[t]["actions"][:] = [2, 3]
    np.testing.assert_array_equal(r.actions(), [[2, 3]] * 3)


# ------------------------------------------------------ every write path is validated


def valid() -> Rollout:
    return Rollout(**fields())


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (
            lambda r: r.model_outs[2]["actions"].__setitem__(1, 0.7),
            "model_outs[2]['actions'][1] must be integer-valued, got 0.7",
        ),
        (
            lambda r: r.model_outs[2]["actions"].__setitem__(1, 9),
            "model_outs[2]['actions'][1] must be in [0, A) with A=4 from model_outs['actor'], "
            "got 9",
        ),
        (
            lambda r: r.model_outs[1]["critic"].__setitem__(0, float("inf")),
            "model_outs[1]['critic'][0] must be finite, got inf",
        ),
        (
            lambda r: r.model_outs[3].__setitem__("critic", np.zeros(2)),
            "model_outs[3]['critic'] has shape (2,), expected (3,) (B=3)",
        ),
        (
            lambda r: r.model_outs[3].__setitem__("actions", [0.5, 1, 2]),
            "model_outs[3]['actions'] must be integer-valued, got 0.5",
        ),
        (
            lambda r: r.model_outs[3].__setitem__("critic", ["a", "b", "c"]),
            "model_outs[3]['critic'] must hold real numbers, got dtype <U1 (string)",
        ),
        (
            lambda r: r.model_outs.__setitem__(4, {"critic": np.zeros(3)}),
            "model_outs[4] must have the keys ['actions', 'actor', 'critic', 'log_probs'], got "
            "['critic']",
        ),
        (
            lambda r: r.model_outs.__setitem__(
                4,
                {
                    "critic": np.zeros(3),
                    "actor": np.zeros((3, A)),
                    "actions": np.array([0, 1, 5]),
                    "log_probs": np.zeros(3),
                },
            ),
            "model_outs[4]['actions'] must be in [0, A) with A=4 from model_outs['actor'], got 5 "
            "at (b=2)",
        ),
        (
            lambda r: r.model_outs[0].__setitem__("new_key", np.zeros(3)),
            "model_outs has no key 'new_key'",
        ),
    ],
)
def test_writes_through_containers_are_validated(write: Any, message: str) -> None:
    r = valid()
    before = r.copy()
    with pytest.raises((ValueError, KeyError), match=re.escape(message)):
        write(r)
    assert r == before  # a refused write changes nothing


def test_valid_writes_through_containers_are_stored() -> None:
    r = valid()
    r.model_outs[2]["actions"][1] = 3.0  # integer-valued float, as the seed accepted
    r.model_outs[2]["critic"] = [1, 2, 3]
    r.model_outs[4] = {
        "critic": np.ones(3),
        "actor": np.zeros((3, A)),
        "actions": np.array([0, 1, 2]),
        "log_probs": np.zeros(3),
    }
    r.model_outs[5]["critic"][:] += 1  # in place through the row: get, add, set
    assert r.actions()[2, 1] == 3
    np.testing.assert_array_equal(r.value_predictions()[2], [1, 2, 3])
    np.testing.assert_array_equal(r.value_predictions()[4], [1, 1, 1])
    r.revalidate()
    row = r.model_outs[0]["critic"]
    assert type(row * 2) is np.ndarray  # arithmetic gives plain arrays


def test_in_place_numpy_edits_of_fields_are_checked_and_revalidate_catches_ways_out() -> None:
    r = valid()
    r.rews[1] -= 0.5  # obs-tower2 relies on this
    r.revalidate()
    with pytest.raises(ValueError, match=re.escape("rews must be finite, got nan at (t=2, b=1)")):
        r.rews[2, 1] = np.nan
    r.revalidate()  # the refused write left nothing behind
    with pytest.raises(ValueError, match="read-only"):
        np.asarray(r.rews)[2, 1] = np.nan  # a plain view is read-only
    storage: Any = r.rews.base  # the storage behind the field writes unchecked
    storage[2, 1] = np.nan
    with pytest.raises(
        ValidationError, match=re.escape("rews must be finite, got nan at (t=2, b=1)")
    ):
        r.revalidate()
    with pytest.raises(ValidationError, match="rews must be finite"):
        trajkit.save(r, "never-written.npz")


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"tag": np.array([["a"]])}, "model_outs['tag'] must hold real numbers, got dtype <U1"),
        (
            {"obj": np.array([[None]], dtype=object)},
            "model_outs['obj'] must hold real numbers, got dtype object",
        ),
        (
            {"z": np.ones((2, 2), complex)},
            "model_outs['z'] must hold real numbers, got dtype complex128",
        ),
        ({3: np.zeros((2, 2))}, "model_outs keys must be strings, got 3"),
        ({"critic": np.array([[np.nan]])}, "model_outs['critic'] must be finite, got nan"),
    ],
)
def test_model_outputs_given_directly_are_validated(arrays: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        ModelOutputs(arrays)


def test_model_outputs_given_directly_convert_like_a_mapping() -> None:
    outs = ModelOutputs({"critic": [[1, 2], [3, 4]], "actions": [[0, 1], [1, 0]]})
    assert outs.arrays["critic"].dtype == np.float32
    assert outs.arrays["actions"].dtype == np.int32


# ------------------------------------------------------------ minibatch edge cases


def test_minibatches_need_a_critic() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    bare = r.replace(model_outs={"actions": r.model_outs.arrays["actions"]})
    message = (
        "minibatches() needs model_outs['critic'] to compute advantages and returns, but this "
        "rollout has keys ['actions']: record the critic's values as model_outs['critic'], or "
        "gather your own arrays with trajkit.minibatch_indices and trajkit.gather"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        next(bare.minibatches(4, gamma=0.9, lam=0.9))
    with pytest.raises(ValueError, match=re.escape("sequence_minibatches() needs")):
        next(bare.sequence_minibatches(1, gamma=0.9, lam=0.9))


def test_minibatches_that_would_yield_nothing_are_refused() -> None:
    r = example_rollout(num_steps=4, num_envs=2)
    message = (
        "minibatch_size=9 is larger than the 8 entries available (T*B=8), so drop_last=True "
        "would yield no minibatch at all: use minibatch_size <= 8, or drop_last=False to get "
        "one smaller minibatch per epoch"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        next(r.minibatches(9, gamma=0.9, lam=0.9, drop_last=True))
    with pytest.raises(ValueError, match=re.escape("envs_per_batch=3 is larger than the 2")):
        next(r.sequence_minibatches(3, gamma=0.9, lam=0.9, drop_last=True))
