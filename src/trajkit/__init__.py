"""trajkit: typed, validated reinforcement-learning rollouts.

The public API, by layer (each layer imports only the ones above it):

- **Base**: array aliases and errors: `RolloutFileError`.
- **Core** (pure NumPy): `gae`, `lambda_returns`, `normalize_advantages`, `gae_backend`,
  `episode_stats`, `EpisodeStats`; `MinibatchPlan`, the parameters every minibatch function
  takes; the minibatch engine's public pair for your own arrays,
  `minibatch_indices` + `gather` (and `sequence_minibatch_indices` + `gather_sequences` for
  recurrent policies); for offline RL, `episode_ids` and `n_step_returns`.
  `index_stream` and `index_batches` are deprecated (they warn when used, and are not in
  `__all__`): use `Rollout.entries` and `Rollout.batches`.
- **Models** (pydantic): `Rollout`, `ModelOutputs`, `StepOutputs`, `CheckedArray`, `FIELD_DIMS`,
  `MODEL_OUTPUT_DIMS`, `RolloutFields`, `AdvantageNormalization`, `RolloutSpec`, `OutputSpec`,
  `RolloutValidationError`, `MissingModelOutputError`; transitions for offline RL and
  imitation learning, no critic needed: `transitions`, `transition_minibatches`,
  `TRANSITION_KEYS`.
- **Files**: `save`, `load`, `read_metadata`, `RolloutFileMetadata`, `DEFAULT_MAX_BYTES`,
  `FORMAT_NAME`, `FORMAT_VERSION`.

`import trajkit` is cheap: each name above is imported from its module when it is first used
(`trajkit.Rollout` loads NumPy, pydantic and the models; `trajkit.__version__` loads nothing).

Imported on their own (`import trajkit` loads none of them, nor their extras):

- `trajkit.testing`: an example rollout, and Hypothesis strategies (`trajkit[testing]`).
- `trajkit.dataset`: a folder of rollout files with a pinned spec: append, validate,
  statistics, minibatches across files.
- `trajkit.lint`: checks of what a recording holds, beyond what validation refuses.
- `trajkit.torch`: training tensors and minibatches on your device (`trajkit[torch]`).
- `trajkit.gym`: the Gymnasium recorder (`trajkit[gym]`).
- `trajkit.arrow`: Arrow tables and Parquet files of steps (`trajkit[arrow]`).
- `trajkit.minari`: Minari datasets, both ways (`trajkit[minari]`).
- `trajkit.ray`: Ray Data datasets of files, steps and arrays (`trajkit[ray]`).
- `trajkit.plot`: figures of a rollout (`trajkit[plot]`).
- `trajkit.report`: one HTML page of a dataset: schema, counts, findings, plots, episodes.
- `trajkit.sb3`: stable-baselines3's rollout buffer as a `Rollout`, and a callback that
  validates every rollout of `learn()` (`trajkit[sb3]`).
- `trajkit.cli`: the `trajkit` command (`validate`, `info`, ...).

Examples:
    >>> import trajkit
    >>> from trajkit.testing import example_rollout
    >>> r = example_rollout(num_steps=16, num_envs=4)
    >>> trajkit.gae(r.rews, r.value_predictions(), r.dones, 0.99, 0.95).shape
    (16, 4)
"""

import importlib

from trajkit._base.version import __version__

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing (10 ms at start-up)
if TYPE_CHECKING:  # what type checkers and IDEs see; at run time, `__getattr__` below
    from trajkit._base.errors import RolloutFileError
    from trajkit._core.episodes import EpisodeStats, episode_stats
    from trajkit._core.gae import gae, gae_backend, lambda_returns, normalize_advantages
    from trajkit._core.indices import (
        gather,
        gather_sequences,
        minibatch_indices,
        sequence_minibatch_indices,
    )
    from trajkit._core.indices import index_batches as index_batches  # deprecated
    from trajkit._core.indices import index_stream as index_stream  # deprecated
    from trajkit._core.minibatch import MinibatchPlan
    from trajkit._core.transitions import episode_ids, n_step_returns
    from trajkit._io.files import DEFAULT_MAX_BYTES, load, read_metadata, save
    from trajkit._io.metadata import FORMAT_NAME, FORMAT_VERSION, RolloutFileMetadata
    from trajkit._models.checked import CheckedArray
    from trajkit._models.errors import MissingModelOutputError, RolloutValidationError
    from trajkit._models.model_outputs import ModelOutputs, StepOutputs
    from trajkit._models.rollout import (
        FIELD_DIMS,
        MODEL_OUTPUT_DIMS,
        AdvantageNormalization,
        Rollout,
        RolloutFields,
    )
    from trajkit._models.spec import OutputSpec, RolloutSpec
    from trajkit._models.transitions import TRANSITION_KEYS, transition_minibatches, transitions

