"""A dataset's folder at its boundaries: numbering after a collision, names on any separator,
the kind of a spec file that is not a regular file, the size limit of a spec.

Each test pins behaviour that a small change to `trajkit.dataset._folder` (a mutant of
`make mutate`) would break without any other test noticing.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import trajkit
from trajkit import RolloutFileError, RolloutSpec
from trajkit.dataset import SPEC_FILE, Dataset, _folder
from trajkit.testing import example_rollout


def rollout(seed: int) -> trajkit.Rollout:
    return example_rollout(num_steps=3 + seed, num_envs=2, seed=seed)


def test_after_a_collision_an_append_goes_on_after_the_highest_number(tmp_path: Path) -> None:
    root = tmp_path / "d"
    ds = Dataset.write(root, [rollout(0), rollout(1)])
    assert len(ds) == 2  # its next number is now 2
    for number in (2, 5):  # another writer appends twice, leaving a gap
        trajkit.save(rollout(number), root / f"rollout-{number:06d}.npz")
    target = ds.append(rollout(6))
    assert Path(target).name == "rollout-000006.npz"  # after 5, not into the gap at 3
    assert [r.num_steps for r in Dataset.open(root)] == [3, 4, 5, 8, 9]  # the order appended


@pytest.mark.parametrize(
    ("path", "number", "parent"),
    [
        ("/data/run/rollout-000003.npz", 3, "/data/run"),
        ("C:\\data\\run\\rollout-000003.npz", 3, "C:\\data\\run"),
        ("memory://bucket/runXX/rollout-1000000.npz", 1000000, "memory://bucket/runXX"),
        ("/data/run/rollout-000003.npz.tmp", -1, "/data/run"),
        ("/data/run/spec.json", -1, "/data/run"),
        ("rollout-000007.npz", 7, ""),
    ],
)
def test_file_names_are_numbered_on_either_separator(path: str, number: int, parent: str) -> None:
    assert _folder.file_number(path) == number
    assert _folder.parent(path) == parent


def test_a_spec_file_of_another_kind_is_named(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # (checked before it is opened, and opened without blocking)
    with pytest.raises(RolloutFileError, match=r"fifo\.json: not a regular file \(a FIFO\)$"):
        _folder.read_spec_file(str(fifo))
    with pytest.raises(RolloutFileError, match=r"not a regular file \(a device\)$"):
        _folder.read_spec_file(os.devnull)
    sock = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock))
        with pytest.raises(RolloutFileError, match=r"not a regular file \(a socket\)$"):
            _folder.read_spec_file(str(sock))


def test_a_spec_file_may_be_1_mib_and_no_more(tmp_path: Path) -> None:
    spec = RolloutSpec.from_rollout(example_rollout())
    data = spec.model_dump_json().encode()
    path = tmp_path / SPEC_FILE
    path.write_bytes(data + b" " * (_folder.MAX_SPEC_BYTES - len(data)))
    assert _folder.read_spec_file(str(path)) == spec
    path.write_bytes(data + b" " * (_folder.MAX_SPEC_BYTES + 1 - len(data)))
    with pytest.raises(RolloutFileError, match="larger than 1048576 bytes: not a spec"):
        _folder.read_spec_file(str(path))


def test_a_spec_file_with_nan_or_a_duplicate_key_is_not_strict_json(tmp_path: Path) -> None:
    spec = RolloutSpec.from_rollout(example_rollout())
    path = tmp_path / SPEC_FILE
    text = spec.model_dump_json()
    path.write_text(text[:-1] + ', "obs_dtype": "float32"}')
    with pytest.raises(RolloutFileError, match=r"invalid spec: not strict JSON: .*obs_dtype"):
        _folder.read_spec_file(str(path))
    path.write_text('{"x": NaN}')
    with pytest.raises(RolloutFileError, match="invalid spec: not strict JSON"):
        _folder.read_spec_file(str(path))
    path.write_text('{"num_envs": "two"}')
    with pytest.raises(RolloutFileError, match=r"invalid spec: .*: "):
        _folder.read_spec_file(str(path))


def test_claim_name_says_whether_it_claimed_the_name(tmp_path: Path) -> None:
    first, second = tmp_path / "first.tmp", tmp_path / "second.tmp"
    first.write_bytes(b"1")
    second.write_bytes(b"2")
    target = tmp_path / "rollout-000000.npz"
    assert _folder.claim_name(str(first), str(target)) is True
    assert _folder.claim_name(str(second), str(target)) is False
    assert target.read_bytes() == b"1"  # not overwritten
