"""trajkit.torch at its boundaries: defaults, messages, one-row minibatches, a missing torch.

Each test pins behaviour that a small change to `trajkit.torch` (a mutant of `make mutate`)
would break without any other CPU test noticing. The on-device branches (pinned-memory
copies, `index_select` on the GPU) are exercised only where CUDA is (`tests/torch/test_torch.py`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import trajkit  # noqa: E402
import trajkit.torch as tt  # noqa: E402
import trajkit.torch._convert as convert  # noqa: E402
from trajkit.dataset import Dataset  # noqa: E402
from trajkit.testing import example_rollout  # noqa: E402


def test_without_torch_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "_torch_module", None)
    monkeypatch.setitem(sys.modules, "torch", None)  # (import torch now raises ImportError)
    message = "trajkit.torch needs torch; install it with: pip install 'trajkit[torch]'"
    with pytest.raises(ImportError, match=re.escape(message)):
        tt.to_tensor(np.zeros(2, np.float32))


def test_torch_is_imported_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "_torch_module", None)
    assert tt.to_tensor(np.zeros(2, np.float32)).dtype == torch.float32
    assert convert._torch_module is torch


def test_to_tensors_makes_integer_actions_int64_on_the_cpu_by_default() -> None:
    batch = {"actions": np.arange(3, dtype=np.int32), "obses": {"x": np.zeros(3, np.uint8)}}
    out = tt.to_tensors(batch)
    assert out["actions"].dtype == torch.int64
    assert out["actions"].device.type == "cpu"
    assert out["obses"]["x"].dtype == torch.uint8


def test_default_keys_name_what_is_missing_and_how_to_ask() -> None:
    r = example_rollout(num_steps=3, num_envs=2)
    r = r.replace(model_outs={"critic": r.model_outs.arrays["critic"]})
    message = "pass keys= with the names you need, or record them as model_outs"
    with pytest.raises(ValueError, match=re.escape(message)):
        tt.training_tensors(r, gamma=0.9, lam=0.9)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("rews", "got 'rews': write keys=('rews',) for that one array"),
        (5, "keys must be a collection of array names or 'all', got 5"),
    ],
)
def test_keys_that_are_not_a_collection_are_refused(keys: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message) + "$"):
        tt.training_tensors(example_rollout(), gamma=0.9, lam=0.9, keys=keys)


def test_training_tensors_normalize_over_the_whole_rollout() -> None:
    r = example_rollout(num_steps=6, num_envs=3, seed=2)
    raw = tt.training_tensors(r, gamma=0.9, lam=0.8)["advantages"].numpy().astype(np.float64)
    got = tt.training_tensors(r, gamma=0.9, lam=0.8, normalize_advantages="rollout")
    want = next(r.minibatches(18, gamma=0.9, lam=0.8, normalize_advantages="rollout", seed=0))
    np.testing.assert_allclose(np.sort(got["advantages"].numpy()), np.sort(want["advantages"]))
    np.testing.assert_allclose(
        got["advantages"].numpy(), (raw - raw.mean()) / (raw.std() + 1e-8), rtol=1e-5, atol=1e-6
    )


def test_training_tensors_refuse_per_minibatch_normalization() -> None:
    message = "normalize_advantages must be None or 'rollout' for a whole rollout, got 'minibatch'"
    with pytest.raises(ValueError, match=re.escape(message)):
        tt.training_tensors(
            example_rollout(),
            gamma=0.9,
            lam=0.9,
            normalize_advantages="minibatch",  # type: ignore[call-overload]
        )


def test_per_minibatch_normalization_is_computed_in_float64_even_for_tiny_advantages() -> None:
    r = example_rollout(num_steps=8, num_envs=4, seed=5)
    outs = r.model_outs.arrays
    r = r.replace(rews=r.rews * 1e-7, model_outs={**outs, "critic": outs["critic"] * 1e-7})
    args: dict[str, Any] = {"gamma": 0.99, "lam": 0.95, "seed": 0}
    raw = tt.minibatches(r, 10, **args)
    done = tt.minibatches(r, 10, normalize_advantages="minibatch", **args)
    for a, b in zip(raw, done, strict=True):
        wide = a["advantages"].double()
        want = ((wide - wide.mean()) / (wide.std() + 1e-8)).float()
        torch.testing.assert_close(b["advantages"], want, rtol=0, atol=0)


def test_a_one_row_minibatch_keeps_its_advantage() -> None:
    r = example_rollout(num_steps=2, num_envs=2, seed=1)
    args: dict[str, Any] = {"gamma": 0.9, "lam": 0.9, "seed": 0}
    ours = tt.minibatches(r, 1, normalize_advantages="minibatch", **args)
    theirs = r.minibatches(1, normalize_advantages="minibatch", **args)
    for got, want in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(got["advantages"].numpy(), want["advantages"])


def test_the_deprecated_transition_minibatches_defaults_are_those_of_the_numpy_path() -> None:
    r = example_rollout(num_steps=6, num_envs=2, seed=3, final_obs=True)
    with pytest.warns(DeprecationWarning, match="transition_minibatches"):
        got = list(tt.transition_minibatches(r, 5, gamma=0.9, seed=1))
    want = list(trajkit.transition_minibatches(r, 5, gamma=0.9, seed=1))
    assert len(got) == len(want) == 3  # one epoch of 12 transitions, the last one short
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g["n_step_return"].numpy(), w["n_step_return"])
        np.testing.assert_array_equal(g["episode"].numpy(), w["episode"])
        assert g["reward"].device.type == "cpu"


def test_the_deprecated_transition_minibatches_warn_at_the_callers_line() -> None:
    with pytest.warns(DeprecationWarning, match="to_tensors over") as caught:
        tt.transition_minibatches(example_rollout(), 4)
    assert caught[0].filename == __file__


def test_the_deprecated_name_is_out_of_all_but_served() -> None:
    assert "transition_minibatches" not in tt.__all__
    assert callable(tt.transition_minibatches)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = tt.nothing


@pytest.mark.parametrize("per_buffer", [None, 2])
def test_the_deprecated_transition_minibatches_of_a_dataset_shuffle_as_the_numpy_path(
    tmp_path: Path, per_buffer: int | None
) -> None:
    ds = Dataset.write(tmp_path / "ds", [example_rollout(3, 2, seed=s) for s in range(6)])
    args: dict[str, Any] = {"seed": 2}
    if per_buffer is not None:
        args["files_per_buffer"] = per_buffer
    with pytest.warns(DeprecationWarning, match="transition_minibatches"):
        got = [mb["reward"].numpy() for mb in tt.transition_minibatches(ds, 4, **args)]
    want = [mb["reward"] for mb in trajkit.transition_minibatches(ds, 4, **args)]
    assert len(got) == len(want) == 9
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
