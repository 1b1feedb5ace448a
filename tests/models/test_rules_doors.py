"""One gate: the same bad value is refused at every door with the same words (issue 25).

For each rule of the rule table and each door that can carry the value (the constructor,
whole-field assignment, a model output's per-step write and `append`, and `load` of a crafted
file), a Hypothesis-chosen bad value at a Hypothesis-chosen position is refused with a
`ValueError` subclass whose message holds the field's name and the rule's words; and valid
values pass every door unchanged. The Arrow and Minari importers and the recorder (a real
CartPole vector env with one value spoiled) refuse the same values with the same words; each
door's own tests pin its full messages (tests/arrow/test_import.py, tests/minari/test_import.py,
tests/gym/test_recorder_refusals.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajkit
from trajkit import Rollout
from trajkit.testing import example_rollout

T, B, A = 4, 3, 5

# (field or output key, a bad value, the words every door's message must hold)
BAD_VALUES: list[tuple[str, float, str]] = [
    ("rews", np.nan, "must be finite, got nan"),
    ("rews", np.inf, "must be finite, got inf"),
    ("rews", 1e300, "beyond float32's range"),
    ("obses", np.nan, "must be finite, got nan"),
    ("obses", -np.inf, "must be finite, got -inf"),
    ("states", np.nan, "must be finite, got nan"),
    ("states", 1e39, "beyond float32's range"),
    ("dones", 0.5, "must hold only 0 and 1, got 0.5"),
    ("dones", 2.0, "must hold only 0 and 1, got 2.0"),
    ("critic", np.nan, "must be finite, got nan"),
    ("critic", 1e300, "beyond float32's range"),
    ("log_probs", -np.inf, "must be finite, got -inf"),
    ("actor", np.nan, "must be finite, got nan"),
    ("actions", 1.5, "must be integer-valued, got 1.5"),
    ("actions", float(A), f"must be in [0, A) with A={A}"),
]
FIELDS = {"rews", "obses", "states", "dones"}


def _valid() -> Rollout:
    r = example_rollout(num_steps=T, num_envs=B, num_actions=A)
    return r.replace(obses=r.obses.astype(np.float64), states=np.zeros((T + 1, B, 2)))


def _with(r: Rollout, name: str, t: int, b: int, value: float) -> dict[str, Any]:
    """The constructor's arguments of `r`, with `value` at (t, b) of `name` (float64 arrays)."""
    kwargs: dict[str, Any] = {
        "states": r.states,
        "obses": r.obses,
        "rews": r.rews,
        "dones": r.dones,
        "infos": r.infos,
        "model_outs": dict(r.model_outs.arrays),
    }
    outs = kwargs["model_outs"]
    holder = kwargs if name in FIELDS else outs
    array = np.array(holder[name], np.float64)
    array[t, b] = value
    holder[name] = array
    return kwargs


def _doors(
    r: Rollout, name: str, t: int, b: int, value: float, tmp: Path
) -> dict[str, Callable[[], Any]]:
    kwargs = _with(r, name, t, b, value)
    doors: dict[str, Callable[[], Any]] = {"constructor": lambda: Rollout(**kwargs)}
    if name in FIELDS:
        doors["assignment"] = lambda: setattr(r.copy(), name, kwargs[name])
    else:
        row = kwargs["model_outs"][name][t]

        def element() -> None:
            r.copy().model_outs[t][name][b] = row[b]

        def step_row() -> None:
            r.copy().model_outs[t][name] = row

        def append() -> None:
            built = r.copy()
            built.model_outs = []
            for s, step in enumerate(r.model_outs):
                built.model_outs.append(
                    {k: (kwargs["model_outs"][k][s] if k == name else v) for k, v in step.items()}
                )

        doors.update({"element write": element, "row write": step_row, "append": append})

    def load() -> None:
        crafted = r.copy()
        if name in FIELDS:
            # In place, as a buggy writer would: `save` normally revalidates first.
            getattr(crafted, name)[...] = kwargs[name].astype(getattr(crafted, name).dtype)
        else:
            storage = crafted.model_outs._arrays[name]
            with np.errstate(over="ignore", invalid="ignore"):
                storage[...] = kwargs["model_outs"][name].astype(storage.dtype)
        path = tmp / "crafted.npz"
        with mock.patch.object(Rollout, "revalidate", return_value=None):
            trajkit.save(crafted, path)
        trajkit.load(path)

    if not (value == 1e300 or value == 1e39 or (value == 1.5 and name == "actions")):
        # (A crafted file holds float32 and int32: 1e300 cannot be written, nor 1.5 as int32.)
        doors["load"] = load
    return doors


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    case=st.sampled_from(BAD_VALUES),
    t=st.integers(0, T - 1),
    b=st.integers(0, B - 1),
)
def test_a_bad_value_is_refused_with_the_same_words_at_every_door(
    tmp_path: Path, case: tuple[str, float, str], t: int, b: int
) -> None:
    name, value, words = case
    r = _valid()
    for door, call in _doors(r, name, t, b, value, tmp_path).items():
        with pytest.raises(ValueError, match=re.escape(words)) as caught:
            call()
        message = str(caught.value)
        assert re.search(re.escape(name), message), (door, message)
        assert words in message, (door, message)


