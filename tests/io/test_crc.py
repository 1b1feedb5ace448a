"""The CRC-32 of ZIP members: zlib-ng's when installed, the standard zlib's otherwise."""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import trajkit
from trajkit._io import crc


@pytest.fixture
def without_zlib_ng(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if the `fast` extra were not installed."""
    monkeypatch.setitem(sys.modules, "zlib_ng", None)
    crc._implementation.cache_clear()
    yield
    crc._implementation.cache_clear()


@pytest.mark.parametrize("size", [0, 1, 7, 4096, 100_003])
def test_crc32_is_zlibs_crc32(size: int) -> None:
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    assert crc.crc32(data) == zlib.crc32(data)
    assert crc.crc32(data[size // 2 :], crc.crc32(data[: size // 2])) == zlib.crc32(data)


def test_the_fast_extra_is_used_when_installed() -> None:
    zlib_ng = pytest.importorskip("zlib_ng.zlib_ng")
    crc._implementation.cache_clear()
    assert crc._implementation() is zlib_ng.crc32


@pytest.mark.usefixtures("without_zlib_ng")
def test_without_the_fast_extra_zlib_checks_the_same_files(tmp_path: Path) -> None:
    assert crc._implementation() is zlib.crc32
    rollout = trajkit.Rollout(
        states=np.zeros((3, 2, 0)),
        obses=np.arange(3 * 2 * 300_000, dtype=np.uint8).reshape(3, 2, 300_000),
        rews=np.ones((2, 2)),
        dones=np.zeros((3, 2)),
        infos=None,
        model_outs={},
    )
    path = tmp_path / "r.npz"
    trajkit.save(rollout, path)
    assert trajkit.load(path) == rollout
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1  # inside the observations
    path.write_bytes(bytes(data))
    with pytest.raises(trajkit.RolloutFileError, match="CRC-32 mismatch"):
        trajkit.load(path)


@pytest.mark.parametrize("fast", [True, False])
def test_damage_in_any_chunk_of_a_large_member_is_found(
    tmp_path: Path, request: pytest.FixtureRequest, fast: bool
) -> None:
    # 20 MB of observations: damage early, midway or late in the member is found.
    if not fast:
        request.getfixturevalue("without_zlib_ng")
    obses = np.random.default_rng(0).integers(0, 255, (3, 2, 10_000_000), dtype=np.uint8)
    rollout = trajkit.Rollout(
        np.zeros((3, 2, 0)), obses, np.ones((2, 2)), np.zeros((3, 2)), None, {}, copy=False
    )
    path = tmp_path / "r.npz"
    trajkit.save(rollout, path)
    assert trajkit.load(path) == rollout
    good = path.read_bytes()
    for where in (0.1, 0.5, 0.9):
        data = bytearray(good)
        data[int(len(data) * where)] ^= 0x10
        path.write_bytes(bytes(data))
        with pytest.raises(trajkit.RolloutFileError, match="CRC-32 mismatch"):
            trajkit.load(path)
