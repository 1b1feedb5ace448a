"""Record validated rollouts from Gymnasium vector environments (needs `trajkit[gym]`).

`RolloutRecorder` turns a `gymnasium.vector.VectorEnv` and a policy into a stream of
validated [`Rollout`][trajkit.Rollout]s of `num_steps` transitions each, with no glue code.
Gymnasium (>= 1.0) is imported here
only, never by `import trajkit`; without it, importing this module raises an `ImportError`
that says `pip install 'trajkit[gym]'`.

**Spaces.** Observations of every Box, Discrete, MultiBinary and MultiDiscrete space, and
Dict and Tuple spaces of those (nested too), recorded as nested `obses` (a dict or tuple of
`[T+1, B, ...]` arrays); actions of a Discrete (integer `[B]`), MultiDiscrete or MultiBinary
(integer `[B, K]`) or Box (float `[B, ...]`) space. Text, Graph and Sequence spaces, and Dict
or Tuple action spaces, are refused with a message naming the part at fault.

**Policies.** A policy is a callable from the batch of observations, as the vector env
returns it (an array `[B, ...]`, or a dict or tuple of them), to a mapping of model outputs,
each with leading dimension B: `actions` (required, an element of the action space per env),
and `critic`, `log_probs`, `actor` (logits `[B, A]`) or any other key when it has them. It is
always called on a full batch of B observations.

**Checks.** Everything the env and the policy return is checked as it comes, by the same
rules as the `Rollout` constructor (see [Validation](../validation.md)), and nothing is cast
in a way that changes a value. Observations must have the space's shape exactly (`[B,
*space.shape]` per leaf of a Dict or Tuple space; nothing is broadcast) and are stored in the
space's dtype, converted only where no value changes (floats are rounded to a narrower float
dtype, as the constructor rounds to float32): 300 in a `uint8` space, -1.7 in an integer one,
1e300 in a float32 one, NaN and ±inf anywhere are refused. Rewards must be finite and within
float32's range, `terminated`/`truncated` 0 or 1, `states` finite. Policy outputs follow their
rule (`critic`, `log_probs`, `actor` finite; `actions` finite, stored in the action
space's dtype without changing a value, so 1.9 for a Discrete space is refused; any other key
keeps the dtype of the first call, so a later 1.5 where the first call gave integers is
refused); the env is sent the actions as recorded. A refusal is a `ValueError` whose message
starts as the constructor's (`obses must be finite, ...`, `rews must be finite, ...`) and ends
with where the value came from: `(env 2, step 7 of the recording; space Box(...))`, step k
being the k-th `env.step` call since the recorder's first reset (step 0).

**After a failure.** A `record()` that raises leaves the recorder as it was, or refuses to go
on: a failure in the first call's reset (say, a NaN in the first observations, or a policy
without `actions`) can be retried and records the same steps; once the env has been stepped,
a failure (a refused value, an exception from the env or the policy) makes every later
`record()` raise a `RuntimeError` that repeats the first error, since the env cannot be taken
back to where it was. Nothing a failed call logged is ever returned.

**Learning curves.** [`RolloutRecorder.last_episodes`][trajkit.gym.RolloutRecorder.last_episodes]
holds the episodes that ended within the last rollout with their whole returns and lengths,
counted across `record()` calls (a rollout's own `episode_stats()` sees only the episodes that
start and end inside it). Each return is the env's own where it reports one: the `r` of
`RecordEpisodeStatistics`' `info["episode"]` on the step that ended the episode (the vector
wrapper's, or the per-env wrapper's inside the vector env, from `final_info` under SAME_STEP).
So with `wrappers=[RecordEpisodeStatistics, NormalizeReward]` the returns are the raw,
undiscounted ones while the rollout holds the normalised rewards. Where the env reports none,
the return is the sum of the recorded rewards (which are the normalised ones under a reward
wrapper: put `RecordEpisodeStatistics` inside it to get learning curves in the env's units).
Lengths are always counted by the recorder, in real transitions.

**Autoreset modes.** The mode is read from `env.metadata["autoreset_mode"]` (an
`AutoresetMode`, or its value or name as a string); for an env without it, pass
`autoreset_mode=`.

* NEXT_STEP (Gymnasium's default): the step that ends an episode returns the final
  observation; the next step for that env ignores its action and returns the reset
  observation with reward 0. That phantom transition is *dropped*: the reset observation
  becomes the env's next row, with `dones = 1`. Since the phantom step happens for one env
  at a time, the recorder keeps a queue of real transitions per env and steps until every env
  has `num_steps` of them; transitions beyond that stay queued for the next call. So `T`
  counts real transitions, no mask is needed, and GAE sees only real transitions.
* SAME_STEP: the final observation comes in `infos["final_obs"]`, the batch already holds
  the reset observation.
* DISABLED: the recorder resets ended envs itself with `env.reset(options={"reset_mask": ...})`.

The same episodes give the same rollouts, hence the same advantages, in all three modes.

**Rows.** `obses[t]`, `dones[t]` and `model_outs[t]` (the action taken in `obses[t]`
among them) describe one observation; `rews[t]`, `infos[t]`, `truncated[t]` and
`final_values[t]` the step taken from it. `dones[t] = 1` when `obses[t]` starts an episode,
including the first reset. Each rollout's last row is the next rollout's first row.

**Truncation.** `truncated` and `final_values` are always given (zeros where nothing was
truncated). A step that is truncated and not terminated (both at once counts as terminated)
has `truncated = 1` and `final_values` = the policy's `critic` on the true final
observation, computed by calling the policy on the step's observation batch with the
final observations in place, so that `Rollout.advantages` bootstraps from it. A terminated
step bootstraps nothing. Without a `critic`, truncated steps keep `truncated = 1` with
`final_values = 0`: the flags still tell truncations from terminations (see
[`Rollout.episode_stats`][trajkit.Rollout.episode_stats]), and there is no value to bootstrap
from (nor advantages to compute).

**Final observations.** Every rollout has `final_obses`: for each step that ended an episode
(terminated or truncated), in the order of `np.nonzero(dones[1:] == 1)`, the observation the
env returned when it ended, before the reset put the next episode's first observation in the
next row. Under NEXT_STEP it is the ending step's own observation, under SAME_STEP
`infos["final_obs"]` (checked against the space like any observation), under DISABLED the
batch before the recorder resets the ended envs. `Rollout.next_obses()` reads it, as offline
RL's `next_obs`; files, the Minari export and the Arrow table keep it. It costs one
observation per episode end (E rows of the observation's size per rollout, next to the T+1
rows of `obses`), plus, under SAME_STEP and DISABLED, a copy of each kept until the rollout
that holds its step is returned; drop it with `rollout.replace(final_obses=None)`.

**Infos.** Gymnasium's vector info dict (arrays with `_key` masks, nested dicts such as
RecordEpisodeStatistics' `episode`) becomes, per step and env, a dict of the keys present
for that env, with NumPy scalars turned into Python scalars and arrays into lists, so that
infos are JSON-compatible and can be saved. `infos[t][b]` is the info of the step that made
transition t: under SAME_STEP the ending step's own info (`final_info`) is merged in, and
the bookkeeping keys `final_obs` and `final_info` are dropped. Reset infos are not recorded
(the phantom NEXT_STEP step's info is a reset info), except that under SAME_STEP Gymnasium
has already merged the reset's info keys into the ending step's vector info, where they
cannot be told apart (the step's own keys win). Values that JSON cannot hold (NaN, objects)
are kept as they are, and `trajkit.save` refuses them. `info_keys=` keeps only chosen keys.
(Under DISABLED, prefer the per-env `gymnasium.wrappers.RecordEpisodeStatistics` to the
vector one: in Gymnasium 1.4 the vector wrapper restarts every env's statistics when a
masked reset resets some.)

**States.** Gymnasium's API has no environment state, so `states` is empty by default:
shape `(T+1, B, 0)`, float32. Pass `state_fn=` (the env -> `[B, ...]` array, called after
every reset and step) to record one, e.g. `lambda env: env.get_attr("state")` for the
classic-control environments.

Examples:
    >>> import gymnasium as gym
    >>> import numpy as np
    >>> from trajkit.gym import RolloutRecorder
    >>> env = gym.make_vec(
    ...     "CartPole-v1", num_envs=4, vectorization_mode="sync", max_episode_steps=20
    ... )
    >>> weights = np.array([0.0, 0.0, 1.0, 0.0], np.float32)
    >>> def policy(obs):
    ...     return {"actions": (obs @ weights > 0).astype(np.int64), "critic": obs @ weights}
    >>> recorder = RolloutRecorder(env, policy, seed=0)
    >>> rollout = recorder.record(64)
    >>> rollout.advantages(gamma=0.99, lam=0.95).shape
    (64, 4)
    >>> stats = rollout.episode_stats()
    >>> stats.episodes == int(rollout.dones[1:].sum())
    True
    >>> env.close()
"""

from __future__ import annotations

try:
    import gymnasium.vector

    gymnasium.vector.AutoresetMode  # noqa: B018 - Gymnasium >= 1.0 has it
except (ImportError, AttributeError) as _missing:  # pragma: no cover - gymnasium hidden
    raise ImportError(
        "trajkit.gym needs Gymnasium >= 1.0 (for gymnasium.vector.AutoresetMode); "
        "install it with: pip install 'trajkit[gym]'"
    ) from _missing

from trajkit.gym._policy import Policy, StateFn
from trajkit.gym.episodes import CompletedEpisodes
from trajkit.gym.recorder import RolloutRecorder

__all__ = ["CompletedEpisodes", "Policy", "RolloutRecorder", "StateFn"]
