"""Every argument a minibatch adapter (or a `Dataset` method) is given arrives where it acts.

Each adapter makes one `MinibatchPlan` of its arguments and a source of the others (`gamma`,
`lam`, `n_step`, `keys`, `device`); a `Dataset` method passes `quick`, `jobs`, `max_bytes`,
... on. An adapter that dropped one (the mutants issue 43 names: a `Dataset` method without
`quick` or `files_per_buffer`) would still run, on a default: each test here sets every
argument off its default and checks that the value arrived. Then the normalization of
advantages, per minibatch and per rollout, against a slow reference.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trajkit
from trajkit import MinibatchPlan, Rollout, RolloutFileError
from trajkit.dataset import Dataset
from trajkit.testing import example_rollout

torch = pytest.importorskip("torch")

import trajkit.torch as tt  # noqa: E402
import trajkit.torch._sampler as torch_sampler  # noqa: E402

GAMMA, LAM = 0.7, 0.6  # neither a default nor each other: a swap shows
PLAN: dict[str, Any] = {"epochs": 2, "drop_last": True, "seed": 5, "shuffle": False}
PPO: dict[str, Any] = {"gamma": GAMMA, "lam": LAM}


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[MinibatchPlan]:
    """The plans made while the test runs, in order."""
    made: list[MinibatchPlan] = []
    checked = MinibatchPlan.__post_init__

    def spy(plan: MinibatchPlan) -> None:
        checked(plan)
        made.append(plan)

    monkeypatch.setattr(MinibatchPlan, "__post_init__", spy)
    return made


def rollout() -> Rollout:
    return example_rollout(num_steps=6, num_envs=2, seed=1, final_obs=True)


@pytest.fixture
def dataset(tmp_path: Path) -> Dataset:
    return Dataset.write(tmp_path / "ds", [example_rollout(6, 2, seed=s) for s in range(5)])


Adapter = Callable[[Dataset], Iterator[Any]]

ADAPTERS: dict[str, tuple[Adapter, dict[str, Any]]] = {
    "Rollout.minibatches": (
        lambda ds: rollout().minibatches(3, **PPO, **PLAN, normalize_advantages="minibatch"),
        {"normalize_advantages": "minibatch"},
    ),
    "Rollout.sequence_minibatches": (
        lambda ds: rollout().sequence_minibatches(2, **PPO, **PLAN, normalize_advantages="rollout"),
        {"minibatch_size": 2, "normalize_advantages": "rollout"},
    ),
    "minibatch_indices": (lambda ds: trajkit.minibatch_indices(6, 2, 3, **PLAN), {}),
    "sequence_minibatch_indices": (
        lambda ds: trajkit.sequence_minibatch_indices(4, 2, **PLAN),
        {"minibatch_size": 2},
    ),
    "transition_minibatches": (
        lambda ds: trajkit.transition_minibatches(ds, 3, files_per_buffer=2, **PLAN),
        {"files_per_buffer": 2},
    ),
    "trajkit.torch.minibatches": (
        lambda ds: tt.minibatches(rollout(), 3, **PPO, **PLAN, normalize_advantages="minibatch"),
        {"normalize_advantages": "minibatch"},
    ),
    "Dataset.minibatches": (
        lambda ds: ds.minibatches(
            3, **PPO, **PLAN, files_per_buffer=2, normalize_advantages="rollout"
        ),
        {"files_per_buffer": 2, "normalize_advantages": "rollout"},
    ),
}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_every_plan_argument_arrives_in_the_plan(
    name: str, plans: list[MinibatchPlan], dataset: Dataset
) -> None:
    call, more = ADAPTERS[name]
    expected = MinibatchPlan(**{"minibatch_size": 3, **PLAN, **more})
    plans.clear()
    assert list(call(dataset))  # it draws
    assert plans == [expected]


DEPRECATED: dict[str, Callable[[Dataset], Iterator[Any]]] = {
    "rollouts_per_buffer": lambda ds: trajkit.transition_minibatches(
        ds, 3, rollouts_per_buffer=2, **PLAN
    ),
    "Dataset.transition_minibatches": lambda ds: ds.transition_minibatches(
        3, files_per_buffer=2, **PLAN
    ),
    "trajkit.torch.transition_minibatches": lambda ds: tt.transition_minibatches(
        ds, 3, files_per_buffer=2, **PLAN
    ),
}


@pytest.mark.parametrize("name", sorted(DEPRECATED))
def test_the_deprecated_spellings_pass_every_argument_on(
    name: str, plans: list[MinibatchPlan], dataset: Dataset
) -> None:
    expected = MinibatchPlan(3, files_per_buffer=2, **PLAN)
    plans.clear()
    with pytest.warns(DeprecationWarning, match="is deprecated"):
        batches = DEPRECATED[name](dataset)
    assert plans == [expected]
    assert len(list(batches)) == 2 * (60 // 3)


def test_a_renamed_buffer_given_twice_is_refused() -> None:
    with (
        pytest.warns(DeprecationWarning, match="rollouts_per_buffer"),
        pytest.raises(ValueError, match="pass files_per_buffer only"),
    ):
        trajkit.transition_minibatches(rollout(), 3, files_per_buffer=2, rollouts_per_buffer=2)


# ----------------------------------------------------------- the source's arguments arrive too


def in_order(batches: Iterator[Any], key: str) -> Any:
    values = [np.asarray(b[key]) for b in batches]
    return np.concatenate(values, axis=1 if values[0].ndim > 1 and key == "advantages" else 0)


def test_gamma_and_lam_reach_the_advantages_of_every_ppo_adapter(tmp_path: Path) -> None:
    r = rollout()
    want = r.advantages(GAMMA, LAM)
    flat = want.reshape(-1)  # in order: row t * B + b
    kw: dict[str, Any] = {**PPO, "shuffle": False}
    np.testing.assert_array_equal(in_order(r.minibatches(5, **kw), "advantages"), flat)
    np.testing.assert_array_equal(in_order(r.sequence_minibatches(1, **kw), "advantages"), want)
    np.testing.assert_array_equal(in_order(tt.minibatches(r, 5, **kw), "advantages"), flat)
    ds = Dataset.write(tmp_path / "one", [r])
    np.testing.assert_array_equal(in_order(ds.minibatches(5, **kw), "advantages"), flat)


def test_gamma_and_n_step_reach_the_transitions_of_every_transition_adapter(
    dataset: Dataset,
) -> None:
    kw: dict[str, Any] = {"gamma": GAMMA, "n_step": 3, "shuffle": False}
    want = np.concatenate(
        [trajkit.transitions(r, gamma=GAMMA, n_step=3)["n_step_return"] for r in dataset]
    )
    got = in_order(trajkit.transition_minibatches(dataset, 7, **kw), "n_step_return")
    np.testing.assert_array_equal(got, want)
    with pytest.warns(DeprecationWarning, match="transition_minibatches"):
        old = in_order(dataset.transition_minibatches(7, **kw), "n_step_return")
    np.testing.assert_array_equal(old, want)
    with pytest.warns(DeprecationWarning, match="transition_minibatches"):
        tensors = list(tt.transition_minibatches(dataset, 7, **kw))
    np.testing.assert_array_equal(in_order(iter(tensors), "n_step_return"), want)


def test_keys_and_device_reach_the_torch_minibatches() -> None:
    # The meta device holds no data: the on-device branch (indices sent once per epoch,
    # index_select there, the carried rows at an epoch's end) runs without a GPU.
    meta = list(tt.minibatches(rollout(), 5, **PPO, device="meta", keys=("obses", "rews")))
    assert [sorted(b) for b in meta] == [["obses", "rews"]] * 3
    assert [b["rews"].shape[0] for b in meta] == [5, 5, 2]
    assert {b["obses"].device.type for b in meta} == {"meta"}
    normalized = next(
        tt.minibatches(rollout(), 5, **PPO, device="meta", normalize_advantages="minibatch")
    )
    assert normalized["advantages"].device.type == "meta"


def test_device_reaches_the_deprecated_transition_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    devices: list[object] = []

    def spy(batch: dict[str, Any], device: object = "cpu") -> dict[str, Any]:
        devices.append(device)
        return batch

    monkeypatch.setattr(torch_sampler, "to_tensors", spy)
    with pytest.warns(DeprecationWarning, match="transition_minibatches"):
        list(tt.transition_minibatches(rollout(), 5, device="meta"))
    assert devices == [torch.device("meta")] * 3


# ------------------------------------------------------------------ Dataset methods' arguments


def damaged(folder: Path) -> Path:
    """A folder of one rollout file whose rewards are damaged: its CRC-32 says so.

    Only a full check reads the data; a quick one (the ZIP directory and the metadata) passes.
    """
    folder.mkdir()
    path = folder / "run.npz"
    trajkit.save(example_rollout(), path)
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("rews.npy")
    data = bytearray(path.read_bytes())
    at = info.header_offset
    name, extra = (int.from_bytes(data[at + i : at + i + 2], "little") for i in (26, 28))
    end = at + 30 + name + extra + info.file_size
    data[end - 4 : end] = np.float32(np.nan).tobytes()
    path.write_bytes(bytes(data))
    return folder


def test_quick_reaches_adopt_and_validate(tmp_path: Path) -> None:
    folder = damaged(tmp_path / "runs")
    with pytest.raises(RolloutFileError, match="CRC-32 mismatch"):
        Dataset.adopt(folder)
    ds = Dataset.adopt(folder, quick=True)  # the quick check does not read the data
    assert [c.ok for c in ds.validate(quick=True)] == [True]
    assert [c.ok for c in ds.validate()] == [False]


def test_jobs_engine_and_address_reach_the_checks(dataset: Dataset, tmp_path: Path) -> None:
    message = "jobs must be None or an integer >= 1, got 0"
    with pytest.raises(ValueError, match=message):
        Dataset.adopt(dataset.path, jobs=0)
    with pytest.raises(ValueError, match=message):
        list(dataset.validate(jobs=0))
    with pytest.raises(ValueError, match=message):
        dataset.stats(jobs=0)
    with pytest.raises(ValueError, match=r"engine must be 'local' or 'ray', got 'x'"):
        list(dataset.validate(engine="x"))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"address= needs engine='ray'"):
        list(dataset.validate(address="auto"))


def test_max_bytes_and_spec_reach_every_maker(dataset: Dataset, tmp_path: Path) -> None:
    small = "over the limit of 100 bytes"
    with pytest.raises(RolloutFileError, match=small):
        Dataset.adopt(dataset.path, max_bytes=100)
    for made in (
        Dataset.create(dataset.path, dataset.spec, max_bytes=100),
        Dataset.open(dataset.path, max_bytes=100),
        Dataset.write(tmp_path / "w", [example_rollout()], max_bytes=100),
    ):
        with pytest.raises(RolloutFileError, match=small):
            next(iter(made))
    other = trajkit.RolloutSpec.from_rollout(example_rollout(obs_shape=(3,)))
    with pytest.raises(RolloutFileError, match=r"but the spec says obs_shape \(3,\)"):
        Dataset.adopt(dataset.path, spec=other)
    assert Dataset.write(tmp_path / "s", [], spec=other).spec == other


def test_max_bytes_reaches_the_adoption_of_loose_files(tmp_path: Path) -> None:
    # No spec.json: the spec is read from the first file, within the limit, and the adopted
    # dataset keeps the limit for the files found later.
    folder = tmp_path / "loose"
    folder.mkdir()
    for s in range(2):
        trajkit.save(example_rollout(seed=s), folder / f"run-{s}.npz")
    with pytest.raises(
        RolloutFileError,
        match=r"run-0\.npz: the metadata declares 552 bytes of array data \(T=4, B=2\), over "
        r"the limit of 100 bytes; pass a larger max_bytes to load it$",
    ):
        Dataset.adopt(folder, max_bytes=100)
    ds = Dataset.adopt(folder, max_bytes=3000)
    trajkit.save(example_rollout(32, 4, seed=2), folder / "run-2.npz")  # found later
    with pytest.raises(RolloutFileError, match=r"run-2\.npz: .* over the limit of 3000 bytes"):
        list(ds)


def test_compress_reaches_the_files(tmp_path: Path) -> None:
    ds = Dataset.write(tmp_path / "c", [example_rollout()], compress=True)
    path = ds.append(example_rollout(), compress=True)
    plain = ds.append(example_rollout())
    for file, kind in ((ds.files[0], zipfile.ZIP_DEFLATED), (path, zipfile.ZIP_DEFLATED)):
        with zipfile.ZipFile(file) as z:
            assert z.getinfo("rews.npy").compress_type == kind
    with zipfile.ZipFile(plain) as z:
        assert z.getinfo("rews.npy").compress_type == zipfile.ZIP_STORED


# ------------------------------------------------------------------ normalization, by reference


def standardized(values: Any, ddof: int) -> Any:
    """`(a - mean) / (std + 1e-8)` in float64, one value at a time; a single value as is."""
    a = [float(v) for v in np.asarray(values).ravel()]
    if ddof and len(a) <= 1:
        return np.asarray(values, np.float64)
    mean = sum(a) / len(a)
    std = (sum((v - mean) ** 2 for v in a) / (len(a) - ddof)) ** 0.5
    return (np.asarray(values, np.float64) - mean) / (std + 1e-8)


@settings(max_examples=25, deadline=None)
@given(
    steps=st.integers(1, 6),
    envs=st.integers(1, 4),
    size=st.integers(1, 9),
    seed=st.integers(0, 2**16),
)
def test_each_minibatch_is_standardized_on_its_own_and_a_rollout_once(
    steps: int, envs: int, size: int, seed: int
) -> None:
    r = example_rollout(num_steps=steps, num_envs=envs, seed=seed)
    kw: dict[str, Any] = {**PPO, "seed": seed, "epochs": 2}
    raw = list(r.minibatches(size, **kw))
    whole = standardized(r.advantages(GAMMA, LAM), 0)
    rows = list(trajkit.minibatch_indices(steps, envs, size, epochs=2, seed=seed))
    for mode in ("minibatch", "rollout"):
        numpy = list(r.minibatches(size, **kw, normalize_advantages=mode))
        tensors = list(tt.minibatches(r, size, **kw, normalize_advantages=mode))
        for plain, done, on_torch, (t, b) in zip(raw, numpy, tensors, rows, strict=True):
            want = standardized(plain["advantages"], 1) if mode == "minibatch" else whole[t, b]
            np.testing.assert_allclose(done["advantages"], want, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(on_torch["advantages"].numpy(), want, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(done["returns"], plain["returns"])  # never changed


def test_rollout_normalization_reaches_every_ppo_adapter(tmp_path: Path) -> None:
    r = rollout()
    whole = standardized(r.advantages(GAMMA, LAM), 0)  # over the whole rollout, population std
    kw: dict[str, Any] = {**PPO, "shuffle": False, "normalize_advantages": "rollout"}
    got = in_order(r.sequence_minibatches(1, **kw), "advantages")
    np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-6)
    for batches in (r.minibatches(5, **kw), tt.minibatches(r, 5, **kw)):
        np.testing.assert_allclose(in_order(batches, "advantages"), whole.ravel(), atol=1e-6)
    ds = Dataset.write(tmp_path / "two", [r, r])  # over each file's rollout
    got = in_order(ds.minibatches(5, **kw), "advantages")
    np.testing.assert_allclose(got, np.concatenate([whole.ravel()] * 2), atol=1e-6)
