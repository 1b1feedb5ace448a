"""`final_obses` in rollout files: format version 5, its members, and every refusal."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.io.helpers import members, rebuild
from trajkit import RolloutFileError, load, read_metadata, save
from trajkit._core import tree
from trajkit._io.metadata import FINAL_OBSES_VERSION
from trajkit.testing import example_rollout


def edit_metadata(contents: dict[str, bytes], **changes: Any) -> dict[str, bytes]:
    meta = json.loads(contents["metadata.json"])
    for key, value in changes.items():
        target = meta
        *parents, leaf = key.split("__")
        for parent in parents:
            target = target[parent]
        if value is None:
            target.pop(leaf, None)
        else:
            target[leaf] = value
    return {**contents, "metadata.json": json.dumps(meta).encode()}


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("compress", [False, True])
def test_final_obses_are_saved_and_loaded(tmp_path: Path, nested: bool, compress: bool) -> None:
    r = example_rollout(num_steps=12, num_envs=3, done_prob=0.3, nested=nested, final_obs=True)
    assert r.final_obses is not None
    E = len(tree.leaves(r.final_obses)[0])
    save(r, tmp_path / "f.npz", compress=compress)
    meta = read_metadata(tmp_path / "f.npz")
    assert (meta.format_version, meta.num_final_obses, meta.spec.has_final_obses) == (
        FINAL_OBSES_VERSION,
        E,
        True,
    )
    names = [m.name for m in meta.arrays() if m.field == "final_obses"]
    assert names == (
        ["final_obses/0.npy", "final_obses/1.npy", "final_obses/2.npy"]
        if nested
        else ["final_obses.npy"]
    )
    assert all(m.shape[0] == E for m in meta.arrays() if m.field == "final_obses")
    assert load(tmp_path / "f.npz") == r
    if not compress:
        assert load(tmp_path / "f.npz", mmap=True) == r


def test_files_without_final_obses_keep_their_old_version(tmp_path: Path) -> None:
    r = example_rollout(num_steps=6, num_envs=2)
    save(r, tmp_path / "old.npz")
    assert read_metadata(tmp_path / "old.npz").format_version == 1
    text = members(tmp_path / "old.npz")["metadata.json"].decode()
    assert "num_final_obses" not in text
    assert "has_final_obses" not in text
    save(
        r,
        tmp_path / "rec.npz",
        recording={"id": "x", "index": 0, "num_envs": 2, "autoreset_mode": "NEXT_STEP"},
    )
    assert read_metadata(tmp_path / "rec.npz").format_version == 4


def test_no_episode_end_stores_an_empty_member(tmp_path: Path) -> None:
    r = example_rollout(num_steps=5, num_envs=2, done_prob=0.0)
    f = r.replace(final_obses=np.zeros((0, 4), np.float32))
    save(f, tmp_path / "e.npz")
    assert read_metadata(tmp_path / "e.npz").num_final_obses == 0
    assert load(tmp_path / "e.npz") == f


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"num_final_obses": None},
            "num_final_obses is None, but spec.has_final_obses is true: give both or neither",
        ),
        (
            {"spec__has_final_obses": None},
            "num_final_obses is 4, but spec.has_final_obses is false: give both or neither",
        ),
        ({"format_version": 4}, "final_obses need format version 5, but the file declares 4"[:48]),
        ({"num_final_obses": 10_000}, "num_final_obses is 10000, over T*B = 16"),
        ({"num_final_obses": -1}, "invalid metadata"),
    ],
)
def test_metadata_that_lies_about_final_obses(
    tmp_path: Path, changes: dict[str, Any], message: str
) -> None:
    r = example_rollout(num_steps=8, num_envs=2, done_prob=0.3, seed=3, final_obs=True)
    assert r.final_obses is not None
    assert len(tree.leaves(r.final_obses)[0]) == 4  # (the messages count on it)
    save(r, tmp_path / "good.npz")
    path = rebuild(tmp_path / "bad.npz", edit_metadata(members(tmp_path / "good.npz"), **changes))
    with pytest.raises(RolloutFileError, match="metadata") as caught:
        load(path)
    assert message in str(caught.value), str(caught.value)
    assert caught.value.member == "metadata.json"


def test_final_obses_that_disagree_with_dones_are_refused(tmp_path: Path) -> None:
    r = example_rollout(num_steps=8, num_envs=2, done_prob=0.3, seed=3, final_obs=True)
    save(r, tmp_path / "good.npz")
    contents = members(tmp_path / "good.npz")
    dones = r.dones.copy()
    dones[-1, 0] = 1 - dones[-1, 0]  # now E is 3 or 5, but 4 are stored
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, dones.astype("<f4"), allow_pickle=False)
    path = rebuild(tmp_path / "bad.npz", {**contents, "dones.npy": buffer.getvalue()})
    with pytest.raises(RolloutFileError) as caught:
        load(path)
    assert "the arrays do not form a valid rollout: final_obses has 4 entries" in str(caught.value)
    assert "expected E=3: one per episode end" in str(caught.value)  # (a rule across fields)