@settings(max_examples=20)
@given(t=st.integers(0, T - 1), b=st.integers(0, B - 1), x=st.floats(-1e30, 1e30))
def test_valid_values_pass_every_door_unchanged(t: int, b: int, x: float) -> None:
    r = _valid()
    kwargs = _with(r, "critic", t, b, x)
    built = Rollout(**kwargs)
    assert built.model_outs.arrays["critic"][t, b] == np.float32(x)
    written = r.copy()
    written.model_outs[t]["critic"][b] = x
    assert written == built
    assigned = r.copy()
    assigned.rews = _with(r, "rews", t, b, x)["rews"]
    assert assigned.rews[t, b] == np.float32(x)


# ------------------------------------------------------------ the importers and the recorder

RECORDER_CASES: list[tuple[str, str, float, str]] = [
    # (what the env returns wrong, the field's name in the message, the value, the words)
    ("obs", "obses", np.nan, "must be finite, got nan"),
    ("obs", "obses", np.inf, "must be finite, got inf"),
    ("rews", "rews", np.nan, "must be finite, got nan"),
    ("rews", "rews", -np.inf, "must be finite, got -inf"),
    ("rews", "rews", 1e300, "beyond float32's range"),
]


@pytest.mark.parametrize(("part", "name", "value", "words"), RECORDER_CASES)
@pytest.mark.parametrize("at", [1, 3])
def test_the_recorder_refuses_what_the_constructor_refuses(
    part: str, name: str, value: float, words: str, at: int
) -> None:
    pytest.importorskip("gymnasium")
    import gymnasium as gym

    from trajkit.gym import RolloutRecorder

    class Bad(gym.vector.VectorWrapper):
        """Puts `value` into env 1's observation or reward at the `at`-th step."""

        steps = 0

        def step(self, actions: Any) -> Any:
            obs, rews, terms, truncs, infos = self.env.step(actions)
            Bad.steps += 1
            if Bad.steps == at:
                if part == "obs":
                    obs = obs.copy()
                    obs[1, 2] = value
                else:
                    rews = np.asarray(rews, np.float64).copy()
                    rews[1] = value
            return obs, rews, terms, truncs, infos

    env = Bad(gym.make_vec("CartPole-v1", num_envs=B, vectorization_mode="sync"))
    recorder = RolloutRecorder(env, lambda obs: {"actions": np.zeros(len(obs), np.int64)}, seed=0)
    with pytest.raises(ValueError, match=re.escape(words)) as caught:
        recorder.record(T)
    assert str(caught.value).startswith(name), str(caught.value)
    # The constructor refuses the same value with the same words.
    r = _valid()
    with pytest.raises(ValueError, match=re.escape(words)):
        Rollout(**_with(r, name, 0, 1, value))
    env.close()


@pytest.mark.parametrize(
    ("value", "words"),
    [(np.nan, "must be finite, got nan"), (1e300, "beyond float32's range")],
)
def test_the_arrow_importer_refuses_what_the_constructor_refuses(value: float, words: str) -> None:
    pa = pytest.importorskip("pyarrow")
    from trajkit.arrow import from_arrow, to_arrow

    r = _valid()
    table = to_arrow(r)
    rewards = table.column("reward").to_numpy().astype(np.float64)
    steps, envs = table.column("step").to_numpy(), table.column("env").to_numpy()
    row = int(np.flatnonzero((steps == 2) & (envs == 1))[0])
    rewards[row] = value
    bad = table.set_column(
        table.schema.get_field_index("reward"), "reward", pa.array(rewards, pa.float64())
    )
    with pytest.raises(ValueError, match=re.escape(words)) as caught:
        from_arrow(bad)
    assert "rews" in str(caught.value) or "reward" in str(caught.value)
    with pytest.raises(ValueError, match=re.escape(words)):
        Rollout(**_with(r, "rews", 2, 1, value))


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("rewards", np.nan, "must be finite, got nan"),
        ("rewards", 1e300, "beyond float32's range"),
        ("observations", np.nan, "must be finite, got nan"),
        ("observations", -np.inf, "must be finite, got -inf"),
    ],
)
def test_the_minari_importer_refuses_what_the_constructor_refuses(
    field: str, value: float, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    import trajkit.minari as tm
    from tests.minari.helpers import edited, make

    dataset = make()
    (ok,) = tm.from_minari(dataset)
    if field == "rewards":
        bad = ok.rews[:, 0].astype(np.float64)
    else:
        bad = ok.obses[:, 0].astype(np.float64)
    bad[3] = value
    with pytest.raises(ValueError, match=re.escape(words)):
        tm.from_minari(edited(dataset, monkeypatch, **{field: bad}))
    name = "rews" if field == "rewards" else "obses"
    with pytest.raises(ValueError, match=re.escape(words)):
        Rollout(**_with(_valid(), name, 3, 0, value))
