"""The `Dataset` class: a folder of rollout files that pins one spec (see `trajkit.dataset`)."""

from __future__ import annotations

import bisect
import contextlib
import os
import secrets
import tempfile
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any, Literal

from trajkit._base.deprecation import deprecated
from trajkit._base.errors import RolloutFileError
from trajkit._base.types import ArrayTree, Seed
from trajkit._core.gae import check_discount
from trajkit._core.minibatch import ArraysTable, MinibatchPlan, sample
from trajkit._io.atomic import TEMP_PREFIX, TEMP_SUFFIX
from trajkit._io.discovery import Found, NaturalKey, discover, walk_key
from trajkit._io.engine import checked_jobs, cpu_count, run_ordered
from trajkit._io.filecheck import FileCheck, matching_spec
from trajkit._io.files import DEFAULT_MAX_BYTES, save
from trajkit._io.remote import copy_out, filesystem, is_url, join_url, load_any, metadata_and_size
from trajkit._io.stats import DatasetStats, stats_chunk
from trajkit._io.validate import validate_files
from trajkit._models.rollout import AdvantageNormalization, Rollout, missing_critic
from trajkit._models.rollout_training import ppo_table
from trajkit._models.spec import RolloutSpec
from trajkit._models.transitions import transition_minibatches
from trajkit.dataset._folder import (
    SPEC_FILE,
    claim_name,
    file_name,
    file_number,
    highest_number,
    parent,
    read_spec,
    write_spec,
)


