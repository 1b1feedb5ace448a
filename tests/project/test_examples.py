"""The examples run: a seeded short PPO run on CartPole and Pendulum (no timing assertions)."""

from __future__ import annotations

import ast
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
def test_ppo_policy_ratios_are_one_on_a_fresh_rollout(ppo: ModuleType, env: str) -> None:
    # Before any update the new policy is the old one: every ratio is 1. With a clipped action
    # stored next to the log-probability of the unclipped sample, some were far from 1.
    import torch

    import trajkit.torch

    config = ppo.Config(env=env, num_envs=4, num_steps=64, seed=2)
    torch.manual_seed(config.seed)
    recorder_env = ppo.make_env(config)
    agent = ppo.Agent(
        int(np.prod(recorder_env.single_observation_space.shape)),
        recorder_env.single_action_space,
    )
    recorder = ppo.RolloutRecorder(recorder_env, agent.policy, seed=config.seed)
    rollout = recorder.record(config.num_steps)
    recorder_env.close()
    if env == "Pendulum-v1":  # the case that matters: some samples are out of bounds
        assert np.abs(rollout.actions()).max() > 2.0
    ratios = [
        ppo.ppo_loss(agent, mb, clip=config.clip, config=config)[1]
        for mb in trajkit.torch.minibatches(rollout, 64, gamma=0.9, lam=0.9, seed=0)
    ]
    ratio = torch.cat(ratios)
    assert ratio.numel() == 4 * 64
    assert torch.equal(ratio, torch.ones_like(ratio)), ratio[ratio != 1]


@pytest.mark.parametrize("example", ["ppo.py", "demo.py"])
def test_the_examples_use_only_public_names(example: str) -> None:
    # Users copy the examples: a private import there is one in their code (issue 34).
    tree = ast.parse((EXAMPLES / example).read_text(encoding="utf-8"))
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    modules |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    private = sorted(m for m in modules if m.startswith("trajkit") and "._" in m)
    assert private == []
