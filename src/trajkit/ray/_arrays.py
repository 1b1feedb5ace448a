"""`read_arrays`: a Ray Data dataset of one row per rollout file, holding its whole arrays."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from trajkit._base.types import AnyArray
from trajkit._core import tree as _tree
from trajkit._core.gae import check_discount
from trajkit._io import raytasks
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._io.remote import local_copy, mappable, naming
from trajkit._models.errors import MissingModelOutputError
from trajkit._models.spec import RolloutSpec
from trajkit.ray._listing import Layout, Paths, conformed, layout_of, list_files, paths_dataset

if TYPE_CHECKING:
    import ray

__all__ = ["read_arrays"]


def _arrays_batch(
    batch: dict[str, AnyArray],
    *,
    layout: Layout,
    discount: tuple[float, float],
    max_bytes: int | None,
) -> Iterator[dict[str, AnyArray]]:
    """The Ray Data function of `read_arrays`: a batch of paths in, a row per file out."""
    for file, path in zip(batch["file"].tolist(), map(str, batch["path"]), strict=True):
        with local_copy(path, max_bytes) as local, naming(path):
            rollout = load(local, mmap=mappable(path), max_bytes=max_bytes)
            rollout = conformed(rollout, layout, path)
            arrays = _tree.flatten_fields(rollout.training_arrays(*discount))
            row: dict[str, AnyArray] = {
                "file": np.array([file], dtype=np.int64),
                "path": np.array([path], dtype=object),
                "num_steps": np.array([rollout.num_steps]),
                "batch_size": np.array([rollout.batch_size]),
            }
            for name, array in arrays.items():
                row[name] = np.array(array)[None]  # a copy: the mapped file closes after
            yield row


def read_arrays(
    paths: Paths,
    *,
    gamma: float,
    lam: float,
    spec: RolloutSpec | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
) -> ray.data.Dataset:
    """A Ray Data dataset with one row per rollout file: its whole `[T, B, ...]` arrays.

    For work that needs a rollout at once (recurrent minibatches, your own advantage
    estimate) rather than its steps ([`read_steps`][trajkit.ray.read_steps]). A row holds
    `file` (its index in the sorted listing, as in [`read_steps`][trajkit.ray.read_steps]),
    `path`, `num_steps` (T), `batch_size` (B) and every array of
    [`Rollout.training_arrays`][trajkit.Rollout.training_arrays]`(gamma, lam)`: `obses`,
    `states`, `dones`, `rews`, `advantages` and `returns`, and the model outputs with one
    value per env, each cut to `[T, B, ...]`. Advantages need the critic's values, so the
    files must have `model_outs['critic']`: as [`read_steps`][trajkit.ray.read_steps] with
    `gamma` and `lam`, files without one are refused at the call (read them with
    `read_steps` and no `gamma`, `lam` for rows without advantages). Leaves of nested
    observations and states are columns named by their path, `obses['image']` (as
    `trajkit.gather` names them). Files are loaded in Ray Data tasks, memory-mapped where
    local; every file must have the layout of the first (or conform to `spec`).

    Args:
        paths: Files and folders (local paths or fsspec URLs readable from every node).
        gamma: The discount of `advantages` and `returns`, in [0, 1].
        lam: The GAE λ, in [0, 1].
        spec: Hold every file to this spec; `None` for the layout of the first file.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.

    Returns:
        A lazy `ray.data.Dataset`.

    Raises:
        RolloutFileError: If a path is missing, a folder holds no `*.npz` file, or the first
            file's metadata cannot be read.
        ValueError: If `gamma` or `lam` is not a finite number in [0, 1].
        MissingModelOutputError: If the files (the first file, or `spec`) have no
            `model_outs['critic']` (`trajkit.MissingModelOutputError`, a `ValueError`).

    Examples:
        >>> import trajkit.ray
        >>> rows = trajkit.ray.read_arrays("runs/", gamma=0.99, lam=0.95)  # doctest: +SKIP
        >>> row = rows.take(1)[0]  # doctest: +SKIP
        >>> row["obses"].shape, row["advantages"].shape  # doctest: +SKIP
        ((128, 8, 4), (128, 8))
    """
    discount = check_discount(gamma, lam)
    files = list_files(paths)
    layout = layout_of(files, spec, max_bytes)
    if "critic" not in layout.spec.model_outputs:
        raise MissingModelOutputError(
            "read_arrays()",
            "critic",
            layout.spec.model_outputs,
            owner=f"the first file, {layout.origin}," if layout.origin else "the spec",
            purpose="to compute advantages and returns",
            hint="read rows without advantages with read_steps() and no gamma and lam",
        )
    work = partial(_arrays_batch, layout=layout, discount=discount, max_bytes=max_bytes)
    return paths_dataset(raytasks.ray_module(), files).map_batches(  # type: ignore[no-any-return]
        work, batch_format="numpy", batch_size=1
    )
