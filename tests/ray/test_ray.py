"""`trajkit.ray` against a real local Ray (two CPUs), started once for this module."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from tests.mutation_report import UNDER_MUTMUT
from trajkit._io import engine, raytasks
from trajkit.cli import main
from trajkit.dataset import Dataset, validate_files
from trajkit.testing import example_rollout

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'trajkit[ray]')")
import trajkit.ray  # noqa: E402 - after the skip

# Offline and quiet: no usage statistics, no dashboard, no token written to the home folder.
_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_DEDUP_LOGS": "0"}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    """A Ray of our own: `address="local"` never joins a cluster that Ray's temp folder or
    `RAY_ADDRESS` names as current, and its own short temp folder (Ray's sockets live there)."""
    saved = {key: os.environ.get(key) for key in (*_ENV, "RAY_ADDRESS")}
    os.environ.update(_ENV)
    os.environ.pop("RAY_ADDRESS", None)
    temp_dir = tempfile.mkdtemp(prefix="tkray-")
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        _temp_dir=temp_dir,
    )
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(temp_dir, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten files: eight valid (two layouts of T), one damaged, one not a ZIP."""
    root = tmp_path_factory.mktemp("ray") / "runs"
    Dataset.write(
        root, [example_rollout(num_steps=4 + i % 2, truncation=True, seed=i) for i in range(8)]
    )
    first = root / "rollout-000000.npz"
    data = bytearray(first.read_bytes())
    data[-200] ^= 0xFF
    (root / "damaged.npz").write_bytes(bytes(data))
    (root / "junk.npz").write_bytes(b"junk")
    return root


@pytest.mark.usefixtures("local_ray")
def test_validate_matches_local_processes(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "CHUNK_FILES", 3)  # four chunks, four Ray tasks
    local = list(validate_files([str(folder)], jobs=1))
    remote = list(validate_files(str(folder), engine="ray"))
    assert remote == local
    assert [c.ok for c in remote].count(False) == 2
    assert list(Dataset.open(folder).validate(engine="ray")) == local


@pytest.mark.usefixtures("local_ray")
def test_the_old_ray_validators_warn_and_give_the_same_verdicts(folder: Path) -> None:
    local = list(validate_files([str(folder)], jobs=1))
    replacement = re.escape("use trajkit.dataset.validate_files(paths, engine='ray', ...)")
    with pytest.warns(
        DeprecationWarning, match=r"trajkit\.ray\.validate_files\(paths, \.\.\.\) is "
    ):
        assert list(trajkit.ray.validate_files([str(folder)])) == local
    with pytest.warns(DeprecationWarning, match=replacement):
        assert list(trajkit.ray.validate_files([str(folder)], jobs=2)) == local
    with pytest.warns(DeprecationWarning, match=r"use list\(trajkit\.dataset\.validate_files\("):
        assert trajkit.ray.validate(str(folder), quick=True) == list(
            validate_files(str(folder), quick=True, jobs=1)
        )


def test_the_old_ray_validators_are_outside_all_and_warn_where_they_are_named() -> None:
    assert not {"validate", "validate_files"} & set(trajkit.ray.__all__)
    with pytest.warns(
        DeprecationWarning, match=r"^trajkit\.ray\.validate\(paths, \.\.\.\) is "
    ) as caught:
        from trajkit.ray import validate
    if not UNDER_MUTMUT:  # its trampoline's frames lie between the import and the warning
        assert {Path(w.filename) for w in caught} == {Path(__file__)}  # the importing line
    assert validate is trajkit.ray._validate
    with pytest.raises(AttributeError, match=r"^module 'trajkit\.ray' has no attribute 'nothing'$"):
        trajkit.ray.nothing  # noqa: B018


@pytest.mark.usefixtures("local_ray")
def test_stats_match_the_dataset(folder: Path, tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    shutil.copytree(folder, clean, ignore=shutil.ignore_patterns("damaged.npz", "junk.npz"))
    assert repr(trajkit.ray.stats([str(clean)])) == repr(Dataset.open(clean).stats())
    with pytest.raises(trajkit.RolloutFileError, match=r"junk\.npz: damaged or not a ZIP"):
        trajkit.ray.stats([str(clean), str(folder / "junk.npz")])


# Ray Data's DataContext warns about deprecated fields of its own whenever it is made (2.60).
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")
@pytest.mark.usefixtures("local_ray")
def test_read_rollouts_gives_a_row_per_file(folder: Path) -> None:
    files = [f for f in Dataset.open(folder).files if "rollout-" in f]  # the valid ones
    # Ray Data keeps no order across its map tasks (unless `preserve_order` is set): by path.
    rows = sorted(trajkit.ray.read_rollouts(list(files)).take_all(), key=lambda r: r["path"])
    files = sorted(files)
    assert [row["path"] for row in rows] == files
    expected = [trajkit.load(path) for path in files]
    assert [row["num_steps"] for row in rows] == [r.num_steps for r in expected]
    assert [row["steps"] for row in rows] == [r.num_steps * r.batch_size for r in expected]
    first = expected[0].episode_stats()
    assert list(rows[0]["returns"]) == pytest.approx(first.returns.tolist())
    assert rows[0]["truncations"] == first.truncations
    spec = trajkit.RolloutSpec.model_validate_json(rows[0]["spec"])
    assert spec == trajkit.RolloutSpec.from_rollout(expected[0])
    with pytest.raises(trajkit.RolloutFileError, match=r"gone: no such file or directory"):
        trajkit.ray.read_rollouts(str(folder / "gone"))


@pytest.mark.usefixtures("local_ray")
def test_cli_engine_ray(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    code = main(["validate", "--engine", "ray", str(folder)])
    ray_out, ray_err = capsys.readouterr()
    assert code == 1
    assert main(["validate", "--jobs", "1", str(folder)]) == 1
    assert capsys.readouterr().out == ray_out
    assert "10 files: 8 ok, 2 invalid" in ray_err


@pytest.mark.usefixtures("local_ray")
def test_jobs_bounds_the_tasks_in_flight(
    capsys: pytest.CaptureFixture[str], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "CHUNK_FILES", 3)  # four chunks, four Ray tasks
    in_flight, most = [0], [0]
    submitter = raytasks.submitter

    def counting(ray_module: Any) -> Any:
        submit = submitter(ray_module)

        def counted(work: Any, group: Any) -> Any:
            wait = submit(work, group)
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])

            def done() -> Any:
                in_flight[0] -= 1
                return wait()

            return done

        return counted

    monkeypatch.setattr(raytasks, "submitter", counting)
    local = list(validate_files([str(folder)], jobs=1))
    assert list(validate_files(str(folder), engine="ray", jobs=1)) == local
    assert most[0] == 1
    most[0] = 0
    assert list(validate_files(str(folder), engine="ray")) == local
    assert most[0] == 4  # by default, four chunks per CPU may be in flight: all of them
    assert repr(trajkit.ray.stats(str(folder / "rollout-000001.npz"), jobs=1)) == repr(
        trajkit.ray.stats(str(folder / "rollout-000001.npz"))
    )
    with pytest.raises(ValueError, match=r"jobs must be None or an integer >= 1, got 0"):
        validate_files(str(folder), engine="ray", jobs=0)
    most[0] = 0
    code = main(["validate", "--engine", "ray", "--jobs", "1", str(folder)])
    assert code == 1
    assert most[0] == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{c.path}: ok" if c.ok else f"{c.path}: invalid: {c.problems[0]}" for c in local
    ]


# ---------------------------------------------------------------- read_steps, read_arrays

GAMMA, LAM = 0.99, 0.95
_RAY_DATA = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Four valid files of two lengths, with truncations; their paths in listing order."""
    root = tmp_path_factory.mktemp("steps") / "runs"
    Dataset.write(
        root, [example_rollout(num_steps=4 + i % 2, truncation=True, seed=i) for i in range(4)]
    )
    return list(Dataset.open(root).files)


def _by_file(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The rows of each file, env by env and step by step."""
    files: dict[int, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda row: (row["file"], row["env"], row["step"])):
        files.setdefault(int(row["file"]), []).append(row)
    return files


@_RAY_DATA
@pytest.mark.usefixtures("local_ray")
def test_read_steps_gives_every_transition_with_its_rollouts_advantages(
    clean: list[str],
) -> None:
    steps = trajkit.ray.read_steps(os.path.dirname(clean[0]), gamma=GAMMA, lam=LAM)
    files = _by_file(steps.take_all())
    assert sorted(files) == list(range(len(clean)))
    seen = np.zeros(2, int)  # truncations and terminations
    for index, path in enumerate(clean):
        rollout = trajkit.load(path)
        T, B = rollout.num_steps, rollout.batch_size
        rows = files[index]
        assert len(rows) == T * B
        assert [(row["env"], row["step"]) for row in rows] == [
            (b, t) for b in range(B) for t in range(T)
        ]
        env = np.array([row["env"] for row in rows])
        step = np.array([row["step"] for row in rows])

        def column(name: str, rows: list[dict[str, Any]] = rows) -> Any:
            return np.stack([row[name] for row in rows])

        outs = rollout.model_outs.arrays
        np.testing.assert_array_equal(column("obs"), np.asarray(rollout.obses)[step, env])
        np.testing.assert_array_equal(
            column("next_obs"), np.asarray(rollout.next_obses())[step, env]
        )
        np.testing.assert_array_equal(column("action"), outs["actions"][step, env])
        np.testing.assert_array_equal(column("reward"), rollout.rews[step, env])
        np.testing.assert_array_equal(column("log_prob"), outs["log_probs"][step, env])
        np.testing.assert_array_equal(column("value"), outs["critic"][step, env])
        np.testing.assert_array_equal(
            column("advantage"), rollout.advantages(GAMMA, LAM)[step, env]
        )
        np.testing.assert_allclose(column("return"), rollout.returns(GAMMA, LAM)[step, env])
        assert rollout.truncated is not None
        ends, truncated = rollout.dones[1:] == 1, rollout.truncated == 1
        np.testing.assert_array_equal(column("truncated"), truncated[step, env])
        np.testing.assert_array_equal(column("terminated"), (ends & ~truncated)[step, env])
        seen += (column("truncated").sum(), column("terminated").sum())
    assert seen.all()
    assert "actor" not in rows[0]  # other model outputs only when asked for


@_RAY_DATA
@pytest.mark.usefixtures("local_ray")
def test_read_steps_trains_with_torch_and_groups_by_file(clean: list[str]) -> None:
    torch = pytest.importorskip("torch")
    steps = trajkit.ray.read_steps(clean, gamma=GAMMA, lam=LAM, keys=["actor"])
    total = 0
    for batch in steps.iter_torch_batches(batch_size=7):
        n = len(batch["file"])
        total += n
        assert batch["obs"].shape == (n, 4)
        assert batch["obs"].dtype == torch.float32
        assert batch["actor"].shape == (n, 3)
        assert batch["action"].shape == (n,)
        assert batch["action"].dtype == torch.int64  # as trajkit.torch: what cross_entropy needs
        assert batch["advantage"].dtype == torch.float32
        assert batch["terminated"].dtype == torch.bool
        assert batch["file"].dtype == torch.int64
    sizes = [trajkit.load(path).num_steps * trajkit.load(path).batch_size for path in clean]
    assert total == sum(sizes)
    counts = steps.groupby("file", num_partitions=2).count().take_all()
    assert sorted((row["file"], row["count()"]) for row in counts) == list(enumerate(sizes))
    rollouts = trajkit.ray.read_rollouts(clean).take_all()
    assert sorted((row["file"], row["path"]) for row in rollouts) == list(enumerate(clean))


@_RAY_DATA
@pytest.mark.usefixtures("local_ray")
def test_read_steps_of_nested_observations(tmp_path: Path) -> None:
    rollout = example_rollout(num_steps=3, num_envs=2, nested=True, keys={"critic", "actions"})
    T, B = rollout.num_steps, rollout.batch_size
    per_step = np.arange(T + 1, dtype=np.float32) / 10  # one value per step, for every env
    rollout = rollout.replace(model_outs={**rollout.model_outs.arrays, "prob_pi": per_step})
    trajkit.save(rollout, tmp_path / "nested.npz")
    steps = trajkit.ray.read_steps(str(tmp_path), keys=["prob_pi"])
    rows = _by_file(steps.take_all())[0]
    assert len(rows) == T * B
    assert list(rows[0]) == [
        "file",
        "env",
        "step",
        "obs.image",
        "obs.proprio.0",
        "obs.proprio.1.goal",
        "next_obs.image",
        "next_obs.proprio.0",
        "next_obs.proprio.1.goal",
        "action",
        "reward",
        "terminated",
        "truncated",
        "episode",
        "value",
        "next_value",
        "prob_pi",
    ]  # no gamma, no advantages; no log_probs in these files
    env = np.array([row["env"] for row in rows])
    step = np.array([row["step"] for row in rows])
    for name, leaf in [
        ("obs.image", rollout.obses["image"]),
        ("obs.proprio.0", rollout.obses["proprio"][0]),
        ("obs.proprio.1.goal", rollout.obses["proprio"][1]["goal"]),
    ]:
        column = np.stack([row[name] for row in rows])
        assert column.dtype == leaf.dtype
        np.testing.assert_array_equal(column, leaf[step, env])
    np.testing.assert_array_equal([row["prob_pi"] for row in rows], per_step[step])
    batch = next(iter(steps.iter_batches(batch_size=T * B, batch_format="numpy")))
    assert batch["obs.image"].shape == (T * B, 4)
    assert batch["obs.image"].dtype == np.uint8


@_RAY_DATA
@pytest.mark.usefixtures("local_ray")
def test_read_arrays_gives_whole_rollouts(clean: list[str], tmp_path: Path) -> None:
    rows = sorted(
        trajkit.ray.read_arrays(clean[:2], gamma=GAMMA, lam=LAM).take_all(),
        key=lambda row: row["file"],
    )
    assert [row["path"] for row in rows] == clean[:2]
    for row, path in zip(rows, clean, strict=False):
        rollout = trajkit.load(path)
        arrays = rollout.training_arrays(GAMMA, LAM)
        assert (row["num_steps"], row["batch_size"]) == (rollout.num_steps, rollout.batch_size)
        assert set(row) == {"file", "path", "num_steps", "batch_size", *arrays}
        for name, array in arrays.items():
            np.testing.assert_array_equal(row[name], array)
    trajkit.save(example_rollout(nested=True), tmp_path / "nested.npz")
    (nested,) = trajkit.ray.read_arrays(str(tmp_path), gamma=GAMMA, lam=LAM).take_all()
    assert nested["obses['image']"].shape == (4, 2, 4)
    assert nested["obses['proprio'][1]['goal']"].shape == (4, 2, 2)
    assert nested["states['h']"].shape == (4, 2, 2)


@pytest.mark.usefixtures("local_ray")
def test_read_steps_refuses_what_it_cannot_give(clean: list[str], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"give gamma and lam together .* got gamma=0.9, lam=None"):
        trajkit.ray.read_steps(clean, gamma=0.9)
    with pytest.raises(ValueError, match=r"lam and n_step need gamma, .* lam=None, n_step=3"):
        trajkit.ray.read_steps(clean, n_step=3)
    with pytest.raises(ValueError, match=r"n_step must be an integer of at least 1, got 0"):
        trajkit.ray.read_steps(clean, gamma=0.9, n_step=0)
    with pytest.raises(ValueError, match=r"lam must be a finite number in \[0, 1\], got 1.5"):
        trajkit.ray.read_steps(clean, gamma=0.9, lam=1.5)
    with pytest.raises(ValueError, match=r"gamma must be a finite number in \[0, 1\], got -0.1"):
        trajkit.ray.read_arrays(clean, gamma=-0.1, lam=0.9)
    first = re.escape(clean[0])
    outputs = r"\['actions', 'actor', 'critic', 'log_probs'\]"
    unknown = (
        rf"keys: 'nope' is not a model output of the files \(the first, {first}, has {outputs}"
    )
    with pytest.raises(ValueError, match=unknown):
        trajkit.ray.read_steps(clean, keys=["nope"])
    with pytest.raises(
        ValueError, match=r"keys: 'critic' is always a column already, named 'value'"
    ):
        trajkit.ray.read_steps(clean, keys=["critic"])
    with pytest.raises(
        ValueError, match=r"keys: 'reward' would clash with the step column of that"
    ):
        trajkit.ray.read_steps(clean, keys=["reward"])
    spec = trajkit.RolloutSpec.from_rollout(trajkit.load(clean[0]))
    with pytest.raises(
        ValueError, match=rf"keys: 'actorr' is not a model output of the spec \(it has {outputs}"
    ):
        trajkit.ray.read_steps(clean, keys=["actorr"], spec=spec)
    with pytest.raises(
        TypeError, match=r"keys must be a sequence of model-output keys, got the string"
    ):
        trajkit.ray.read_steps(clean, keys="actor")
    no_critic = tmp_path / "no-critic.npz"
    trajkit.save(example_rollout(keys={"actions"}), no_critic)
    critic = r"the advantage and return columns need model_outs\['critic'\], but the first file"
    with pytest.raises(ValueError, match=rf"{critic}, .*no-critic\.npz, has keys \['actions'\]"):
        trajkit.ray.read_steps(str(no_critic), gamma=0.9, lam=0.9)
    critic = r"read_arrays\(\) needs model_outs\['critic'\] to compute advantages and returns"
    with pytest.raises(
        trajkit.MissingModelOutputError,
        match=rf"{critic}, but the first file, .*no-critic\.npz, has keys \['actions'\]: read",
    ):
        trajkit.ray.read_arrays(str(no_critic), gamma=0.9, lam=0.9)  # at the call
    with pytest.raises(trajkit.RolloutFileError, match=r"gone: no such file or directory"):
        trajkit.ray.read_steps(str(tmp_path / "gone"))
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(trajkit.RolloutFileError, match=r"junk\.npz: damaged or not a ZIP"):
        trajkit.ray.read_steps(str(tmp_path / "junk.npz"))


@_RAY_DATA
@pytest.mark.usefixtures("local_ray")
def test_read_steps_fails_on_a_file_of_another_layout(clean: list[str], tmp_path: Path) -> None:
    other = tmp_path / "other.npz"
    trajkit.save(example_rollout(obs_shape=(5,)), other)
    steps = trajkit.ray.read_steps([clean[0], str(other)])
    differs = r"other\.npz: its layout differs from that of the first file, .*rollout-000000\.npz"
    with pytest.raises(trajkit.RolloutFileError, match=differs):
        steps.take_all()
    spec = trajkit.RolloutSpec.from_rollout(trajkit.load(clean[0]))
    with pytest.raises(trajkit.RolloutFileError, match=r"other\.npz: does not conform to the spec"):
        trajkit.ray.read_arrays([str(other)], gamma=GAMMA, lam=LAM, spec=spec).take_all()


@_RAY_DATA
@pytest.mark.usefixtures("local_ray")
def test_read_steps_next_obs_is_the_true_final_observation_at_episode_ends(
    tmp_path: Path,
) -> None:
    rollout = example_rollout(num_steps=6, num_envs=2, seed=3)
    ends = np.nonzero(rollout.dones[1:] == 1)
    assert len(ends[0])
    final = np.full((len(ends[0]), *rollout.obses.shape[2:]), 7, rollout.obses.dtype)
    rollout = rollout.replace(final_obses=final)
    trajkit.save(rollout, tmp_path / "final.npz")
    rows = _by_file(trajkit.ray.read_steps(str(tmp_path)).take_all())[0]
    got = {(int(row["step"]), int(row["env"])): row["next_obs"] for row in rows}
    for t, b in zip(*ends, strict=True):
        np.testing.assert_array_equal(got[int(t), int(b)], final[0])
    t, b = next((t, b) for t in range(6) for b in range(2) if rollout.dones[t + 1, b] == 0)
    np.testing.assert_array_equal(got[t, b], rollout.obses[t + 1, b])


# ----------------------------------------------- step rows: the columns of transitions (issue 36)


def test_step_rows_hold_the_transition_columns_and_td_fields() -> None:
    """The per-file row function, without Ray: the same columns as `trajkit.transitions`."""
    rollout = example_rollout(num_steps=7, num_envs=3, seed=5, truncation=True, final_obs=True)
    discount = trajkit.ray._steps._check_discount(0.9, 0.8, 3)
    (rows,) = trajkit.ray._steps._file_steps(rollout, 2, discount, ())
    want = trajkit.transitions(rollout, gamma=0.9, n_step=3, source=2)
    for name in want:
        np.testing.assert_array_equal(rows[name], want[name], err_msg=name)
        assert rows[name].dtype == want[name].dtype, name
    assert rows["action"].dtype == np.int64
    assert rows["next_value"].dtype == rows["n_step_value"].dtype == np.float32
    untruncated = example_rollout(num_steps=3, num_envs=2, keys={"critic"})
    assert untruncated.truncated is None
    (plain,) = trajkit.ray._steps._file_steps(untruncated, 0, discount, ())
    assert plain["next_value"].dtype == np.float32
    assert (rows["episode"] >> 32 == 2).all()
    critic = rollout.model_outs.arrays["critic"]
    assert rollout.truncated is not None
    assert rollout.final_values is not None
    T = rollout.num_steps
    for i, (b, t) in enumerate((b, t) for b in range(3) for t in range(T)):
        if rows["terminated"][i]:
            assert rows["next_value"][i] == 0
        elif rows["truncated"][i]:
            assert rows["next_value"][i] == rollout.final_values[t, b]
        else:
            assert rows["next_value"][i] == critic[t + 1, b]
    # The one-step target from the rows equals the rollout's one-step TD target.
    target = rows["reward"] + 0.9 * rows["next_value"]
    td = rollout.advantages(0.9, 0.0) + critic[:T]  # lam = 0: r + gamma * V(next) per step
    np.testing.assert_allclose(target, td.T.ravel(), rtol=1e-5, atol=1e-5)
    # And the n-step target from n-step rows, against a slow loop over each row.
    g = rows["n_step_return"] + rows["n_step_discount"] * rows["n_step_value"]
    for i, (b, t) in enumerate((b, t) for b in range(3) for t in range(T)):
        total, s = 0.0, t
        for k in range(3):
            s = t + k
            if s >= T:
                s -= 1
                break
            total += 0.9**k * float(rollout.rews[s, b])
            if rollout.dones[s + 1, b] == 1:
                break
        if rollout.dones[s + 1, b] == 0:
            total += 0.9 ** (s - t + 1) * float(critic[s + 1, b])
        elif rollout.truncated[s, b] == 1:
            total += 0.9 ** (s - t + 1) * float(rollout.final_values[s, b])
        assert g[i] == pytest.approx(total, rel=1e-5, abs=1e-5)


def test_step_rows_without_actions_or_critic() -> None:
    rollout = example_rollout(num_steps=3, num_envs=2, keys={"log_probs"})
    (rows,) = trajkit.ray._steps._file_steps(
        rollout, 0, trajkit.ray._steps._check_discount(None, None, None), ()
    )
    assert "action" not in rows
    assert "next_value" not in rows
    assert rows["episode"].dtype == np.int64
