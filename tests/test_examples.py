"""The examples run: a seeded short PPO run on CartPole and Pendulum (no timing assertions)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def ppo() -> ModuleType:
    return load("ppo")


def test_ppo_on_cartpole_learns_something_in_a_few_updates(ppo: ModuleType) -> None:
    config = ppo.Config(steps=8 * 32 * 12, epochs=4, seed=1)
    history = ppo.train(config, log=False)
    assert history.steps[-1] == 8 * 32 * 12
    assert all(math.isfinite(loss) for loss in history.losses)
    assert len(history.episode_returns) > 10
    assert min(history.episode_returns) >= 1  # CartPole pays 1 per step
    # 12 short updates already beat a random policy's ~22 on average.
    assert history.mean_returns[-1] > 22
    again = ppo.train(config, log=False)
    assert again.episode_returns == history.episode_returns  # seeded: repeatable


def test_ppo_on_pendulum_runs_with_continuous_actions(ppo: ModuleType) -> None:
    config = ppo.Config(
        env="Pendulum-v1", steps=4 * 64 * 2, seed=0, **ppo.PENDULUM | {"num_steps": 64}
    )
    history = ppo.train(config, log=False)
    assert all(math.isfinite(loss) for loss in history.losses)
    assert all(r <= 0 for r in history.episode_returns)  # Pendulum's rewards are costs
