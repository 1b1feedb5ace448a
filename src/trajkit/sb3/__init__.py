"""Stable-Baselines3's rollouts as validated trajkit rollouts (needs `trajkit[sb3]`).

Two entry points. [`TrajkitCallback`][trajkit.sb3.TrajkitCallback] is the one to use: add it
to `learn()` and every rollout SB3 trains on is converted and validated at the end of
`collect_rollouts`, and, if asked, saved with a recording (for `trajkit lint --replay`) and
linted; a rollout that fails stops training with a
[`RolloutCheckError`][trajkit.sb3.RolloutCheckError] naming it.
[`from_rollout_buffer`][trajkit.sb3.from_rollout_buffer] is the converter underneath, for a
`RolloutBuffer` or `DictRolloutBuffer` (PPO, A2C) you hold yourself.

**Layout.** SB3 keeps `[n_steps, n_envs]` arrays and the bootstrap apart (`last_values`, the
`dones` of the next observation, `_last_obs`); trajkit puts the bootstrap in row T of
`obses`, `dones` and `model_outs['critic']`, which therefore have T+1 rows. SB3's
`episode_starts` are trajkit's `dones`. Actions, stored by SB3 as `[T, B, action_dim]`, become
`[T+1, B, *action_space.shape]` (`[T+1, B]` integers for a Discrete space); observations
`[T+1, B, *observation_space.shape]` per key of a Dict space (`[T+1, B]` for a Discrete
space, which SB3 stores as `[T, B, 1]`), each in its space's dtype (SB3 2.3 to 2.7.0 store
every buffer as float32: converted where no value changes). No action is taken from the
bootstrap observation in this rollout, so row T of `actions` and `log_probs` repeats row T-1
(as `trajkit.minari` does); GAE never reads it. Box actions are the policy's samples, before
SB3 clips them for the env, since those are what the log-probabilities are of. `states` is
empty (`[T+1, B, 0]`).

**The folded bootstrap.** When a time limit cuts an episode (`infos[b]["TimeLimit.truncated"]`
with a `terminal_observation`), SB3 adds `gamma * V(terminal_observation)` to that step's
reward before storing it, so that GAE, which stops at every episode end, still bootstraps
from the critic. The buffer's `rewards` are then not the env's. trajkit keeps the env's
rewards and says where the bootstrap goes: `truncated[t, b] = 1` and `final_values[t, b] =
V(terminal_observation)`. Given `truncated` and `final_values`, the converter subtracts
`gamma * final_values` where truncated (or takes the env's rewards you pass as
`env_rewards`, after checking that they plus the bootstrap are the buffer's rewards). Either
way `Rollout.advantages(buffer.gamma, buffer.gae_lambda)` equals the buffer's `advantages`,
and `Rollout.returns` its `returns`, to float32 rounding.

Examples:
    >>> import numpy as np
    >>> from stable_baselines3 import PPO
    >>> from trajkit.sb3 import TrajkitCallback
    >>> model = PPO("MlpPolicy", "CartPole-v1", n_steps=32, batch_size=32, n_epochs=1,
    ...             seed=0, device="cpu")
    >>> check = TrajkitCallback()
    >>> _ = model.learn(64, callback=check)
    >>> check.rollouts, check.last_rollout.num_steps
    (2, 32)
    >>> buffer = model.rollout_buffer  # as SB3 left it: flattened by training on it
    >>> r = check.last_rollout
    >>> bool(np.allclose(r.returns(0.99, 0.95).ravel(), buffer.returns.ravel(), atol=1e-5))
    True
"""

from __future__ import annotations

try:
    import stable_baselines3.common.callbacks  # noqa: F401 - and with it torch and gymnasium
except ImportError as _missing:  # pragma: no cover - stable-baselines3 hidden
    raise ImportError(
        "trajkit.sb3 needs stable-baselines3 >= 2.3; install it with: pip install 'trajkit[sb3]'"
    ) from _missing

from trajkit.sb3._callback import RolloutCheckError, TrajkitCallback
from trajkit.sb3._convert import from_rollout_buffer

__all__ = ["RolloutCheckError", "TrajkitCallback", "from_rollout_buffer"]
