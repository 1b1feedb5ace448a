"""Round trips of every member kind, at sizes that cross zlib's and the reader's buffer sizes.

Issue 26: `save(r, p, compress=True)` of rollouts from about 1 MB up wrote files that `load`
refused ("member dones.npy: truncated: 16 bytes of the member missing"): the capped inflate loop
stopped when its input ran out while zlib still held output. The sizes here sit on both sides
of the multiples of the reader's 256 KiB read, of the 1 MiB write and of the 32 KiB deflate
window, for zeros (which compress a thousandfold, where the bug showed) and random data. The CI
part takes a few seconds; `tests/io/test_fuzz.py` runs larger files (tens of MB) when asked.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.io.helpers import KINDS, PATTERNS, Kind, Pattern, rollout_with
from trajkit import Rollout, load, save
from trajkit._io.stream import IO_CHUNK, MemberStream
from trajkit._io.zipfmt import data_start
from trajkit._models.spec import SUPPORTED_DTYPES

NPY_HEADER = 128  # the .npy header save writes for these shapes


def assert_round_trips(path: Path, rollout: Rollout, *, compress: bool) -> None:
    save(rollout, path, compress=compress)
    assert load(path) == rollout
    if not compress:
        assert load(path, mmap=True, verify=True) == rollout
    with zipfile.ZipFile(path) as archive:  # and any ZIP reader agrees
        assert archive.testzip() is None


# The sizes (bytes of data) either side of the buffers' multiples.
BOUNDARIES = sorted(
    {
        max(0, k * unit + delta - NPY_HEADER * shift)
        for unit in (IO_CHUNK, 1 << 20, 1 << 15)
        for k in (1, 2, 4)
        for delta in (-64, -16, -4, 0, 4, 16, 64)
        for shift in (0, 1)
    }
)


def test_the_compressed_save_that_did_not_load_back(tmp_path: Path) -> None:
    """Issue 26, the smallest of the files measured lost: "member dones.npy: truncated"."""
    T, B = 16387, 4
    r = Rollout(
        obses=np.zeros((T + 1, B, 1), np.float32),
        states=np.zeros((T + 1, B, 0), np.float32),
        rews=np.zeros((T, B), np.float32),
        dones=np.zeros((T + 1, B), np.float32),
        infos=None,
        model_outs={},
    )
    assert_round_trips(tmp_path / "r.npz", r, compress=True)


@pytest.mark.parametrize("pattern", ["zeros", "random"])
def test_member_streams_inflate_across_every_read_boundary(pattern: str) -> None:
    """The stream on its own: every size around the read sizes, read as load reads a member."""
    rng = np.random.default_rng(1)
    sizes = [*range(IO_CHUNK - 300, IO_CHUNK + 300, 3), *BOUNDARIES]
    for size in sizes if pattern == "zeros" else sizes[::4]:
        data = bytes(size) if pattern == "zeros" else rng.bytes(size)
        blob = _zip_one(data)
        with zipfile.ZipFile(blob) as archive:
            info = archive.infolist()[0]
        for first in (0, 10, NPY_HEADER):  # load reads the header first, then the data
            start = data_start(blob, info, len(blob.getvalue()))
            stream = MemberStream(blob, info, start, _raise, check_crc=True)
            got = bytes(stream.read(first))
            buffer = bytearray(size - len(got))
            pos = 0
            while pos < len(buffer):
                count = stream.readinto(memoryview(buffer)[pos : pos + IO_CHUNK])
                assert count, f"{pattern} {size} after {first}: stopped at {pos}"
                pos += count
            stream.finish()
            assert got + bytes(buffer) == data


def _zip_one(data: bytes) -> Any:
    import io

    blob = io.BytesIO()
    with zipfile.ZipFile(blob, "w") as archive:
        info = zipfile.ZipInfo("m", (1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        with archive.open(info, "w", force_zip64=True) as out:  # in 1 MiB writes, as save does
            for start in range(0, max(1, len(data)), 1 << 20):
                out.write(data[start : start + (1 << 20)])
    return blob


def _raise(message: str) -> Any:
    raise ValueError(message)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("compress", [True, False])
def test_every_member_kind_round_trips_at_a_boundary(
    tmp_path: Path, kind: Kind, compress: bool
) -> None:
    for pattern in ("zeros", "random"):
        r = rollout_with(kind, IO_CHUNK - 64, pattern)
        assert_round_trips(tmp_path / "r.npz", r, compress=compress)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(KINDS),
    nbytes=st.one_of(st.sampled_from(BOUNDARIES[:40]), st.integers(0, 3 * IO_CHUNK)),
    pattern=st.sampled_from(PATTERNS),
    dtype=st.sampled_from(SUPPORTED_DTYPES),
    compress=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_round_trip_property(
    tmp_path: Path,
    kind: Kind,
    nbytes: int,
    pattern: Pattern,
    dtype: str,
    compress: bool,
    seed: int,
) -> None:
    r = rollout_with(kind, nbytes, pattern, dtype, seed)
    assert_round_trips(tmp_path / "p.npz", r, compress=compress)


def test_the_helper_makes_the_member_as_large_as_asked() -> None:
    r = rollout_with("obses", 1000, "random", "uint8")
    assert r.obses.nbytes == 1000
    assert rollout_with("dones", 4000, "zeros").dones.nbytes == 4000
