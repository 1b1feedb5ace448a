"""`trajkit.ray` against a real local Ray (two CPUs), started once for this module."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import trajkit
from trajkit._io import scan
from trajkit.cli import main
from trajkit.dataset import Dataset, validate_files
from trajkit.testing import example_rollout

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'trajkit[ray]')")
import trajkit.ray  # noqa: E402 - after the skip

# Offline and quiet: no usage statistics, no dashboard, no token written to the home folder.
_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_DEDUP_LOGS": "0"}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    saved = {key: os.environ.get(key) for key in _ENV}
    os.environ.update(_ENV)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten files: eight valid (two layouts of T), one damaged, one not a ZIP."""
    root = tmp_path_factory.mktemp("ray") / "runs"
    Dataset.write(
        root, [example_rollout(num_steps=4 + i % 2, truncation=True, seed=i) for i in range(8)]
    )
    first = root / "rollout-000000.npz"
    data = bytearray(first.read_bytes())
    data[-200] ^= 0xFF
    (root / "damaged.npz").write_bytes(bytes(data))
    (root / "junk.npz").write_bytes(b"junk")
    return root


@pytest.mark.usefixtures("local_ray")
def test_validate_matches_local_processes(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "CHUNK_FILES", 3)  # four chunks, four Ray tasks
    local = list(validate_files([str(folder)], jobs=1))
    remote = trajkit.ray.validate(str(folder))
    assert remote == local
    assert [c.ok for c in remote].count(False) == 2


@pytest.mark.usefixtures("local_ray")
def test_stats_match_the_dataset(folder: Path, tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    shutil.copytree(folder, clean, ignore=shutil.ignore_patterns("damaged.npz", "junk.npz"))
    assert repr(trajkit.ray.stats([str(clean)])) == repr(Dataset.open(clean).stats())
    with pytest.raises(trajkit.RolloutFileError, match=r"junk\.npz: damaged or not a ZIP"):
        trajkit.ray.stats([str(clean), str(folder / "junk.npz")])


# Ray Data's DataContext warns about deprecated fields of its own whenever it is made (2.60).
@pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.data.context")
@pytest.mark.usefixtures("local_ray")
def test_read_rollouts_gives_a_row_per_file(folder: Path) -> None:
    files = [f for f in Dataset.open(folder).files if "rollout-" in f]  # the valid ones
    rows = trajkit.ray.read_rollouts(list(files)).take_all()
    assert [row["path"] for row in rows] == list(files)
    expected = [trajkit.load(path) for path in files]
    assert [row["num_steps"] for row in rows] == [r.num_steps for r in expected]
    assert [row["steps"] for row in rows] == [r.num_steps * r.batch_size for r in expected]
    first = expected[0].episode_stats()
    assert list(rows[0]["returns"]) == pytest.approx(first.returns.tolist())
    assert rows[0]["truncations"] == first.truncations
    spec = trajkit.RolloutSpec.model_validate_json(rows[0]["spec"])
    assert spec == trajkit.RolloutSpec.from_rollout(expected[0])
    with pytest.raises(trajkit.RolloutFileError, match=r"gone: no such file or directory"):
        trajkit.ray.read_rollouts(str(folder / "gone"))


@pytest.mark.usefixtures("local_ray")
def test_cli_engine_ray(capsys: pytest.CaptureFixture[str], folder: Path) -> None:
    code = main(["validate", "--engine", "ray", str(folder)])
    ray_out, ray_err = capsys.readouterr()
    assert code == 1
    assert main(["validate", "--jobs", "1", str(folder)]) == 1
    assert capsys.readouterr().out == ray_out
    assert "10 files: 8 ok, 2 invalid" in ray_err


@pytest.mark.usefixtures("local_ray")
def test_jobs_bounds_the_tasks_in_flight(
    capsys: pytest.CaptureFixture[str], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan, "CHUNK_FILES", 3)  # four chunks, four Ray tasks
    in_flight, most = [0], [0]
    submitter = trajkit.ray._submitter

    def counting(ray_module: Any) -> Any:
        submit = submitter(ray_module)

        def counted(work: Any, group: Any) -> Any:
            wait = submit(work, group)
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])

            def done() -> Any:
                in_flight[0] -= 1
                return wait()

            return done

        return counted

    monkeypatch.setattr(trajkit.ray, "_submitter", counting)
    local = list(validate_files([str(folder)], jobs=1))
    assert trajkit.ray.validate(str(folder), jobs=1) == local
    assert most[0] == 1
    most[0] = 0
    assert trajkit.ray.validate(str(folder)) == local
    assert most[0] == 4  # by default, four chunks per CPU may be in flight: all of them
    assert repr(trajkit.ray.stats(str(folder / "rollout-000001.npz"), jobs=1)) == repr(
        trajkit.ray.stats(str(folder / "rollout-000001.npz"))
    )
    with pytest.raises(ValueError, match=r"jobs must be None or an integer >= 1, got 0"):
        trajkit.ray.validate(str(folder), jobs=0)
    most[0] = 0
    code = main(["validate", "--engine", "ray", "--jobs", "1", str(folder)])
    assert code == 1
    assert most[0] == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{c.path}: ok" if c.ok else f"{c.path}: invalid: {c.problems[0]}" for c in local
    ]
