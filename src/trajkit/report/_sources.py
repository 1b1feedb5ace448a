"""What a report reads: files and folders, a `Dataset`, Parquet files and Minari datasets.

Every source becomes a stream of rollout files, the items `trajkit validate` works on
(`Found` files, and `FileCheck` verdicts reached while looking), so that one engine profiles
and lints them all. Files and folders (local or fsspec URLs) are discovered lazily, as
`trajkit validate` discovers them; a `Dataset` is its folder, each file also checked against
its pinned spec. A Parquet file (`*.parquet`, read by
[`trajkit.arrow.iter_parquet`][trajkit.arrow.iter_parquet]) and a Minari dataset (a
`minari.MinariDataset`, or `minari:ID` for a local one, read by
[`trajkit.minari.iter_minari`][trajkit.minari.iter_minari]) are read one rollout at a time,
each written as a temporary rollout file as it comes and let go, so that one rollout is in
memory at a time; the files are named on the page by their source (`run.parquet (rollout
3)`). A source that its reader refuses, at once or midway, is one invalid "file".
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from trajkit._io.discovery import Found, discover
from trajkit._io.engine import Item
from trajkit._io.filecheck import FileCheck
from trajkit._io.remote import file_size, is_url
from trajkit._io.writer import save
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec
from trajkit.dataset import Dataset

__all__ = ["MINARI_PREFIX", "Inputs", "Source", "named_files", "open_inputs", "sources"]

MINARI_PREFIX = "minari:"
"""A path `minari:ID` names the local Minari dataset `ID`."""

Source: TypeAlias = "str | os.PathLike[str] | Dataset | Iterable[str | os.PathLike[str]]"
"""What `report` reads: a path (`str` or `os.PathLike`), an iterable of paths, a `Dataset`, or
a `minari.MinariDataset` (which minari leaves untyped)."""


@dataclass
class Inputs:
    """The files a report reads, in order, and how the page names them.

    Attributes:
        parts: Per source, in order: paths to discover (files, folders, URLs), or items
            already known (temporary files of a converted source, or its verdict).
        spec: The spec the files must conform to (a `Dataset`'s), or `None`.
        labels: A temporary file's name on the page, e.g. `run.parquet (rollout 3)`.
        origins: A temporary file's source (the Parquet file, `minari:ID`).
        described: Each source as the page names it.
        folders: The folders named (their files are named relative to a lone one).
        notes: Facts about converted sources: their kind, and what their reader reports
            (a Minari dataset's id, spaces and counts).
    """

    parts: list[str | list[Item]] = field(default_factory=list)
    spec: RolloutSpec | None = None
    labels: dict[str, str] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    described: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)

    def items(self) -> Iterator[Item]:
        """Every file and verdict, in order; folders are listed lazily."""
        for part in self.parts:
            if isinstance(part, str):
                yield from discover([part])
            else:
                yield from part

    def paths(self) -> list[str]:
        """What `trajkit lint` is given: the paths, and the temporary files in their place."""
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
            else:
                out.extend(item.path for item in part if isinstance(item, Found))
        return out

    def label(self, path: str) -> str:
        """How the page names the file `path`: relative to the folder, when one is named.

        Examples:
            >>> inputs = Inputs(parts=["runs"], described=["runs"], folders=["runs"])
            >>> inputs.label("runs/a/b.npz"), inputs.label("other.npz")
            ('a/b.npz', 'other.npz')
        """
        if path in self.labels:
            return self.labels[path]
        if len(self.described) == len(self.folders) == 1:
            root = self.folders[0]
            prefix = (
                root if root.endswith(("/", os.sep)) else root + ("/" if is_url(root) else os.sep)
            )
            if path.startswith(prefix):
                return path[len(prefix) :]
        return path

    def origin(self, path: str) -> str:
        """The file a link to `path` opens: itself, or the source it was converted from."""
        return self.origins.get(path, path)


def sources(source: Source | Any) -> Dataset | list[Any]:
    """`source` as a `Dataset`, or a list of single sources (an iterable is read once).

    Raises:
        TypeError: For a source of another kind.

    Examples:
        >>> sources("runs/"), sources(("a.npz", "b.parquet"))
        (['runs/'], ['a.npz', 'b.parquet'])
    """
    if isinstance(source, Dataset):
        return source
    if isinstance(source, str | os.PathLike) or _is_minari(source):
        return [source]
    if not isinstance(source, Iterable):
        raise TypeError(
            "source must be a path, an iterable of paths, a trajkit.dataset.Dataset or a "
            f"minari.MinariDataset, got {type(source).__name__}"
        )
    return list(source)


def named_files(source: Dataset | list[Any]) -> list[str]:
    """The paths `source` names (an output among them is refused).

    Examples:
        >>> named_files(["a.npz", "minari:x/y-v0"])
        ['a.npz', 'minari:x/y-v0']
    """
    if isinstance(source, Dataset):
        return [source.path]
    return [os.fspath(one) for one in source if isinstance(one, str | os.PathLike)]


def open_inputs(source: Dataset | list[Any], scratch: str) -> Inputs:
    """Resolve `source` into files; converted sources are written into the folder `scratch`.

    Raises:
        TypeError: For a source of another kind.
        ImportError: If a Parquet file or a Minari dataset is named without its extra.
    """
    inputs = Inputs()
    if isinstance(source, Dataset):
        inputs.spec = source.spec
        inputs.parts.append(source.path)
        inputs.described.append(f"dataset {source.path}")
        inputs.folders.append(source.path)
        return inputs
    for number, one in enumerate(source):
        _add(inputs, one, scratch, number)
    return inputs


def _add(inputs: Inputs, one: Any, scratch: str, number: int) -> None:
    if _is_minari(one) or (isinstance(one, str) and one.startswith(MINARI_PREFIX)):
        _add_minari(inputs, one, scratch, number)
        return
    if not isinstance(one, str | os.PathLike):
        raise TypeError(f"a source path must be a str or os.PathLike, got {type(one).__name__}")
    path = os.fspath(one)
    if path.endswith(".parquet") and (is_url(path) or not os.path.isdir(path)):
        _add_parquet(inputs, path, scratch, number)
    else:
        inputs.parts.append(path)
        inputs.described.append(path)
        if is_url(path) or os.path.isdir(path):
            inputs.folders.append(path)


def _is_minari(value: Any) -> bool:
    minari = sys.modules.get("minari")  # a MinariDataset exists only once minari is imported
    return minari is not None and isinstance(value, minari.MinariDataset)


def _add_parquet(inputs: Inputs, path: str, scratch: str, number: int) -> None:
    from trajkit.arrow import iter_parquet  # imports pyarrow

    inputs.described.append(path)
    refused = "not readable as a trajkit Parquet file"
    count = _spill(inputs, iter_parquet(path), path, "rollout", scratch, number, refused)
    if count is not None:
        inputs.notes.append({"kind": "Parquet file", "source": path, "rollouts": count})


def _add_minari(inputs: Inputs, dataset: Any, scratch: str, number: int) -> None:
    from trajkit.minari import iter_minari  # imports minari

    if isinstance(dataset, str):
        dataset = dataset[len(MINARI_PREFIX) :]
    name = dataset if isinstance(dataset, str) else str(getattr(dataset, "id", "?"))
    where = f"{MINARI_PREFIX}{name}"
    inputs.described.append(where)
    refused = "not readable as a Minari dataset"
    try:
        episodes = iter_minari(dataset)  # loads a dataset named by id, or refuses it
        if isinstance(dataset, str):
            import minari

            dataset = minari.load_dataset(dataset)  # for what it says of itself
    except (OSError, ValueError) as exc:
        inputs.parts.append([FileCheck(where, (f"{refused}: {exc}",))])
        return
    if _spill(inputs, episodes, where, "episode", scratch, number, refused) is not None:
        inputs.notes.append({"kind": "Minari dataset", "source": where, **_minari_facts(dataset)})


def _minari_facts(dataset: Any) -> dict[str, Any]:
    """What a Minari dataset says of itself: id, counts, env and spaces."""
    spec = getattr(dataset, "spec", None)
    env_spec = getattr(spec, "env_spec", None)
    return {
        "dataset id": getattr(spec, "dataset_id", None),
        "episodes": getattr(spec, "total_episodes", None),
        "steps": getattr(spec, "total_steps", None),
        "env": getattr(env_spec, "id", None),
        "max episode steps": getattr(env_spec, "max_episode_steps", None),
        "observation space": str(getattr(dataset, "observation_space", "")),
        "action space": str(getattr(dataset, "action_space", "")),
        "algorithm": getattr(spec, "algorithm_name", None),
        "author": getattr(spec, "author", None),
    }


def _spill(
    inputs: Inputs,
    rollouts: Iterator[Rollout],
    origin: str,
    unit: str,
    scratch: str,
    number: int,
    refused: str,
) -> int | None:
    """Write each rollout as a temporary file as it comes, and let it go; their items, in order.

    So one rollout is in memory at a time, whatever the size of the source. The items go
    into `inputs`, and their count is returned. When the reader refuses the source (at once,
    or midway), the files already written are removed and the source is one invalid "file",
    its problem `refused` and the reader's reason; then `None` is returned. A temporary file
    that cannot be written is an error of the report (`OSError`), not of the source.
    """
    items: list[Item] = []
    while True:
        try:
            rollout = next(rollouts, None)
        except (OSError, ValueError) as exc:
            for item in items:
                del inputs.labels[item.path], inputs.origins[item.path]
                with contextlib.suppress(OSError):
                    os.remove(item.path)
            inputs.parts.append([FileCheck(origin, (f"{refused}: {exc}",))])
            return None
        if rollout is None:
            inputs.parts.append(items)
            return len(items)
        path = os.path.join(scratch, f"{number:04d}-{unit}-{len(items):06d}.npz")
        save(rollout, path, max_bytes=None)
        del rollout  # let go before the next one is read
        inputs.labels[path] = f"{origin} ({unit} {len(items)})"
        inputs.origins[path] = origin
        items.append(Found(path, file_size(path)))
