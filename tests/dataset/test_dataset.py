"""`trajkit.dataset`: a folder of rollout files with a pinned spec."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import numpy as np
import pytest

import trajkit
from trajkit import RolloutFileError, RolloutSpec
from trajkit._io import engine
from trajkit.dataset import SPEC_FILE, Dataset, DatasetStats, _folder, validate_files
from trajkit.dataset import _dataset as dataset_module
from trajkit.testing import example_rollout


def rollouts(count: int = 5, **kwargs: object) -> list[trajkit.Rollout]:
    """Rollouts of several lengths whose rewards are all different (0, 1, 2, ...)."""
    out = []
    start = 0
    for i in range(count):
        r = example_rollout(num_steps=4 + i, num_envs=3, seed=i, **kwargs)  # type: ignore[arg-type]
        n = r.rews.size
        out.append(r.replace(rews=np.arange(start, start + n, dtype=np.float32).reshape(-1, 3)))
        start += n
    return out


@pytest.fixture
def ds(tmp_path: Path) -> Dataset:
    return Dataset.write(tmp_path / "ds", rollouts())


# ------------------------------------------------------------------------ making, opening


def test_write_then_open(ds: Dataset, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    assert sorted(os.listdir(root)) == [f"rollout-{i:06d}.npz" for i in range(5)] + [SPEC_FILE]
    opened = Dataset.open(root)
    assert opened.spec == RolloutSpec.from_rollout(example_rollout(num_envs=3))
    assert repr(opened) == f"Dataset({str(root)!r}, files=?)"  # not listed yet
    assert len(opened) == 5
    assert repr(opened) == f"Dataset({str(root)!r}, files=5)"
    assert [r.num_steps for r in opened] == [4, 5, 6, 7, 8]
    assert opened[-1] == rollouts()[-1]
    assert json.loads((root / SPEC_FILE).read_text()) == json.loads(opened.spec.model_dump_json())


def test_iteration_memory_maps_and_checks_the_spec(ds: Dataset, tmp_path: Path) -> None:
    assert all(not r.obses.flags.writeable for r in ds)
    (tmp_path / "ds" / "z").mkdir()
    trajkit.save(example_rollout(num_envs=3, obs_shape=(7,)), tmp_path / "ds" / "z" / "odd.npz")
    again = Dataset.open(tmp_path / "ds")
    with pytest.raises(
        RolloutFileError,
        match=r"odd\.npz: does not conform to the spec: obses: per-step shape \(7,\), but the "
        r"spec says obs_shape \(4,\)",
    ):
        list(again)


def test_the_size_limit_applies_to_every_file(ds: Dataset, tmp_path: Path) -> None:
    small = Dataset.open(tmp_path / "ds", max_bytes=100)
    with pytest.raises(RolloutFileError, match="over the limit of 100 bytes"):
        next(iter(small))
    assert [c.ok for c in small.validate()] == [False] * 5
    assert len(list(Dataset.open(tmp_path / "ds", max_bytes=None))) == 5


def test_files_are_listed_in_walk_order_and_append_keeps_it(ds: Dataset, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    (root / "sub").mkdir()
    (root / ".hidden").mkdir()
    trajkit.save(example_rollout(num_envs=3), root / "sub" / "a.npz")
    trajkit.save(example_rollout(num_envs=3), root / ".hidden" / "b.npz")
    opened = Dataset.open(root)
    names = [os.path.relpath(f, root) for f in opened.files]
    assert names == [f"rollout-{i:06d}.npz" for i in range(5)] + [os.path.join("sub", "a.npz")]
    path = opened.append(example_rollout(num_envs=3))
    assert os.path.basename(path) == "rollout-000005.npz"
    assert opened.files.index(path) == 5  # before sub/a.npz, as a new listing has it
    assert opened.files == Dataset.open(root).files


def test_create_is_idempotent_but_refuses_another_spec(tmp_path: Path) -> None:
    spec = RolloutSpec.from_rollout(example_rollout())
    Dataset.create(tmp_path / "d", spec)
    assert Dataset.create(tmp_path / "d", spec).spec == spec
    other = spec.model_copy(update={"obs_dtype": "uint8"})
    with pytest.raises(ValueError, match=r"already pins a different spec in spec\.json"):
        Dataset.create(tmp_path / "d", other)


def test_append_refuses_a_rollout_that_breaks_the_spec(ds: Dataset) -> None:
    with pytest.raises(ValueError, match=r"the rollout does not conform to the spec of .*: obses"):
        ds.append(example_rollout(num_envs=3, obs_shape=(2,)))
    assert len(ds) == 5


def test_write_names_the_rollout_that_breaks_the_spec(tmp_path: Path) -> None:
    good, bad = example_rollout(), example_rollout(obs_shape=(2,))
    with pytest.raises(ValueError, match="rollout 1 does not conform to the spec"):
        Dataset.write(tmp_path / "d", [good, bad, good])
    assert len(Dataset.open(tmp_path / "d")) == 1
    with pytest.raises(ValueError, match=r"Dataset\.write\(\) needs a spec when there are no"):
        Dataset.write(tmp_path / "e", [])
    assert len(Dataset.write(tmp_path / "e", [], spec=RolloutSpec.from_rollout(good))) == 0


def test_open_refuses_a_folder_without_a_valid_spec(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no such file: a dataset pins its spec in spec"):
        Dataset.open(tmp_path)
    (tmp_path / SPEC_FILE).write_text('{"obs_shape": [1]}')
    with pytest.raises(RolloutFileError, match=r"spec\.json: invalid spec: model_outputs: Field"):
        Dataset.open(tmp_path)
    (tmp_path / SPEC_FILE).write_text('{"obs_shape": NaN}')
    with pytest.raises(RolloutFileError, match="invalid spec: not strict JSON"):
        Dataset.open(tmp_path)
    (tmp_path / SPEC_FILE).write_bytes(b" " * ((1 << 20) + 1))
    with pytest.raises(RolloutFileError, match="larger than 1048576 bytes: not a spec"):
        Dataset.open(tmp_path)


def test_unreadable_subfolder(ds: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "ds" / "locked"
    locked.mkdir()
    scandir = os.scandir

    def denied(path: str) -> Iterator[os.DirEntry[str]]:
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", denied)  # as a folder without read permission
    with pytest.raises(OSError, match=r"locked: cannot read folder: Permission denied"):
        len(Dataset.open(tmp_path / "ds"))


# --------------------------------------------------------------------------------- stats


def test_stats_equal_the_concatenation_for_any_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine, "CHUNK_FILES", 2)  # three chunks: two go to the workers
    monkeypatch.setattr(engine, "IN_PROCESS_FILES", 0)  # however few the files
    data = [
        example_rollout(num_steps=30, num_envs=2, truncation=True, done_prob=0.2, seed=s)
        for s in range(6)
    ]
    ds = Dataset.write(tmp_path / "d", data)
    one = ds.stats()
    two = ds.stats(jobs=2)
    assert one == two
    returns = np.concatenate([r.episode_stats().returns for r in data])
    assert (one.files, one.steps) == (6, 6 * 30 * 2)
    assert one.nbytes == sum(os.path.getsize(f) for f in ds.files)
    assert one.episodes == sum(r.episode_stats().episodes for r in data)
    np.testing.assert_allclose(
        [one.returns.mean, one.returns.std, one.returns.min, one.returns.max],
        [returns.mean(), returns.std(), returns.min(), returns.max()],
    )
    assert Dataset.create(tmp_path / "empty", ds.spec).stats() == DatasetStats()
    with pytest.raises(ValueError, match="jobs must be None or an integer >= 1, got 0"):
        ds.stats(jobs=0)


def test_validate_against_the_pinned_spec(ds: Dataset, tmp_path: Path) -> None:
    trajkit.save(example_rollout(num_envs=2, keys=("critic",)), tmp_path / "ds" / "other.npz")
    checks = list(Dataset.open(tmp_path / "ds").validate(jobs=None))
    assert [c.ok for c in checks] == [False] + [True] * 5  # other.npz sorts first
    assert checks[0].problems[0] == "model_outs: key 'actions' is in the spec but missing"


def test_validate_is_validate_files_over_the_files(ds: Dataset, tmp_path: Path) -> None:
    spec = trajkit.RolloutSpec.model_validate_json((tmp_path / "ds" / SPEC_FILE).read_bytes())
    assert list(ds.validate(quick=True)) == list(validate_files(ds.files, spec=spec, quick=True))
    assert list(Dataset.create(tmp_path / "empty", ds.spec).validate()) == []
    with pytest.raises(ValueError, match=r"address= needs engine='ray' \(got engine='local'\)"):
        ds.validate(address="auto")
    with pytest.raises(ValueError, match=r"engine must be 'local' or 'ray', got 'spark'"):
        ds.validate(engine="spark")  # type: ignore[arg-type]


# ------------------------------------------------------------------------- minibatches


def test_minibatches_see_every_entry_once_per_epoch(ds: Dataset) -> None:
    total = sum(r.rews.size for r in rollouts())  # 90
    batches = list(ds.minibatches(16, gamma=0.9, lam=0.8, epochs=2, files_per_buffer=2, seed=3))
    assert [len(b["rews"]) for b in batches] == [16] * 5 + [10] + [16] * 5 + [10]
    for epoch in (batches[:6], batches[6:]):
        seen = np.sort(np.concatenate([b["rews"] for b in epoch]))
        np.testing.assert_array_equal(seen, np.arange(total))
    again = list(ds.minibatches(16, gamma=0.9, lam=0.8, epochs=2, files_per_buffer=2, seed=3))
    assert all(np.array_equal(a["rews"], b["rews"]) for a, b in zip(batches, again, strict=True))
    dropped = list(ds.minibatches(16, gamma=0.9, lam=0.8, drop_last=True, seed=3))
    assert [len(b["rews"]) for b in dropped] == [16] * 5


def test_minibatches_carry_each_files_advantages(ds: Dataset) -> None:
    expected = {}
    for r in rollouts():
        adv = r.advantages(0.9, 0.8)
        for value, a in zip(r.rews.reshape(-1), adv.reshape(-1), strict=True):
            expected[float(value)] = float(a)
    for batch in ds.minibatches(7, gamma=0.9, lam=0.8, files_per_buffer=3, seed=0):
        assert sorted(batch) == sorted(rollouts()[0].training_arrays(0.9, 0.8))
        got = dict(zip(batch["rews"].tolist(), batch["advantages"].tolist(), strict=True))
        assert got == pytest.approx({k: expected[k] for k in got})


def test_minibatch_normalization(ds: Dataset) -> None:
    batch = next(ds.minibatches(32, gamma=0.9, lam=0.8, seed=0, normalize_advantages="minibatch"))
    assert float(batch["advantages"].std(ddof=1)) == pytest.approx(1.0, abs=1e-5)
    per_file = list(
        ds.minibatches(
            1000, gamma=0.9, lam=0.8, files_per_buffer=5, seed=0, normalize_advantages="rollout"
        )
    )
    assert len(per_file) == 1
    assert float(per_file[0]["advantages"].mean()) == pytest.approx(0.0, abs=1e-5)


def test_minibatches_of_nested_observations(tmp_path: Path) -> None:
    data = [example_rollout(nested=True, num_steps=3, seed=s) for s in range(3)]
    ds = Dataset.write(tmp_path / "n", data)
    batch = next(ds.minibatches(5, gamma=0.9, lam=0.9, seed=0))
    assert isinstance(batch["obses"], dict)
    assert batch["obses"]["image"].shape[0] == 5


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"minibatch_size": 0}, "minibatch_size must be >= 1, got 0"),
        ({"files_per_buffer": 0}, "files_per_buffer must be >= 1, got 0"),
        ({"normalize_advantages": "buffer"}, "normalize_advantages must be None, 'rollout' or"),
    ],
)
def test_minibatch_arguments(ds: Dataset, kwargs: dict[str, object], message: str) -> None:
    options: dict[str, object] = {"minibatch_size": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        ds.minibatches(gamma=0.9, lam=0.9, **options)  # type: ignore[arg-type]


def test_minibatches_need_a_critic(tmp_path: Path) -> None:
    ds = Dataset.write(tmp_path / "d", [example_rollout(keys=("actions",))])
    with pytest.raises(ValueError, match=r"minibatches\(\) needs model_outs\['critic'\]"):
        ds.minibatches(4, gamma=0.9, lam=0.9)


# ----------------------------------------------------------------------------------- URLs


def test_a_dataset_behind_a_memory_url() -> None:
    fsspec = pytest.importorskip("fsspec", reason="URLs need fsspec (trajkit[cloud])")
    url = "memory://datasets/run1"
    try:
        written = Dataset.write(url, rollouts(3))
        assert [f.removeprefix(url) for f in written.files] == [
            f"/rollout-{i:06d}.npz" for i in range(3)
        ]
        ds = Dataset.open(url)
        assert ds.spec == written.spec
        assert [r.num_steps for r in ds] == [4, 5, 6]
        assert ds.stats(jobs=2).files == 3  # memory:// files are read in this process
        assert all(check.ok for check in ds.validate(jobs=2))
        assert len(list(ds.minibatches(8, gamma=0.9, lam=0.9, seed=0))) == 6  # 45 entries
    finally:
        fsspec.filesystem("memory").rm("/datasets", recursive=True)


# ----------------------------------------------------- appends from several processes (issue 26)

_APPENDER = """
import sys
from trajkit.dataset import Dataset
from trajkit.testing import example_rollout

