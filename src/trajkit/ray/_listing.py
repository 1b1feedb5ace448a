"""The files a Ray Data reader reads: listed on the driver, held to one layout, as paths rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from trajkit._base.errors import RolloutFileError
from trajkit._io.discovery import discover
from trajkit._io.filecheck import FileCheck, matching_spec
from trajkit._io.remote import metadata_and_size
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec

__all__ = ["Layout", "Paths", "conformed", "layout_of", "list_files", "paths_dataset"]


Paths = str | Sequence[str]


def list_files(paths: Paths) -> list[str]:
    """The rollout files under `paths`, listed on the driver; a missing path raises."""
    files: list[str] = []
    for item in discover(paths):
        if isinstance(item, FileCheck):
            raise RolloutFileError(item.problems[0], path=item.path)
        files.append(item.path)
    return files


class Layout(NamedTuple):
    """What every file of a dataset must look like, and how to say so when one does not."""

    spec: RolloutSpec
    origin: str | None  # the file the spec was read from; None for the caller's spec


def layout_of(files: list[str], spec: RolloutSpec | None, max_bytes: int | None) -> Layout:
    """The caller's spec, or the spec in the first file's metadata (read on the driver)."""
    if spec is not None:
        return Layout(spec, None)
    metadata, _ = metadata_and_size(files[0], max_bytes=max_bytes)
    return Layout(metadata.spec, files[0])


def conformed(rollout: Rollout, layout: Layout, path: str) -> Rollout:
    if layout.origin is None:
        return matching_spec(rollout, layout.spec, path)
    problems = layout.spec.check(rollout)
    if problems:
        raise RolloutFileError(
            f"its layout differs from that of the first file, {layout.origin} (one dataset "
            f"has one set of columns; pass spec= to name the layout): {'; '.join(problems)}",
            path=path,
        )
    return rollout


def paths_dataset(ray: Any, files: list[str]) -> Any:
    """A Ray dataset of the paths and their indices, one block per file (up to 200 blocks)."""
    return ray.data.from_items(
        [{"file": index, "path": path} for index, path in enumerate(files)],
        override_num_blocks=max(1, min(len(files), 200)),
    )