__all__ = [
    "AdvantageNormalization",
    "CheckedArray",
    "DEFAULT_MAX_BYTES",
    "EpisodeStats",
    "FIELD_DIMS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MODEL_OUTPUT_DIMS",
    "MinibatchPlan",
    "MissingModelOutputError",
    "ModelOutputs",
    "OutputSpec",
    "Rollout",
    "RolloutFields",
    "RolloutFileError",
    "RolloutFileMetadata",
    "RolloutSpec",
    "RolloutValidationError",
    "StepOutputs",
    "TRANSITION_KEYS",
    "__version__",
    "episode_ids",
    "episode_stats",
    "gae",
    "gae_backend",
    "gather",
    "gather_sequences",
    "lambda_returns",
    "load",
    "minibatch_indices",
    "n_step_returns",
    "normalize_advantages",
    "read_metadata",
    "save",
    "sequence_minibatch_indices",
    "transition_minibatches",
    "transitions",
]

_MODULES = {
    "trajkit._base.errors": ("RolloutFileError",),
    "trajkit._core.episodes": ("EpisodeStats", "episode_stats"),
    "trajkit._core.gae": ("gae", "gae_backend", "lambda_returns", "normalize_advantages"),
    "trajkit._core.indices": (
        "gather",
        "gather_sequences",
        "minibatch_indices",
        "sequence_minibatch_indices",
    ),
    "trajkit._core.minibatch": ("MinibatchPlan",),
    "trajkit._core.transitions": ("episode_ids", "n_step_returns"),
    "trajkit._io.files": ("DEFAULT_MAX_BYTES", "load", "read_metadata", "save"),
    "trajkit._io.metadata": ("FORMAT_NAME", "FORMAT_VERSION", "RolloutFileMetadata"),
    "trajkit._models.checked": ("CheckedArray",),
    "trajkit._models.errors": ("MissingModelOutputError", "RolloutValidationError"),
    "trajkit._models.model_outputs": ("ModelOutputs", "StepOutputs"),
    "trajkit._models.rollout": (
        "FIELD_DIMS",
        "MODEL_OUTPUT_DIMS",
        "AdvantageNormalization",
        "Rollout",
        "RolloutFields",
    ),
    "trajkit._models.spec": ("OutputSpec", "RolloutSpec"),
    "trajkit._models.transitions": ("TRANSITION_KEYS", "transition_minibatches", "transitions"),
}
"""Where each public name lives: it is imported from there when first used."""

_LAZY = {name: module for module, names in _MODULES.items() for name in names}

_DEPRECATED = {
    # name: (its module, what to use instead)
    "index_batches": (
        "trajkit._core.indices",
        "Rollout.batches(batch_size, count, seed=...) for obs-tower2's stream, or "
        "trajkit.minibatch_indices for index arrays, epoch by epoch",
    ),
    "index_stream": (
        "trajkit._core.indices",
        "Rollout.entries(seed=...) for obs-tower2's stream, or trajkit.minibatch_indices for "
        "index arrays, epoch by epoch",
    ),
}
"""Names kept for a while, outside `__all__`: each use warns through `_base.deprecation`."""

if not TYPE_CHECKING:  # hidden from type checkers, which would accept any name

    def __getattr__(name: str) -> object:
        """A public name, imported from its module on first use (PEP 562); or a deprecated one."""
        module = _LAZY.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
            globals()[name] = value  # later uses find it without calling this
            return value
        if name in _DEPRECATED:
            from trajkit._base.deprecation import deprecated

            module, instead = _DEPRECATED[name]
            deprecated(f"trajkit.{name}", instead)  # each use warns: it is not cached
            return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module 'trajkit' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LAZY})


del TYPE_CHECKING