root, first = sys.argv[1], int(sys.argv[2])
ds = Dataset.open(root)
for seed in range(first, first + 20):
    ds.append(example_rollout(num_steps=4, num_envs=3, seed=seed))
"""


def test_two_processes_appending_to_one_folder_lose_nothing(tmp_path: Path) -> None:
    """Issue 26: two processes appending 20 rollouts each left 21-29 files instead of 40."""
    root = tmp_path / "d"
    Dataset.create(root, RolloutSpec.from_rollout(example_rollout(num_envs=3)))
    writers = [
        subprocess.Popen([sys.executable, "-c", _APPENDER, str(root), str(first)])
        for first in (0, 100)
    ]
    assert [writer.wait(timeout=300) for writer in writers] == [0, 0]
    ds = Dataset.open(root)
    assert [Path(f).name for f in ds.files] == [f"rollout-{i:06d}.npz" for i in range(40)]
    expected = {
        example_rollout(num_steps=4, num_envs=3, seed=seed).rews.tobytes()
        for seed in (*range(20), *range(100, 120))
    }
    assert {r.rews.tobytes() for r in ds} == expected  # each rollout once
    assert sorted(os.listdir(root)) == sorted([*(Path(f).name for f in ds.files), SPEC_FILE])


def test_a_name_taken_by_another_writer_is_skipped(tmp_path: Path) -> None:
    first = Dataset.write(tmp_path / "d", rollouts(2))
    second = Dataset.open(tmp_path / "d")
    assert len(second) == 2  # both now think the next number is 2
    assert Path(first.append(rollouts(3)[2])).name == "rollout-000002.npz"
    assert Path(second.append(rollouts(4)[3])).name == "rollout-000003.npz"
    assert Path(first.append(rollouts(5)[4])).name == "rollout-000004.npz"
    assert [r.num_steps for r in Dataset.open(tmp_path / "d")] == [4, 5, 6, 7, 8]
    assert not [name for name in os.listdir(tmp_path / "d") if name.startswith(".")]


def test_names_are_claimed_without_hard_links_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(source: str, target: str) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted", target)

    first = Dataset.write(tmp_path / "d", rollouts(1))
    second = Dataset.open(tmp_path / "d")
    assert len(second) == 1
    monkeypatch.setattr(os, "link", no_links)
    assert Path(first.append(rollouts(2)[1])).name == "rollout-000001.npz"
    assert Path(second.append(rollouts(3)[2])).name == "rollout-000002.npz"
    assert [r.num_steps for r in Dataset.open(tmp_path / "d")] == [4, 5, 6]
    assert not [name for name in os.listdir(tmp_path / "d") if name.startswith(".")]


def test_a_failed_append_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = Dataset.write(tmp_path / "d", rollouts(1))

    def broken(source: str, target: str) -> None:
        raise OSError(errno.EIO, "Input/output error", target)

    monkeypatch.setattr(os, "link", broken)
    with pytest.raises(OSError, match="Input/output error"):
        ds.append(rollouts(2)[1])
    assert sorted(os.listdir(tmp_path / "d")) == ["rollout-000000.npz", SPEC_FILE]
    assert len(ds) == 1


def test_numbers_past_999999_sort_after_it(tmp_path: Path) -> None:
    """Issue 26: numbering past rollout-999999 sorted first."""
    root = tmp_path / "d"
    ds = Dataset.write(root, rollouts(2))
    os.rename(root / "rollout-000001.npz", root / "rollout-999999.npz")
    (root / "sub").mkdir()
    os.rename(root / "rollout-000000.npz", root / "sub" / "rollout-000000.npz")
    ds = Dataset.open(root)
    assert Path(ds.append(rollouts(3)[2])).name == "rollout-1000000.npz"
    assert Path(ds.append(rollouts(4)[3])).name == "rollout-1000001.npz"
    names = ["rollout-999999.npz", "rollout-1000000.npz", "rollout-1000001.npz"]
    expected = [str(root / name) for name in names] + [str(root / "sub" / "rollout-000000.npz")]
    assert list(ds.files) == expected
    assert list(Dataset.open(root).files) == expected  # listed afresh: the same order
    assert [r.num_steps for r in Dataset.open(root)] == [5, 6, 7, 4]


def test_concurrent_creators_agree_on_one_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of two processes creating one dataset at once, the second reads the first's spec."""
    spec = RolloutSpec.from_rollout(example_rollout())
    other = spec.model_copy(update={"obs_dtype": "uint8"})
    root = tmp_path / "d"
    real = _folder.read_spec
    calls = []

    def first_sees_nothing(where: str) -> RolloutSpec:
        calls.append(where)
        if len(calls) == 1:  # another process writes its spec.json right after this look
            Dataset.create(root, other)
            raise FileNotFoundError(where)
        return real(where)

    monkeypatch.setattr(dataset_module, "read_spec", first_sees_nothing)
    with pytest.raises(ValueError, match=r"already pins a different spec in spec\.json"):
        Dataset.create(root, spec)
    assert Dataset.open(root).spec == other
    assert sorted(os.listdir(root)) == [SPEC_FILE]


