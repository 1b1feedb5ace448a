"""PyTorch tensors as field values: plain CPU tensors convert, others are refused by field."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from trajkit import Rollout, RolloutValidationError
from trajkit._models.arrays import as_numeric

torch = pytest.importorskip("torch", reason="the tensor rule is checked against real torch")

T, B = 3, 2


def _fields(**override: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "states": np.zeros((T + 1, B, 1)),
        "obses": np.zeros((T + 1, B, 4), np.float32),
        "rews": np.ones((T, B), np.float32),
        "dones": np.zeros((T + 1, B)),
        "infos": None,
        "model_outs": {"critic": np.zeros((T + 1, B)), "actions": np.zeros((T + 1, B), int)},
    }
    fields.update(override)
    return fields


def test_plain_cpu_tensors_are_converted_and_copied() -> None:
    obses = torch.arange(float((T + 1) * B * 4)).reshape(T + 1, B, 4)
    rews = torch.ones(T, B)
    actions = torch.zeros(T + 1, B, dtype=torch.int64)
    r = Rollout(**_fields(obses=obses, rews=rews, model_outs={"actions": actions}))
    assert isinstance(r.obses, np.ndarray)
    assert r.obses.dtype == np.float32
    np.testing.assert_array_equal(r.obses, obses.numpy())
    obses[0, 0, 0] = -1.0  # the rollout holds a copy (copy=True, the default)
    assert r.obses[0, 0, 0] == 0.0
    assert r.model_outs.arrays["actions"].dtype == np.int32


def test_copy_false_keeps_a_float32_tensors_memory() -> None:
    rews = torch.ones(T, B)
    r = Rollout(**_fields(rews=rews), copy=False)
    rews[0, 0] = 5.0
    assert r.rews[0, 0] == 5.0


@pytest.mark.parametrize("field", ["obses", "rews", "states"])
def test_a_tensor_that_requires_grad_is_refused_naming_the_field(field: str) -> None:
    value = torch.zeros(*_fields()[field].shape, requires_grad=True)
    with pytest.raises(RolloutValidationError) as info:
        Rollout(**_fields(**{field: value}))
    assert (
        f"{field} is a torch tensor that requires grad: pass tensor.detach().cpu().numpy()"
        in str(info.value)
    )


def test_a_model_output_that_requires_grad_is_refused_naming_the_key() -> None:
    critic = torch.zeros(T + 1, B, requires_grad=True)
    with pytest.raises(ValueError, match=r"critic.* is a torch tensor that requires grad: pass"):
        Rollout(**_fields(model_outs={"critic": critic, "actions": np.zeros((T + 1, B), int)}))


def test_a_nested_observation_leaf_is_named() -> None:
    image = torch.zeros(T + 1, B, 2, requires_grad=True)
    with pytest.raises(ValueError, match=r"obses\['image'\] is a torch tensor that requires grad"):
        Rollout(**_fields(obses={"image": image}))


def test_a_tensor_off_the_cpu_is_refused() -> None:
    # The meta device stands in for a GPU: NumPy cannot read either.
    value = torch.zeros(T, B, device="meta")
    with pytest.raises(ValueError, match=r"^rews is a torch tensor on device meta") as info:
        as_numeric(value, "rews", copy=False)
    assert str(info.value) == (
        "rews is a torch tensor on device meta, which NumPy cannot read: pass "
        "tensor.detach().cpu().numpy()"
    )


def test_a_dtype_numpy_lacks_is_refused() -> None:
    value = torch.zeros(T, B, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^rews is a torch tensor that NumPy cannot convert \("):
        as_numeric(value, "rews", copy=True)


def test_assignment_refuses_a_tensor_that_requires_grad_and_keeps_the_rollout() -> None:
    r = Rollout(**_fields())
    with pytest.raises(RolloutValidationError, match="rews is a torch tensor that requires grad"):
        r.rews = torch.ones(T, B, requires_grad=True)
    np.testing.assert_array_equal(r.rews, np.ones((T, B), np.float32))
