"""Rollouts to and from Minari datasets, Farama's standard for offline RL (`trajkit[minari]`).

A Minari dataset is a list of episodes, each with `n + 1` observations (the last one is where
the episode stopped), `n` actions and rewards, and separate `terminations` and `truncations`
flags. A trajkit rollout is B env timelines of T steps cut at arbitrary points. The two meet
as follows.

**Export** ([`to_minari`][trajkit.minari.to_minari]) walks each env's timeline across the
rollouts given (in order: consecutive rollouts of one recorder share a row, so an episode that
spans rollouts is exported whole) and cuts it at episode ends:

- an episode that ended inside the data becomes one Minari episode, flagged terminated or
  truncated as the rollout says (`truncated`); its last observation is the true final
  observation from the rollout's `final_obses` (which the Gymnasium recorder always keeps).
  A rollout without `final_obses` does not know it (row t+1 is already the next episode's
  first, as in obs-tower2), so the observation before it is **repeated** instead;
- the still-running episode of each env at the end of the data becomes an episode with
  neither flag set, whose last observation is the rollout's bootstrap row, which is exact.

The dataset's spaces are the env's when given (`observation_space=`, `action_space=`, or
`env=`), and the data is checked against them; otherwise they are inferred from the data
(see [`to_minari`][trajkit.minari.to_minari]). The dataset is written into a hidden
temporary folder of Minari's datasets root and renamed into place when complete, so a
killed export leaves no partial dataset under its id.

**Import** ([`from_minari`][trajkit.minari.from_minari], or one episode at a time
[`iter_minari`][trajkit.minari.iter_minari]) gives one rollout per episode, with
B = 1 and T = n: `obses` are the n + 1 observations, `dones[0] = 1`, and `dones[T] = 1` when
the episode ended (so that GAE does not bootstrap past it). `truncated` and `final_values`
are always given, zeros where nothing was truncated, as the Gymnasium recorder gives them, and
so is `final_obses`: the episode's last observation when it ended (`obses[T]`, then also its
true final observation), empty when it did not. A
truncated episode carries `truncated[T-1] = 1` and `final_values = 0`: there is no critic in
a dataset, so compute `final_values` with yours (on `obses[T]`) before using advantages. A
last step both terminated and truncated counts as terminated, as the recorder counts it.
`model_outs['actions']` has T + 1 rows, the last a copy of the one before (no action is
taken from the final observation). Each episode is checked before its rollout is built (see
[`from_minari`][trajkit.minari.from_minari]).

Examples:
    >>> import os, tempfile
    >>> import trajkit.minari
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=8, num_envs=2, keys={"actions", "critic"})
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     os.environ["MINARI_DATASETS_PATH"] = tmp
    ...     dataset = trajkit.minari.to_minari([r], "trajkit/example-v0")
    ...     episodes = trajkit.minari.from_minari(dataset)
    >>> dataset.total_steps == sum(e.num_steps for e in episodes) == 16
    True
"""

from __future__ import annotations

from trajkit.minari._export import to_minari
from trajkit.minari._import import MinariDatasetError, from_minari, iter_minari

__all__ = ["MinariDatasetError", "from_minari", "iter_minari", "to_minari"]