def test_spec_json_must_be_a_regular_file(tmp_path: Path) -> None:
    """Issue 26: a FIFO spec.json made Dataset.open hang; a folder raised IsADirectoryError."""
    (tmp_path / "d" / SPEC_FILE).mkdir(parents=True)
    for make in (
        Dataset.open,
        partial(Dataset.create, spec=RolloutSpec.from_rollout(example_rollout())),
    ):
        with pytest.raises(RolloutFileError, match=r"spec\.json: not a regular file \(a folder\)$"):
            make(tmp_path / "d")
    fifo = tmp_path / "f" / SPEC_FILE
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    code = (
        "import sys\n"
        "from trajkit import RolloutFileError\n"
        "from trajkit.dataset import Dataset\n"
        "try:\n"
        "    Dataset.open(sys.argv[1])\n"
        "except RolloutFileError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(  # in a subprocess, so that a regression fails instead of hanging
        [sys.executable, "-c", code, str(fifo.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout == f"{fifo}: not a regular file (a FIFO)\n"


def test_the_cli_reads_its_spec_as_a_dataset_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from trajkit.cli import main

    (tmp_path / SPEC_FILE).write_bytes(b" " * ((1 << 20) + 1))
    with pytest.raises(
        RolloutFileError, match=r"spec\.json: larger than 1048576 bytes: not a spec"
    ):
        Dataset.open(tmp_path)
    assert main(["validate", "--spec", str(tmp_path / SPEC_FILE), str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"trajkit validate: error: invalid spec {tmp_path / SPEC_FILE}: larger than 1048576 "
        "bytes: not a spec\n"
    )


# -------------------------------------------------- adopting a folder of recordings (issue 36)


def test_a_folder_of_recordings_is_adopted_in_place(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    (root / "day2").mkdir(parents=True)
    rs = rollouts(3)
    for path, r in zip(["a.npz", "b.npz", "day2/c.npz"], rs, strict=True):
        trajkit.save(r, root / path)
    inodes = {p: os.stat(root / p).st_ino for p in ("a.npz", "b.npz", "day2/c.npz")}
    with pytest.raises(FileNotFoundError, match=r"or Dataset\.adopt\(path\) for a folder"):
        Dataset.open(root)
    ds = Dataset.adopt(root)
    assert ds.spec == RolloutSpec.from_rollout(rs[0])
    assert [Path(f).relative_to(root).as_posix() for f in ds.files] == [
        "a.npz",
        "b.npz",
        "day2/c.npz",
    ]
    assert {p: os.stat(root / p).st_ino for p in inodes} == inodes  # not copied
    assert [r.num_steps for r in Dataset.open(root)] == [4, 5, 6]
    assert Path(ds.append(rs[0])).name == "rollout-000000.npz"
    assert Dataset.adopt(root).spec == ds.spec  # again: checks the files, opens it


def test_adopting_refuses_a_bad_file_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    root.mkdir()
    trajkit.save(example_rollout(num_envs=3), root / "a.npz")
    trajkit.save(example_rollout(num_envs=2), root / "b.npz")  # another B: another spec
    spec = RolloutSpec.from_rollout(example_rollout(num_envs=3)).model_copy(
        update={"min_envs": 3, "max_envs": 3}
    )
    (root / "c.npz").write_bytes(b"not a zip")
    with pytest.raises(RolloutFileError, match=r"b\.npz: .*\(2 of 3 files refused\): .* was not"):
        Dataset.adopt(root, spec=spec)
    with pytest.raises(RolloutFileError, match=r"c\.npz: .*: .*runs was not adopted, no spec"):
        Dataset.adopt(root)
    assert not (root / SPEC_FILE).exists()


def test_adopting_an_empty_or_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such folder to adopt"):
        Dataset.adopt(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"holds no rollout files \(\*\.npz\) to take a spec"):
        Dataset.adopt(tmp_path)
    spec = RolloutSpec.from_rollout(example_rollout())
    assert len(Dataset.adopt(tmp_path, spec=spec)) == 0
    with pytest.raises(ValueError, match="already pins a different spec"):
        Dataset.adopt(tmp_path, spec=RolloutSpec.from_rollout(example_rollout(obs_shape=(3,))))


def test_adopting_a_folder_behind_a_url() -> None:
    fsspec = pytest.importorskip("fsspec", reason="URLs need fsspec (trajkit[cloud])")
    url = "memory://adopt/run1"
    try:
        Dataset.write(url, rollouts(2))
        fsspec.filesystem("memory").rm("/adopt/run1/spec.json")
        assert len(Dataset.adopt(url)) == 2
        assert fsspec.filesystem("memory").exists("/adopt/run1/spec.json")
    finally:
        fsspec.filesystem("memory").rm("/adopt", recursive=True)


# ------------------------------------------------------------ numbering: boundary cases


def test_files_in_subfolders_do_not_count_in_the_numbering(tmp_path: Path) -> None:
    root = tmp_path / "d"
    ds = Dataset.write(root, rollouts(1))
    (root / "old").mkdir()
    trajkit.save(rollouts(2)[1], root / "old" / "rollout-000007.npz")
    reopened = Dataset.open(root)
    assert len(reopened) == 2  # listed, and read
    assert Path(reopened.append(rollouts(3)[2])).name == "rollout-000001.npz"
    assert ds.spec == reopened.spec


def test_an_append_to_a_url_skips_every_name_taken_since_listing(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec", reason="URLs need fsspec (trajkit[cloud])")
    url = "memory://numbering/run1"
    try:
        first = Dataset.write(url, rollouts(1))
        assert len(first) == 1  # the listing is now known: next number 1
        fs = fsspec.filesystem("memory")
        other = rollouts(3)
        for number in (1, 2):  # another writer took two names since
            trajkit.save(other[number], tmp_path / "r.npz")
            fs.put_file(str(tmp_path / "r.npz"), f"/numbering/run1/rollout-00000{number}.npz")
        target = first.append(rollouts(4)[3])
        assert target.endswith("/rollout-000003.npz")
        assert [r.num_steps for r in Dataset.open(url)] == [4, 5, 6, 7]  # nothing overwritten
    finally:
        fsspec.filesystem("memory").rm("/numbering", recursive=True)