class Dataset:
    """A folder (or fsspec URL) of rollout files that all conform to one pinned spec.

    Make one with [`create`][trajkit.dataset.Dataset.create] or
    [`write`][trajkit.dataset.Dataset.write], open one with
    [`open`][trajkit.dataset.Dataset.open]. Opening reads `spec.json` only; the files are
    listed the first time they are needed and loaded one at a time, memory-mapped where
    they are local (a remote file is read into memory).

    Args:
        path: The folder or URL.
        spec: The spec every file must conform to.
        max_bytes: The size limit for each file, as for `trajkit.load`; `None` for none.

    Examples:
        >>> import tempfile
        >>> from trajkit.dataset import Dataset
        >>> from trajkit.testing import example_rollout
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     rollouts = [example_rollout(num_steps=4), example_rollout(num_steps=6)]
        ...     [r.num_steps for r in Dataset.write(tmp, rollouts)]
        [4, 6]
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        spec: RolloutSpec,
        *,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> None:
        self._path = os.fspath(path)
        self._spec = spec
        self._max_bytes = max_bytes
        self._found: list[Found] | None = None
        self._next = -1  # the number of the next file `append` writes, once known

    # ------------------------------------------------------------------ making and opening

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        spec: RolloutSpec,
        *,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> Dataset:
        """Make the folder (if needed) and pin `spec` in its `spec.json`.

        Creating a dataset that already pins the same spec opens it. `spec.json` is claimed
        atomically: of processes creating one folder at once, one writes it and the others
        read it (and refuse a different spec).

        Args:
            path: The folder or URL.
            spec: The spec every file must conform to.
            max_bytes: The size limit for each file, as for `trajkit.load` (4 GiB); `None`
                for none.

        Returns:
            The dataset.

        Raises:
            ValueError: If the folder already pins a different spec.
            RolloutFileError: If its `spec.json` is not a valid spec.

        Examples:
            >>> import tempfile
            >>> from trajkit import RolloutSpec
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> spec = RolloutSpec.from_rollout(example_rollout())
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.create(tmp, spec)
            ...     Dataset.open(tmp).spec == spec, len(ds)
            (True, 0)
        """
        root = os.fspath(path)
        try:
            pinned = read_spec(root)
        except FileNotFoundError:
            pinned = write_spec(root, spec)
        if pinned != spec:
            raise ValueError(
                f"{root} already pins a different spec in {SPEC_FILE}; open it with "
                "Dataset.open, or use another folder"
            )
        return cls(root, spec, max_bytes=max_bytes)

    @classmethod
    def write(
        cls,
        path: str | os.PathLike[str],
        rollouts: Iterable[Rollout],
        *,
        spec: RolloutSpec | None = None,
        compress: bool = False,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> Dataset:
        """Save rollouts as a dataset: pin a spec, then append each rollout as a file.

        Args:
            path: The folder or URL (created if needed; existing files are kept).
            rollouts: The rollouts, saved in order as `rollout-000000.npz`, ...
            spec: The spec to pin; by default that of the first rollout.
            compress: Deflate the arrays (see [`trajkit.save`][trajkit.save]).
            max_bytes: The size limit for each file, as for `trajkit.load` (4 GiB); `None`
                for none.

        Returns:
            The dataset.

        Raises:
            ValueError: If a rollout does not conform to the spec (nothing more is written),
                or the folder pins a different spec, or there is no rollout and no spec.

        Examples:
            >>> import os, tempfile
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.write(tmp, [example_rollout(), example_rollout()])
            ...     sorted(os.listdir(tmp))
            ['rollout-000000.npz', 'rollout-000001.npz', 'spec.json']
        """
        it = iter(rollouts)
        first = next(it, None)
        if spec is None:
            if first is None:
                raise ValueError("Dataset.write() needs a spec when there are no rollouts")
            spec = RolloutSpec.from_rollout(first)
        dataset = cls.create(path, spec, max_bytes=max_bytes)
        if first is not None:
            for index, rollout in enumerate(_chain(first, it)):
                dataset._append(rollout, compress, f"rollout {index}")
        return dataset

    @classmethod
    def adopt(
        cls,
        path: str | os.PathLike[str],
        *,
        spec: RolloutSpec | None = None,
        quick: bool = False,
        jobs: int | None = 1,
        max_bytes: int | None = DEFAULT_MAX_BYTES,
    ) -> Dataset:
        """Make a dataset of a folder of recordings already on disk, without copying them.

        The folder's rollout files (`*.npz`, found recursively, hidden ones skipped, as
        `files` lists them) are validated against `spec`, by default the spec of the first
        file (from its metadata); only when every file passes is the spec pinned in
        `spec.json`. A folder that pins a spec already is checked against it. Files keep
        their names and places: later
        [`append`][trajkit.dataset.Dataset.append]s number theirs after the highest
        `rollout-N.npz` at the top of the folder. Adopting a folder that already pins the
        same spec (or without `spec=`) checks its files and opens it.

        Args:
            path: The folder or URL.
            spec: The spec to pin; by default that of the first file.
            quick: Check only each file's ZIP directory and metadata (conformance to the
                spec included), not its arrays.
            jobs: Worker processes for the checks; `None` for every core.
            max_bytes: The size limit for each file, as for `trajkit.load`; `None` for none.

        Returns:
            The dataset.

        Raises:
            FileNotFoundError: If the folder does not exist.
            ValueError: If it holds no rollout file and no `spec` is given, or it already
                pins a different spec.
            RolloutFileError: Naming the first file refused (and how many were), when a
                file is invalid or does not conform to the spec; nothing is written then.

        Examples:
            >>> import os, tempfile
            >>> import trajkit
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     for name in ("run-a.npz", "run-b.npz"):  # what a recorder left behind
            ...         trajkit.save(example_rollout(), os.path.join(tmp, name))
            ...     ds = Dataset.adopt(tmp)
            ...     names = sorted(os.listdir(tmp))
            ...     opened = len(Dataset.open(tmp))
            >>> names, opened
            (['run-a.npz', 'run-b.npz', 'spec.json'], 2)
        """
        root = os.fspath(path)
        if not is_url(root) and not os.path.isdir(root):
            raise FileNotFoundError(f"{root}: no such folder to adopt")
        files = [found.path for found in _list(root)]
        if spec is None:
            with contextlib.suppress(FileNotFoundError):
                spec = read_spec(root)  # adopted before: check the files against its spec
        if spec is None:
            if not files:
                raise ValueError(
                    f"{root} holds no rollout files (*.npz) to take a spec from: pass spec=, "
                    "or use Dataset.create"
                )
            spec = metadata_and_size(files[0], max_bytes=max_bytes)[0].spec
        checks = validate_files(files, spec=spec, quick=quick, max_bytes=max_bytes, jobs=jobs)
        refused = [check for check in checks if not check.ok]
        if refused:
            more = f" ({len(refused)} of {len(files)} files refused)" if len(refused) > 1 else ""
            raise RolloutFileError(
                f"{'; '.join(refused[0].problems)}{more}: {root} was not adopted, no "
                f"{SPEC_FILE} written",
                path=refused[0].path,
            )
        return cls.create(root, spec, max_bytes=max_bytes)

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, max_bytes: int | None = DEFAULT_MAX_BYTES
    ) -> Dataset:
        """Open a dataset: read its `spec.json` (the files are listed when first needed).

        Args:
            path: The folder or URL.
            max_bytes: The size limit for each file, as for `trajkit.load` (4 GiB); `None`
                for none.

        Returns:
            The dataset.

        Raises:
            FileNotFoundError: If there is no `spec.json` (not a dataset).
            RolloutFileError: If `spec.json` is not a regular file (a folder, a FIFO, ...) or
                not a valid spec.

        Examples:
            >>> import tempfile
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     _ = Dataset.write(tmp, [example_rollout()])
            ...     ds = Dataset.open(tmp)
            ...     ds.spec.obs_shape, len(ds)
            ((4,), 1)
        """
        root = os.fspath(path)
        return cls(root, read_spec(root), max_bytes=max_bytes)

    # -------------------------------------------------------------------------- contents

    @property
    def path(self) -> str:
        """The folder or URL.

        Examples:
            >>> from trajkit import RolloutSpec
            >>> from trajkit.testing import example_rollout
            >>> Dataset("runs", RolloutSpec.from_rollout(example_rollout())).path
            'runs'
        """
        return self._path

    @property
    def spec(self) -> RolloutSpec:
        """The spec that every file conforms to.

        Examples:
            >>> from trajkit import RolloutSpec
            >>> from trajkit.testing import example_rollout
            >>> Dataset("runs", RolloutSpec.from_rollout(example_rollout())).spec.obs_dtype
            'float32'
        """
        return self._spec

    @property
    def files(self) -> tuple[str, ...]:
        """The rollout files, sorted: `*.npz` under the folder, hidden ones skipped.

        A folder's files come before its subfolders, and names are compared with their
        numbers as numbers, so that `rollout-1000000.npz` follows `rollout-999999.npz`.
        Listed once, the first time they are needed (and kept up to date by `append`).

        Raises:
            OSError: If the folder, or a folder inside it, cannot be read.

        Examples:
            >>> import os, tempfile
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.write(tmp, [example_rollout()])
            ...     [os.path.basename(f) for f in ds.files]
            ['rollout-000000.npz']
        """
        return tuple(found.path for found in self._listing())

    def _listing(self) -> list[Found]:
        if self._found is None:
            self._found = _list(self._path)
        return self._found

    def __len__(self) -> int:
        return len(self._listing())

    def __repr__(self) -> str:
        files = "?" if self._found is None else str(len(self._found))
        return f"Dataset({self._path!r}, files={files})"

    def __getitem__(self, index: int) -> Rollout:
        """The rollout of file `index` (in `files` order), checked against the spec.

        Examples:
            >>> import tempfile
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.write(tmp, [example_rollout(num_steps=4)])
            ...     ds[0].num_steps
            4
        """
        return self.load(self.files[index])

    def __iter__(self) -> Iterator[Rollout]:
        """Each file's rollout in turn, memory-mapped where local, checked against the spec.

        Raises:
            RolloutFileError: When a file is refused or does not conform to the spec.
        """
        for path in self.files:
            yield self.load(path)

    def load(self, path: str) -> Rollout:
        """Load one file of the dataset (or any file), and check it against the spec.

        Args:
            path: The file, as listed in `files`.

        Returns:
            The rollout, memory-mapped when the file is local.

        Raises:
            RolloutFileError: If the file is refused or does not conform to the spec.

        Examples:
            >>> import tempfile
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.write(tmp, [example_rollout()])
            ...     ds.load(ds.files[0]).obses.flags.writeable
            False
        """
        rollout = load_any(path, mmap=True, max_bytes=self._max_bytes)
        return matching_spec(rollout, self._spec, path)

    def append(self, rollout: Rollout, *, compress: bool = False) -> str:
        """Save `rollout` as the dataset's next file, `rollout-NNNNNN.npz` at the top.

        Safe with other processes (on other machines too) appending to the same folder: the
        file is written whole under a hidden temporary name, then given the first free
        number with a hard link, which fails if another writer took that name first (then
        the next number is tried). Where the file system has no hard links, the name is
        claimed by creating it exclusively (`O_EXCL`) and the file moved over it. Numbers
        have at least six digits and grow past 999999 (`files` sorts them as numbers). A URL
        dataset (object stores have no exclusive create) takes the first number not listed:
        give it one writer at a time.

        Args:
            rollout: A rollout that conforms to the spec.
            compress: Deflate the arrays (see [`trajkit.save`][trajkit.save]).

        Returns:
            The path (or URL) of the new file.

        Raises:
            ValueError: If the rollout does not conform to the spec (nothing is written).
            OSError: If the file cannot be written (no temporary file is left behind).

        Examples:
            >>> import os, tempfile
            >>> from trajkit import RolloutSpec
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> r = example_rollout()
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.create(tmp, RolloutSpec.from_rollout(r))
            ...     os.path.basename(ds.append(r)), len(ds)
            ('rollout-000000.npz', 1)
        """
        return self._append(rollout, compress, "the rollout")

    def _append(self, rollout: Rollout, compress: bool, label: str) -> str:
        rollout.revalidate()  # ways out since construction: nothing is written that fails
        problems = self._spec.check(rollout)
        if problems:
            raise ValueError(
                f"{label} does not conform to the spec of {self._path}: " + "; ".join(problems)
            )
        listing = self._listing()
        if self._next < 0:
            self._next = 1 + max(
                (
                    file_number(found.path)
                    for found in listing
                    if parent(found.path) == self._path.rstrip("/\\")
                ),
                default=-1,
            )
        if is_url(self._path):
            target, size = self._append_url(rollout, compress)
        else:
            target, size = self._append_local(rollout, compress)
        self._next += 1
        bisect.insort(listing, Found(target, size), key=lambda found: self._walk_key(found.path))
        return target

    def _append_local(self, rollout: Rollout, compress: bool) -> tuple[str, int]:
        """Write the file under a temporary name, then claim the first free number for it."""
        temp = os.path.join(self._path, f"{TEMP_PREFIX}{secrets.token_hex(8)}{TEMP_SUFFIX}")
        try:
            save(rollout, temp, compress=compress)
            size = os.path.getsize(temp)
            while True:
                target = os.path.join(self._path, file_name(self._next))
                if claim_name(temp, target):
                    return target, size
                # Taken by another writer: go on after the highest number there is now.
                self._next = max(self._next + 1, highest_number(self._path) + 1)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)

    def _append_url(self, rollout: Rollout, compress: bool) -> tuple[str, int]:
        fs, _ = filesystem(self._path)
        while fs.exists(filesystem(join_url(self._path, file_name(self._next)))[1]):
            self._next += 1
        target = join_url(self._path, file_name(self._next))
        with tempfile.TemporaryDirectory(prefix="trajkit-") as tmp:
            local = os.path.join(tmp, file_name(self._next))
            save(rollout, local, compress=compress)
            size = os.path.getsize(local)
            copy_out(local, target)
        return target, size

    def _walk_key(self, path: str) -> tuple[tuple[int, NaturalKey], ...]:
        return walk_key(path[len(self._path) :].replace("\\", "/").lstrip("/"))

    # ------------------------------------------------------------------------ whole-set work

    def validate(
        self,
        *,
        quick: bool = False,
        jobs: int | None = 1,
        engine: Literal["local", "ray"] = "local",
        address: str | None = None,
    ) -> Iterator[FileCheck]:
        """Check every file (and its conformance to the spec), like `trajkit validate --spec`.

        [`validate_files`][trajkit.dataset.validate_files] over `files`, with the dataset's
        spec and size limit: the same engines, the same verdicts.

        Args:
            quick: Check only the ZIP directory and the metadata.
            jobs: Worker processes (Ray: the most tasks at once); `None` for every core.
            engine: `"local"` (processes on this machine) or `"ray"` (Ray tasks).
            address: With `engine="ray"`, the Ray cluster to connect to.

        Returns:
            One [`FileCheck`][trajkit.dataset.FileCheck] per file, in `files` order.

        Raises:
            ValueError: As `validate_files` (`jobs`, `engine`, `address`).

        Examples:
            >>> import tempfile
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.write(tmp, [example_rollout(), example_rollout()])
            ...     [check.ok for check in ds.validate()]
            [True, True]
        """
        return validate_files(
            self.files,
            spec=self._spec,
            quick=quick,
            max_bytes=self._max_bytes,
            jobs=jobs,
            engine=engine,
            address=address,
        )

    def stats(self, *, jobs: int | None = 1) -> DatasetStats:
        """Episode statistics over every file, streamed file by file.

        Each file is loaded (memory-mapped), checked against the spec, summarised and let go;
        with `jobs > 1` the files are summarised in worker processes (in a script, call it
        under `if __name__ == "__main__":`, as
        [`validate_files`][trajkit.dataset.validate_files] explains). The per-file summaries
        are merged in `files` order, so the result is the same for any `jobs`.

        Args:
            jobs: Worker processes; `None` for every core.

        Returns:
            The [`DatasetStats`][trajkit.dataset.DatasetStats].

        Raises:
            RolloutFileError: If a file is refused or does not conform to the spec.

        Examples:
            >>> import tempfile
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> rollouts = [example_rollout(num_steps=64, num_envs=2, seed=s) for s in range(4)]
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     stats = Dataset.write(tmp, rollouts).stats()
            >>> stats.files, stats.steps, stats.returns.count > 0
            (4, 512, True)
        """
        work = partial(stats_chunk, spec=self._spec, max_bytes=self._max_bytes)
        total = DatasetStats()
        workers = checked_jobs(jobs) or cpu_count()
        for part in run_ordered(work, iter(self._listing()), jobs=workers):
            total = total.merge(part)
        return total

    def minibatches(
        self,
        minibatch_size: int,
        *,
        gamma: float,
        lam: float,
        epochs: int = 1,
        files_per_buffer: int = 4,
        drop_last: bool = False,
        seed: Seed = None,
        shuffle: bool = True,
        normalize_advantages: AdvantageNormalization = None,
    ) -> Iterator[dict[str, ArrayTree]]:
        """Yield shuffled PPO minibatches drawn across the dataset's files (offline training).

        The files go through the shuffle buffer of [`MinibatchPlan`][trajkit.MinibatchPlan]:
        each epoch shuffles the order of the files, then loads `files_per_buffer` of them at
        a time (memory-mapped, checked against the spec, each with its own advantages and
        returns by GAE over its own rollout), shuffles their `(t, b)` entries with those left
        over from the previous buffer and cuts full minibatches. So every entry appears once
        per epoch and every minibatch but the epoch's last is full. Memory holds the training
        arrays of one buffer (copied together) and the few entries carried over: a larger
        buffer mixes the files more, at the cost of memory. Each minibatch is as
        [`Rollout.minibatches`][trajkit.Rollout.minibatches] gives.

        Args:
            minibatch_size: Entries per minibatch, at least 1.
            gamma: Discount, finite, in [0, 1].
            lam: GAE λ, finite, in [0, 1].
            epochs: Passes over the dataset.
            files_per_buffer: Files loaded into the shuffle buffer at a time, at least 1.
            drop_last: Drop each epoch's last, smaller minibatch.
            seed: An int, a `numpy.random.Generator`, or `None` for fresh entropy (it drives
                the file order and the shuffles).
            shuffle: `False` for the entries in order, file by file.
            normalize_advantages: As for [`Rollout.minibatches`][trajkit.Rollout.minibatches]
                (`"rollout"`: over each file's rollout).

        Raises:
            MissingModelOutputError: If the spec has no `critic` output (advantages need
                one), as for a rollout (`trajkit.MissingModelOutputError`, a `ValueError`).
            ValueError: If an argument is out of range (gamma and lam included).
            TypeError: If `seed` is of another type.
            RolloutFileError: When a file is refused or does not conform to the spec, once
                the file is reached; every other error is raised at the call.

        Examples:
            >>> import tempfile
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> rollouts = [example_rollout(num_steps=8, num_envs=2, seed=s) for s in range(3)]
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.write(tmp, rollouts)
            ...     batches = list(ds.minibatches(10, gamma=0.99, lam=0.95, seed=0))
            >>> [len(b["advantages"]) for b in batches]  # 3 files x 8 steps x 2 envs = 48
            [10, 10, 10, 10, 8]
        """
        plan = MinibatchPlan(
            minibatch_size,
            epochs=epochs,
            drop_last=drop_last,
            seed=seed,
            shuffle=shuffle,
            files_per_buffer=files_per_buffer,
            normalize_advantages=normalize_advantages,
        )
        check_discount(gamma, lam)
        if "critic" not in self._spec.model_outputs:
            raise missing_critic("minibatches()", self._spec.model_outputs, "the dataset's spec")
        loaders = [partial(self._ppo_table, path, gamma, lam, plan) for path in self.files]
        return sample(plan, loaders)

    def _ppo_table(self, path: str, gamma: float, lam: float, plan: MinibatchPlan) -> ArraysTable:
        return ppo_table(self.load(path), "minibatches", gamma, lam, plan)

    def transition_minibatches(
        self, minibatch_size: int, **kwargs: Any
    ) -> Iterator[dict[str, ArrayTree]]:
        """Deprecated: [`trajkit.transition_minibatches`][trajkit.transition_minibatches] of it.

        Deprecated after 0.1.0: call `trajkit.transition_minibatches(dataset, ...)`, which
        takes the same arguments. It warns with a `DeprecationWarning` and will be removed.

        Examples:
            >>> import tempfile, warnings
            >>> from trajkit.dataset import Dataset
            >>> from trajkit.testing import example_rollout
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     ds = Dataset.write(tmp, [example_rollout(keys={"actions"})])
            ...     with warnings.catch_warnings(record=True) as caught:
            ...         warnings.simplefilter("always")
            ...         batch = next(ds.transition_minibatches(4, seed=0))
            >>> caught[0].category.__name__, len(batch["reward"])
            ('DeprecationWarning', 4)
        """
        deprecated("Dataset.transition_minibatches", "trajkit.transition_minibatches(dataset, ...)")
        return transition_minibatches(self, minibatch_size, **kwargs)


def _list(root: str) -> list[Found]:
    """The rollout files of the folder `root`, in walk order (`_walk_key` order)."""
    found: list[Found] = []
    for item in discover(root, empty_ok=True):  # no files yet is fine
        if not isinstance(item, Found):
            raise OSError(f"{item.path}: {item.problems[0]}")
        found.append(item)
    return found


def _chain(first: Rollout, rest: Iterator[Rollout]) -> Iterator[Rollout]:
    yield first
    yield from rest
