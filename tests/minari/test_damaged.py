"""trajkit.minari on damaged datasets and custom envs (issue 34).

`from_minari` raised `KeyError` (or read on, pairing episode ids with the next episode's data)
for a dataset missing a file, a metadata field or an episode, or declaring more episodes than
it holds; `to_minari(env=...)` failed inside Gymnasium for an env registered with a callable
entry point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("minari")

import gymnasium
from gymnasium import spaces

import trajkit.minari as tm
from trajkit.testing import example_rollout

ID = "trajkit/damaged-v0"


@pytest.fixture
def data(datasets: Path) -> Path:
    """A dataset of several episodes; its `data` folder, to damage."""
    r = example_rollout(num_steps=8, num_envs=2, keys={"actions"}, seed=1)
    dataset = tm.to_minari([r], ID)
    assert dataset.total_episodes >= 3
    return datasets / ID / "data"


def _metadata(data: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = data / "metadata.json"
    metadata = json.loads(path.read_text())
    edit(metadata)
    path.write_text(json.dumps(metadata))


def _overstate(metadata: dict[str, Any]) -> None:
    metadata["total_episodes"] += 2


DAMAGES: list[tuple[str, Callable[[Path], None], str]] = [
    (
        "an episode's file",
        lambda data: (data / "1" / "part-0.arrow").unlink(),
        r"^Minari dataset 'trajkit/damaged-v0': episode 1 has no data, but the dataset "
        r"declares \d+ episodes \(total_episodes\)$",
    ),
    (
        "an episode's folder",
        lambda data: shutil.rmtree(data / "1"),
        r"^Minari dataset 'trajkit/damaged-v0': episode 1 has no data \(.*data/1 is missing\)",
    ),
    (
        "a total_episodes that overstates the episodes",
        lambda data: _metadata(data, _overstate),
        r"^Minari dataset 'trajkit/damaged-v0': episode \d+ has no data \(.* is missing\), but "
        r"the dataset declares \d+ episodes \(total_episodes\)$",
    ),
    (
        "a metadata field",
        lambda data: _metadata(data, lambda m: m.pop("total_steps")),
        r"^Minari dataset 'trajkit/damaged-v0': missing from its metadata or data: total_steps$",
    ),
    (
        "the metadata",
        lambda data: (data / "metadata.json").unlink(),
        r"^Minari dataset 'trajkit/damaged-v0': No data found",
    ),
]


@pytest.mark.parametrize(
    ("damage", "what"), [(d[1], d[2]) for d in DAMAGES], ids=[d[0] for d in DAMAGES]
)
def test_a_dataset_missing_what_it_declares_is_refused_by_name(
    data: Path, damage: Callable[[Path], None], what: str
) -> None:
    damage(data)
    with pytest.raises(tm.MinariDatasetError, match=what) as caught:
        tm.from_minari(ID)
    assert isinstance(caught.value, ValueError)
    assert caught.value.dataset_id == ID


def test_an_episode_missing_a_column_is_refused_by_name(data: Path) -> None:
    import pyarrow as pa

    path = data / "1" / "part-0.arrow"
    table = pa.ipc.open_file(pa.BufferReader(path.read_bytes())).read_all()
    table = table.drop_columns(["rewards"])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(
        tm.MinariDatasetError, match=r"missing from its metadata or data: .*rewards"
    ):
        tm.from_minari(ID)


class Custom(gymnasium.Env[Any, Any]):
    """An env of the user's own, registered by its class (a callable entry point)."""

    observation_space = spaces.Box(-10.0, 10.0, (4,), np.float32)
    action_space = spaces.Discrete(3)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return np.zeros(4, np.float32), 0.0, False, False, {}


@pytest.fixture
def custom() -> Any:
    gymnasium.register("TrajkitCustom-v0", entry_point=Custom)
    yield "TrajkitCustom-v0"
    gymnasium.registry.pop("TrajkitCustom-v0")


@pytest.mark.parametrize("given", ["id", "env", "spec"])
def test_to_minari_takes_an_env_registered_by_a_callable(custom: str, given: str) -> None:
    env: Any = custom
    if given == "env":
        env = gymnasium.make(custom)
    elif given == "spec":
        env = gymnasium.spec(custom)
    r = example_rollout(num_steps=6, num_envs=2, keys={"actions"}, seed=2)
    r = r.replace(obses=np.clip(r.obses, -10, 10))
    dataset = tm.to_minari(r, f"trajkit/custom-{given}-v0", env=env)
    assert dataset.observation_space == Custom.observation_space
    assert dataset.spec.env_spec.entry_point == f"{__name__}:Custom"
    remade = dataset.recover_environment()
    assert isinstance(remade.unwrapped, Custom)
    assert [e.num_steps for e in tm.from_minari(dataset)] == [
        e.num_steps for e in tm.from_minari(dataset.spec.dataset_id)
    ]


def test_an_entry_point_that_cannot_be_named_is_refused_clearly(datasets: Path) -> None:
    def make(**kwargs: Any) -> Custom:  # a local function: no 'module:name' finds it
        return Custom(**kwargs)

    gymnasium.register("TrajkitLocal-v0", entry_point=make)
    try:
        r = example_rollout(num_steps=6, num_envs=1, keys={"actions"}, seed=2)
        r = r.replace(obses=np.clip(r.obses, -10, 10))
        with pytest.raises(
            ValueError,
            match=r"^the env 'TrajkitLocal-v0' is registered with the entry point <function .*make",
        ):
            tm.to_minari(r, "trajkit/local-v0", env="TrajkitLocal-v0")
        assert not (datasets / "trajkit" / "local-v0").exists()
    finally:
        gymnasium.registry.pop("TrajkitLocal-v0")


def test_a_custom_env_exports_in_a_fresh_interpreter(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import gymnasium, numpy as np, trajkit.minari as tm
        from trajkit.testing import example_rollout
        from tests.minari.test_damaged import Custom
        gymnasium.register("TrajkitCustom-v0", entry_point=Custom)
        r = example_rollout(num_steps=6, num_envs=1, keys={"actions"}, seed=2)
        r = r.replace(obses=np.clip(r.obses, -10, 10))
        ds = tm.to_minari(r, "trajkit/fresh-v0", env="TrajkitCustom-v0")
        print(ds.spec.env_spec.entry_point, len(tm.from_minari("trajkit/fresh-v0")))
        """
    )
    env = {**os.environ, "MINARI_DATASETS_PATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],  # where `tests` is a package
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    entry_point, episodes = done.stdout.split()
    assert entry_point == "tests.minari.test_damaged:Custom"
    assert int(episodes) >= 1
