"""`read_rollouts`: a Ray Data dataset of one row per rollout file: its layout and episodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajkit._io import raytasks
from trajkit._io.filecheck import matching_spec
from trajkit._io.files import DEFAULT_MAX_BYTES, load
from trajkit._io.remote import local_copy, mappable, naming
from trajkit._io.stats import DatasetStats
from trajkit._models.spec import RolloutSpec
from trajkit.ray._listing import Paths, list_files, paths_dataset

if TYPE_CHECKING:
    import ray

__all__ = ["read_rollouts"]


def _row(row: dict[str, Any], *, spec: RolloutSpec | None, max_bytes: int | None) -> dict[str, Any]:
    """One file as a row of `read_rollouts`: its layout and episode statistics."""
    path = str(row["path"])
    with local_copy(path, max_bytes) as local, naming(path):
        rollout = matching_spec(load(local, mmap=mappable(path), max_bytes=max_bytes), spec, path)
        file = DatasetStats.of(rollout)
        episodes = rollout.episode_stats()
        return {
            "file": int(row["file"]),
            "path": path,
            "num_steps": rollout.num_steps,
            "batch_size": rollout.batch_size,
            "spec": RolloutSpec.from_rollout(rollout).model_dump_json(),
            "steps": file.steps,
            "terminations": file.terminations,
            "truncations": file.truncations,
            "returns": episodes.returns.tolist(),
            "lengths": episodes.lengths.tolist(),
        }


def read_rollouts(
    paths: Paths, *, spec: RolloutSpec | None = None, max_bytes: int | None = DEFAULT_MAX_BYTES
) -> ray.data.Dataset:
    """A Ray Data dataset with one row per rollout file: its layout and its episodes.

    The files are listed on the driver (folders searched for `*.npz`, sorted) and each is
    loaded and checked in a Ray Data task, memory-mapped where it is local. A row holds
    `file` (the file's index in that listing, as in the rows of
    [`read_steps`][trajkit.ray.read_steps]), `path`, `num_steps` (T), `batch_size` (B),
    `spec` (the file's [`RolloutSpec`][trajkit.RolloutSpec] as JSON), `steps` (T·B),
    `terminations`, `truncations`, and `returns` and `lengths` of the complete episodes
    (lists). For the steps themselves, see [`read_steps`][trajkit.ray.read_steps]; for
    whole arrays, [`read_arrays`][trajkit.ray.read_arrays]. A refused file (or one that
    breaks `spec`) fails the dataset's execution with its `RolloutFileError`.

    Args:
        paths: Files and folders (local paths or fsspec URLs readable from every node).
        spec: Also require conformance to this spec.
        max_bytes: The size limit, as for `trajkit.load`; `None` for none.

    Returns:
        A lazy `ray.data.Dataset` (nothing is read until it is consumed).

    Raises:
        RolloutFileError: If a path is missing or a folder holds no `*.npz` file.

    Examples:
        >>> import trajkit.ray
        >>> ds = trajkit.ray.read_rollouts("runs/")  # doctest: +SKIP
        >>> ds.sum("steps"), ds.columns()[:3]  # doctest: +SKIP
        (40960, ['file', 'path', 'num_steps'])
    """
    files = list_files(paths)
    rows = paths_dataset(raytasks.ray_module(), files)
    return rows.map(_row, fn_kwargs={"spec": spec, "max_bytes": max_bytes})  # type: ignore[no-any-return]
