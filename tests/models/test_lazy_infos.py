"""`infos=None` costs no per-step Python objects; reading `infos` still gives the seed's dicts."""

from __future__ import annotations

import copy
import pickle
import tracemalloc

import numpy as np

from trajkit import Rollout
from trajkit._core.fused import MIN_BYTES
from trajkit.testing import example_rollout


def _without_infos(T: int = 3, B: int = 2) -> Rollout:
    r = example_rollout(num_steps=T, num_envs=B)
    return Rollout(r.states, r.obses, r.rews, r.dones, None, r.model_outs)


def _fields(T: int, B: int) -> dict[str, object]:
    return {
        "states": np.zeros((T + 1, B, 0), np.float32),
        "obses": np.zeros((T + 1, B, 1), np.float32),
        "rews": np.zeros((T, B), np.float32),
        "dones": np.zeros((T + 1, B), np.float32),
        "model_outs": {"critic": np.zeros((T + 1, B), np.float32)},
    }


def test_no_infos_cost_no_memory_per_step() -> None:
    T, B = 100_000, 8  # 800,000 steps: empty dicts alone would take about 50 MB
    # The same construction once, outside the window and just large enough for the compiled
    # checks: numba compiles (or loads) them at their first call, tens of MB that would count
    # here when this test runs first or alone.
    Rollout(**_fields(MIN_BYTES // (4 * B) + 1, B), infos=None)  # type: ignore[arg-type]
    fields = _fields(T, B)
    dones = fields["dones"]
    assert isinstance(dones, np.ndarray)
    raw = sum(a.nbytes for a in (*fields.values(),) if isinstance(a, np.ndarray)) + dones.nbytes
    tracemalloc.start()
    r = Rollout(**fields, infos=None)  # type: ignore[arg-type]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1.2 * raw + (1 << 20)
    assert r.num_steps == T


def test_reading_infos_gives_editable_empty_dicts_that_stay() -> None:
    r = _without_infos()
    assert r.infos == [[{}, {}], [{}, {}], [{}, {}]]
    r.infos[1][0]["lives"] = 2
    assert r.infos[1][0] == {"lives": 2}
    assert r.copy().infos[1][0] == {"lives": 2}


def test_equality_pickle_copy_and_replace_without_infos() -> None:
    r = _without_infos()
    given = r.replace(infos=[[{}, {}]] * 3)
    assert r == given
    assert given == r
    assert pickle.loads(pickle.dumps(r)) == r
    assert copy.deepcopy(r) == r
    assert r.replace(rews=np.ones((3, 2))).infos[2] == [{}, {}]
    with_info = r.replace(infos=[[{"a": 1}, {}], [{}, {}], [{}, {}]])
    assert with_info != r
    assert r != with_info


def test_assignment_and_revalidate_keep_working_without_infos() -> None:
    r = _without_infos()
    r.rews = np.zeros((3, 2))
    r.revalidate()
    assert len(r.infos) == 3
    r.infos = None
    assert r.infos == [[{}, {}]] * 3
