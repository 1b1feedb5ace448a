"""Datasets of recorded rollouts: a folder of rollout files that pins one spec.

A dataset is a folder (or an fsspec URL such as `s3://bucket/runs`, with `trajkit[cloud]`)
holding `spec.json`, a [`RolloutSpec`][trajkit.RolloutSpec] as JSON, and any number of
rollout files (`*.npz`, found recursively, hidden ones skipped). Every file must conform to
the spec: iterating, computing statistics and sampling minibatches check each file as it is
loaded, and refuse one that does not with a [`RolloutFileError`][trajkit.RolloutFileError].

Everything streams file by file, so a dataset may be far larger than memory:
[`Dataset.stats`][trajkit.dataset.Dataset.stats] merges per-file statistics (optionally in
several processes), and [`Dataset.minibatches`][trajkit.dataset.Dataset.minibatches] keeps a
few files in a shuffle buffer. The same per-file checks as `trajkit validate` are here as
[`check_file`][trajkit.dataset.check_file] and [`validate_files`][trajkit.dataset.validate_files].

Examples:
    >>> import tempfile
    >>> from trajkit.dataset import Dataset
    >>> from trajkit.testing import example_rollout
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     ds = Dataset.write(tmp, [example_rollout(num_steps=8, seed=s) for s in range(3)])
    ...     stats = Dataset.open(tmp).stats()
    >>> len(ds), stats.files, stats.steps
    (3, 3, 48)
"""

from __future__ import annotations

from trajkit._io.filecheck import FileCheck, check_file
from trajkit._io.stats import DatasetStats, Moments
from trajkit._io.validate import validate_files
from trajkit.dataset._dataset import Dataset
from trajkit.dataset._folder import SPEC_FILE

# Not in `__all__`: the reader `trajkit validate --spec` shares with `Dataset.open`.
from trajkit.dataset._folder import read_spec_file as read_spec_file

__all__ = [
    "SPEC_FILE",
    "Dataset",
    "DatasetStats",
    "FileCheck",
    "Moments",
    "check_file",
    "validate_files",
]
