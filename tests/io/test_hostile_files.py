"""A corpus of hostile and damaged files, generated here: every one is refused with
`RolloutFileError` (never KeyError, BadZipFile, EOFError or MemoryError), nothing is ever
unpickled, and nothing large is allocated or inflated before the sizes are checked."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import re
import struct
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import trajkit
from tests.io.helpers import members, rebuild
from trajkit import RolloutFileError, load, read_metadata, save
from trajkit.testing import example_rollout

T, B = 16, 2


@pytest.fixture
def rollout() -> trajkit.Rollout:
    return example_rollout(num_steps=T, num_envs=B, truncation=True)


@pytest.fixture
def good(tmp_path: Path, rollout: trajkit.Rollout) -> Path:
    path = tmp_path / "good.npz"
    save(rollout, path)
    return path


def npy(array: np.ndarray[Any, Any]) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array(out, array, allow_pickle=False)
    return out.getvalue()


def npy_header(shape: tuple[int, ...], descr: str, *, fortran: bool = False) -> bytes:
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        out, {"descr": descr, "fortran_order": fortran, "shape": shape}
    )
    return out.getvalue()


def with_metadata(contents: dict[str, bytes], **changes: Any) -> dict[str, bytes]:
    meta = json.loads(contents["metadata.json"])
    for dotted, value in changes.items():
        target = meta
        *parents, leaf = dotted.split("__")
        for parent in parents:
            target = target[parent]
        target[leaf] = value
    return {**contents, "metadata.json": json.dumps(meta).encode()}


@dataclass
class Entry:
    """One member of a hand-built ZIP, whose directory may lie about it."""

    name: str
    data: bytes
    method: int = zipfile.ZIP_STORED
    raw: bytes | None = None  # the bytes actually stored, if not `data` (compressed)
    file_size: int | None = None  # the declared uncompressed size, if not len(data)
    crc: int | None = None
    flags: int = 0

    def stored(self) -> bytes:
        if self.raw is not None:
            return self.raw
        if self.method == zipfile.ZIP_DEFLATED:
            packer = zlib.compressobj(6, zlib.DEFLATED, -15)
            return packer.compress(self.data) + packer.flush()
        return self.data


def local_record(entry: Entry) -> bytes:
    raw, name = entry.stored(), entry.name.encode()
    crc = zlib.crc32(entry.data) if entry.crc is None else entry.crc
    size = len(entry.data) if entry.file_size is None else entry.file_size
    fields = (b"PK\x03\x04", 20, entry.flags, entry.method, 0, 33, crc, len(raw), size)
    return struct.pack("<4s5H3I2H", *fields, len(name), 0) + name + raw


def central_record(entry: Entry, offset: int) -> bytes:
    raw, name = entry.stored(), entry.name.encode()
    crc = zlib.crc32(entry.data) if entry.crc is None else entry.crc
    size = len(entry.data) if entry.file_size is None else entry.file_size
    fields = (b"PK\x01\x02", 20, 20, entry.flags, entry.method, 0, 33, crc, len(raw), size)
    return struct.pack("<4s6H3I5H2I", *fields, len(name), 0, 0, 0, 0, 0, offset) + name


def build_zip(entries: list[Entry], extra_central: Sequence[tuple[Entry, int]] = ()) -> bytes:
    out, central = bytearray(), bytearray()
    for entry in entries:
        central += central_record(entry, len(out))
        out += local_record(entry)
    for entry, offset in extra_central:
        central += central_record(entry, offset)
    count = len(entries) + len(extra_central)
    start = len(out)
    out += central
    out += struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, count, count, len(central), start, 0)
    return bytes(out)


def refused(path: Path, **kwargs: Any) -> RolloutFileError:
    with pytest.raises(RolloutFileError) as caught:
        load(path, **kwargs)
    assert caught.value.path == str(path)
    assert isinstance(caught.value, ValueError)
    return caught.value


def data_spans(path: Path) -> Iterator[tuple[str, int, int]]:
    """(member, start, end) of each member's stored bytes in the file."""
    blob = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name_len, extra_len = struct.unpack_from("<HH", blob, info.header_offset + 26)
            start = info.header_offset + 30 + name_len + extra_len
            yield info.filename, start, start + info.compress_size


def test_the_hand_built_zip_writer_makes_loadable_files(
    tmp_path: Path, good: Path, rollout: trajkit.Rollout
) -> None:
    for method in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        entries = [Entry(n, d, method) for n, d in members(good).items()]
        path = tmp_path / f"hand-{method}.npz"
        path.write_bytes(build_zip(entries))
        assert load(path) == rollout
        assert load(path, mmap=True) == rollout


# -------------------------------------------------------------------------------- pickles


class CreatesMarker:
    """Unpickling this creates a file: the proof that something was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def pickled_npy(marker: Path, shape: tuple[int, ...] = (1,)) -> bytes:
    array = np.empty(shape, dtype=object)
    array.flat[0] = CreatesMarker(marker)
    out = io.BytesIO()
    np.save(out, array, allow_pickle=True)
    return out.getvalue()


def test_the_pickle_payload_is_armed(tmp_path: Path) -> None:
    marker = tmp_path / "armed"
    np.load(io.BytesIO(pickled_npy(marker)), allow_pickle=True)  # the unsafe way, on purpose
    assert marker.exists()


def test_pickled_members_are_refused_and_never_unpickled(tmp_path: Path, good: Path) -> None:
    marker = tmp_path / "MARKER"
    contents = members(good)
    obs_shape = (T + 1, B, 4)
    header = npy_header(obs_shape, "|O")
    payload = pickled_npy(marker, obs_shape)
    exact = header + payload[len(npy_header(obs_shape, "|O")) :]
    exact = exact[: len(contents["obses.npy"])].ljust(len(contents["obses.npy"]), b"\0")
    cases = {
        "object obses": {**contents, "obses.npy": payload},
        "object obses, exact size": {**contents, "obses.npy": exact},
        "object model output": {**contents, "model_outs/0.npy": pickled_npy(marker, (T + 1, B))},
        "metadata says object": with_metadata(
            {**contents, "obses.npy": payload}, spec__obs_dtype="object"
        ),
    }
    for label, case in cases.items():
        for compress in (False, True):
            path = rebuild(tmp_path / f"{label}-{compress}.npz", case, compress=compress)
            error = refused(path)
            refused(path, mmap=True)
            assert "object" in str(error) or "obses" in str(error) or "dtype" in str(error), label
    error = refused(rebuild(tmp_path / "exact.npz", cases["object obses, exact size"]))
    assert "pickle" in str(error)
    assert error.member == "obses.npy"
    whole = tmp_path / "pickle.npz"
    whole.write_bytes(pickle.dumps({"rews": CreatesMarker(marker)}))
    refused(whole)
    with pytest.raises(RolloutFileError):
        read_metadata(whole)
    plain = tmp_path / "plain.npz"
    np.savez(plain, obses=np.array([CreatesMarker(marker)], dtype=object), allow_pickle=True)
    refused(plain)
    assert not marker.exists()


# ------------------------------------------------------------------------ damaged archives


@pytest.mark.parametrize("compress", [False, True])
def test_truncated_files_are_refused(
    tmp_path: Path, rollout: trajkit.Rollout, compress: bool
) -> None:
    path = tmp_path / "r.npz"
    save(rollout, path, compress=compress)
    blob = path.read_bytes()
    cut = tmp_path / "cut.npz"
    offsets = set(range(0, len(blob), max(1, len(blob) // 80))) | {
        len(blob) - k for k in range(1, 30)
    }
    for offset in sorted(offsets):
        cut.write_bytes(blob[:offset])
        refused(cut)
        refused(cut, mmap=True)


@pytest.mark.parametrize("compress", [False, True])
def test_byte_flips_are_refused_or_harmless(
    tmp_path: Path, rollout: trajkit.Rollout, compress: bool
) -> None:
    """A flip is refused, unless it hits a ZIP field that carries no data (a timestamp,
    attributes, padding) and the file still loads exactly the original rollout. A flip in any
    member's data is always refused."""
    path = tmp_path / "r.npz"
    save(rollout, path, compress=compress)
    blob = path.read_bytes()
    in_data = {pos for _, start, end in data_spans(path) for pos in range(start, end)}
    rng = np.random.default_rng(1234)
    positions = sorted(set(rng.integers(0, len(blob), size=400).tolist()) | set(range(120)))
    damaged = tmp_path / "flip.npz"
    refusals = 0
    for pos in positions:
        flipped = bytearray(blob)
        flipped[pos] ^= int(rng.integers(1, 256))
        damaged.write_bytes(bytes(flipped))
        try:
            loaded = load(damaged)
        except RolloutFileError:
            refusals += 1
        else:
            assert pos not in in_data, f"a flip at data byte {pos} went unnoticed"
            assert loaded == rollout, f"a flip at {pos} changed the data silently"
        with contextlib.suppress(RolloutFileError):
            load(damaged, mmap=True)  # mmap skips data CRCs, but must still only refuse
    assert refusals > len(positions) // 2


@pytest.mark.parametrize(
    ("label", "blob"),
    [
        ("empty", b""),
        ("one byte", b"P"),
        ("zip magic then junk", b"PK\x03\x04" + bytes(range(256)) * 4),
        ("empty zip", b"PK\x05\x06" + bytes(18)),
        ("text", b"states,obses,rews\n1,2,3\n"),
        ("npy", npy(np.zeros((3, 2), np.float32))),
        *[
            (f"random {n}", np.random.default_rng(n).integers(0, 256, n, np.uint8).tobytes())
            for n in (10, 1000, 100_000)
        ],
    ],
)
def test_foreign_files_are_refused(tmp_path: Path, label: str, blob: bytes) -> None:
    path = tmp_path / "x.npz"
    path.write_bytes(blob)
    refused(path)
    with pytest.raises(RolloutFileError):
        read_metadata(path)


def test_missing_paths_and_folders_are_refused(tmp_path: Path) -> None:
    error = refused(tmp_path / "nope.npz")
    assert "cannot open" in str(error)
    error = refused(tmp_path)
    assert error.member is None
    assert "a folder" in str(error)
    fifo = tmp_path / "fifo.npz"
    os.mkfifo(fifo)  # opening it would block: refused without opening
    assert "not a regular file" in str(refused(fifo))


def test_plain_npz_and_zip_of_folders_are_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain.npz"
    np.savez(plain, rews=np.zeros((3, 2), np.float32))
    assert "metadata.json" in str(refused(plain))
    folders = tmp_path / "folders.npz"
    with zipfile.ZipFile(folders, "w") as archive:
        archive.writestr("metadata.json/", b"")  # a folder entry (ZipFile.mkdir is 3.11+)
    refused(folders)


# ------------------------------------------------------------------------ members and metadata


def test_missing_extra_renamed_and_duplicate_members(tmp_path: Path, good: Path) -> None:
    contents = members(good)
    without = {k: v for k, v in contents.items() if k != "rews.npy"}
    assert refused(rebuild(tmp_path / "missing.npz", without)).member == "rews.npy"
    extra = {**contents, "extra.npy": npy(np.zeros(3))}
    assert refused(rebuild(tmp_path / "extra.npz", extra)).member == "extra.npy"
    renamed = {("rewards.npy" if k == "rews.npy" else k): v for k, v in contents.items()}
    assert refused(rebuild(tmp_path / "renamed.npz", renamed)).member == "rews.npy"
    reordered = dict(reversed(list(contents.items())))
    assert refused(rebuild(tmp_path / "order.npz", reordered)).member == "metadata.json"
    for path_name in ("metadata.json", "rews.npy"):
        entries = [Entry(n, d) for n, d in contents.items()] + [Entry(path_name, b"{}")]
        dup = tmp_path / "dup.npz"
        dup.write_bytes(build_zip(entries))
        assert "more than once" in str(refused(dup))
    no_meta = {k: v for k, v in contents.items() if k != "metadata.json"}
    assert "not a trajkit rollout file" in str(refused(rebuild(tmp_path / "nm.npz", no_meta)))


def test_members_one_row_short(tmp_path: Path, good: Path, rollout: trajkit.Rollout) -> None:
    contents = members(good)
    short = {**contents, "rews.npy": npy(rollout.rews[:-1])}
    assert refused(rebuild(tmp_path / "rews.npz", short)).member == "rews.npy"
    all_short = {
        **contents,
        "states.npy": npy(rollout.states[:-1]),
        "obses.npy": npy(rollout.obses[:-1]),
        "dones.npy": npy(rollout.dones[:-1]),
        "rews.npy": npy(rollout.rews[:-1]),
    }
    refused(rebuild(tmp_path / "all.npz", all_short))
    # Everything, metadata included, says T-1, except infos.json.
    truncated, final_values = rollout.truncated, rollout.final_values
    assert truncated is not None
    assert final_values is not None
    consistent = with_metadata(all_short, num_steps=T - 1)
    consistent |= {
        "truncated.npy": npy(truncated[:-1]),
        "final_values.npy": npy(final_values[:-1]),
    }
    consistent |= {
        f"model_outs/{i}.npy": npy(a[:-1]) for i, a in enumerate(rollout.model_outs.arrays.values())
    }
    error = refused(rebuild(tmp_path / "infos.npz", consistent))
    assert error.member == "infos.json"
    consistent["infos.json"] = json.dumps(rollout.infos[:-1]).encode()
    assert load(rebuild(tmp_path / "ok.npz", consistent)) == rollout.replace(
        states=rollout.states[:-1],
        obses=rollout.obses[:-1],
        dones=rollout.dones[:-1],
        rews=rollout.rews[:-1],
        infos=rollout.infos[:-1],
        truncated=truncated[:-1],
        final_values=final_values[:-1],
        model_outs={k: a[:-1] for k, a in rollout.model_outs.arrays.items()},
    )


@pytest.mark.parametrize(
    ("changes", "member"),
    [
        ({"num_steps": T + 1}, None),
        ({"num_steps": T - 1}, None),
        ({"batch_size": B + 1}, None),
        ({"spec__obs_shape": [5]}, "obses.npy"),
        ({"spec__obs_shape": [2, 2]}, "obses.npy"),
        ({"spec__obs_dtype": "int32"}, "obses.npy"),
        ({"spec__state_shape": [1]}, None),
        ({"spec__has_truncation": False}, "truncated.npy"),
        ({"model_output_keys": ["actions", "critic", "log_probs", "actor"]}, "model_outs/0.npy"),
        ({"model_output_keys": ["critic", "actions", "log_probs"]}, "metadata.json"),
        ({"spec__model_outputs__actor__shape": [4]}, None),
    ],
)
def test_metadata_that_lies_about_shapes(
    tmp_path: Path, good: Path, changes: dict[str, Any], member: str | None
) -> None:
    path = rebuild(tmp_path / "lie.npz", with_metadata(members(good), **changes))
    error = refused(path)
    if member is not None:
        assert error.member == member, str(error)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (b"", "JSON|Expecting"),
        (b"[]", "JSON object"),
        (b"\xff\xfe{}", "utf-8"),
        (b'{"format": "other"}', "not a trajkit rollout file"),
        (b'{"format": "trajkit.rollout", "format_version": 6}', "newer than this trajkit"),
        (b'{"format": "trajkit.rollout", "format_version": 0}', "positive integer"),
        (b'{"format": "trajkit.rollout", "format_version": "1"}', "positive integer"),
        (b'{"format": "trajkit.rollout", "format_version": true}', "positive integer"),
        (b'{"format": "trajkit.rollout", "format_version": 1}', "invalid metadata"),
        (b'{"format": "trajkit.rollout", "format": "trajkit.rollout"}', "duplicate key"),
        (b'{"format": NaN}', "NaN"),
        (b"[" * 100_000, "nested too deeply|Expecting"),
    ],
)
def test_bad_metadata_json(tmp_path: Path, good: Path, text: bytes, match: str) -> None:
    path = rebuild(tmp_path / "m.npz", {**members(good), "metadata.json": text})
    error = refused(path)
    assert error.member == "metadata.json"
    assert pytest.importorskip("re").search(match, str(error)), str(error)


def test_metadata_with_extra_fields_or_loose_types(tmp_path: Path, good: Path) -> None:
    contents = members(good)
    for changes in (
        {"comment": "hello"},
        {"num_steps": float(T)},
        {"num_steps": str(T)},
        {"spec__obs_dtype": "f4"},
        {"spec__obs_shape": [-4]},
        {"spec__model_outputs__critic__dtype": "float64"},
    ):
        error = refused(rebuild(tmp_path / "m.npz", with_metadata(contents, **changes)))
        assert "invalid metadata" in str(error), changes


def test_oversized_metadata_is_refused_before_reading(tmp_path: Path, good: Path) -> None:
    contents = members(good)
    meta = json.loads(contents["metadata.json"])
    meta["padding"] = "x" * (2 << 20)
    path = rebuild(tmp_path / "m.npz", {**contents, "metadata.json": json.dumps(meta).encode()})
    assert "limit for metadata" in str(refused(path))


@pytest.mark.parametrize(
    "text",
    [
        b"[]",
        b'[[{"a": NaN}]]',
        b'{"rows": []}',
        b'[[{"a": 1e999}]]',
        b'[[{"a": 1, "a": 2}]]',
        b"[[1, 2]]",
        b"not json",
    ],
)
def test_bad_infos_json(tmp_path: Path, good: Path, text: bytes) -> None:
    path = rebuild(tmp_path / "i.npz", {**members(good), "infos.json": text})
    assert refused(path).member == "infos.json"


def test_values_the_rollout_refuses(tmp_path: Path, good: Path, rollout: trajkit.Rollout) -> None:
    contents = members(good)
    dones = rollout.dones.copy()
    dones[3, 1] = 2
    error = refused(rebuild(tmp_path / "d.npz", {**contents, "dones.npy": npy(dones)}))
    assert error.member == "dones.npy"
    assert "dones must hold only 0 and 1" in str(error)
    actions = rollout.model_outs.arrays["actions"].copy()
    actions[0, 0] = 99
    error = refused(rebuild(tmp_path / "a.npz", {**contents, "model_outs/1.npy": npy(actions)}))
    assert "actions" in str(error)
    rews = rollout.rews.copy()
    rews[1, 1] = np.nan
    assert "finite" in str(
        refused(rebuild(tmp_path / "r.npz", {**contents, "rews.npy": npy(rews)}))
    )


# ----------------------------------------------------------------------------- npy headers


def test_bad_npy_headers(tmp_path: Path, good: Path, rollout: trajkit.Rollout) -> None:
    contents = members(good)
    rews = rollout.rews
    data = rews.tobytes()
    fortran = npy_header(rews.shape, "<f4", fortran=True) + np.asfortranarray(rews).tobytes("F")
    v3 = bytearray(npy(rews))
    v3[6] = 3
    cases = {
        "fortran": (fortran, "Fortran"),
        "version 3": (bytes(v3), "version 3.0"),
        "magic": (b"XNUMPY" + npy(rews)[6:], "magic"),
        "big-endian": (npy_header(rews.shape, ">f4") + rews.astype(">f4").tobytes(), "dtype"),
        "float64": (npy(rews.astype(np.float64)), "dtype <f8"),
        "int32": (npy_header(rews.shape, "<i4") + data, "dtype <i4"),
        "structured": (npy_header(rews.shape, "|V4") + data, "dtype"),
        "3-D": (npy_header((T, B, 1), "<f4") + data, "shape"),
        "long header": (b"\x93NUMPY\x01\x00\xff\xff" + data, "longer than allowed"),
        "garbage dict": (b"\x93NUMPY\x01\x00\x10\x00" + b"{'descr': oops}\n" + data, "malformed"),
    }
    for label, (blob, match) in cases.items():
        for compress in (False, True):
            path = rebuild(tmp_path / "h.npz", {**contents, "rews.npy": blob}, compress=compress)
            error = refused(path)
            assert error.member == "rews.npy", label
            assert match in str(error), (label, str(error))


# ---------------------------------------------------------------------- sizes, bombs, zips


def peak_bytes_of(fn: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


def test_a_header_declaring_10_to_the_11_rows_is_refused_without_allocating(
    tmp_path: Path, good: Path
) -> None:
    contents = members(good)
    rows = 10**11
    huge = npy_header((rows, B), "<f4")
    real_size = len(contents["rews.npy"])
    lying = (huge + bytes(real_size))[:real_size]
    path = rebuild(tmp_path / "h.npz", {**contents, "rews.npy": lying})

    def check() -> None:
        assert "shape (100000000000, 2)" in str(refused(path))

    assert peak_bytes_of(check) < 8 << 20
    # The metadata agrees with the header: refused by the size limit, or by the member sizes.
    agreeing = with_metadata({**contents, "rews.npy": lying}, num_steps=rows - 1)
    path = rebuild(tmp_path / "h2.npz", agreeing)
    assert peak_bytes_of(lambda: refused(path)) < 8 << 20
    assert "over the limit" in str(refused(path))
    assert "declares" in str(refused(path, max_bytes=None))
    with pytest.raises(RolloutFileError, match="over the limit"):
        read_metadata(path)


def zeros_deflated(header: bytes, prefix: bytes, zeros: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = [packer.compress(header + prefix)]
    chunk = bytes(1 << 20)
    for _ in range(zeros >> 20):
        out.append(packer.compress(chunk))
    out.append(packer.flush())
    return b"".join(out)


BOMB = 64 << 20  # inflates to 64 MiB; compressed it is ~64 KiB


def test_an_honest_deflate_bomb_is_refused_before_inflating(tmp_path: Path, good: Path) -> None:
    contents = members(good)
    width = BOMB // ((T + 1) * B)
    header = npy_header((T + 1, B, width), "|u1")
    meta = with_metadata(contents, spec__obs_shape=[width], spec__obs_dtype="uint8")
    entries = [Entry(n, d) for n, d in meta.items() if n != "obses.npy"]
    bomb = Entry(
        "obses.npy",
        data=b"",
        method=zipfile.ZIP_DEFLATED,
        raw=zeros_deflated(header, b"", BOMB),
        file_size=len(header) + BOMB,
        crc=0,
    )
    path = tmp_path / "bomb.npz"
    path.write_bytes(build_zip([entries[0], bomb, *entries[1:]]))
    assert path.stat().st_size < 1 << 20

    def check() -> None:
        assert "over the limit" in str(refused(path, max_bytes=16 << 20))

    assert peak_bytes_of(check) < 4 << 20


def test_a_lying_deflate_bomb_is_refused_without_inflating_it(tmp_path: Path, good: Path) -> None:
    """The directory declares the honest size and CRC, but the stream inflates far beyond."""
    contents = members(good)
    honest = contents["obses.npy"]
    entries = [Entry(n, d) for n, d in contents.items() if n != "obses.npy"]
    bomb = Entry(
        "obses.npy",
        data=honest,
        method=zipfile.ZIP_DEFLATED,
        raw=zeros_deflated(honest, b"", BOMB),
    )
    path = tmp_path / "bomb.npz"
    path.write_bytes(build_zip([entries[0], bomb, *entries[1:]]))

    def check() -> None:
        error = refused(path)
        assert error.member == "obses.npy"
        assert "inflates to more than the declared" in str(error)

    assert peak_bytes_of(check) < 8 << 20


def test_a_deflate_stream_shorter_than_declared_is_refused(tmp_path: Path, good: Path) -> None:
    contents = members(good)
    honest = contents["obses.npy"]
    entries = [Entry(n, d) for n, d in contents.items() if n != "obses.npy"]
    short = Entry(
        "obses.npy",
        data=honest,
        method=zipfile.ZIP_DEFLATED,
        raw=zlib.compress(honest[:-10], 6)[2:-4],  # the raw deflate stream of 10 bytes fewer
    )
    path = tmp_path / "short.npz"
    path.write_bytes(build_zip([entries[0], short, *entries[1:]]))
    assert refused(path).member == "obses.npy"


def test_zip_features_the_format_forbids(tmp_path: Path, good: Path) -> None:
    contents = members(good)
    entries = [Entry(n, d) for n, d in contents.items()]
    encrypted = [*entries[:2], Entry("obses.npy", contents["obses.npy"], flags=1), *entries[3:]]
    path = tmp_path / "enc.npz"
    path.write_bytes(build_zip(encrypted))
    assert "encrypted" in str(refused(path))
    mismatch = [*entries[:2], Entry("obses.npy", contents["obses.npy"], file_size=12), *entries[3:]]
    path.write_bytes(build_zip(mismatch))
    assert refused(path).member == "obses.npy"
    bz = tmp_path / "bz.npz"
    with zipfile.ZipFile(bz, "w", zipfile.ZIP_BZIP2) as archive:
        for name, data in contents.items():
            archive.writestr(name, data)
    assert "compression method 12" in str(refused(bz))


def test_overlapping_members_are_refused(tmp_path: Path, good: Path) -> None:
    """A member whose data hides another member's record (the 'overlap' zip-bomb trick)."""
    contents = members(good)
    hidden = local_record(Entry("rews.npy", contents["rews.npy"]))
    obses = contents["obses.npy"]
    header_len = len(npy_header((T + 1, B, 4), "<f4"))
    assert len(hidden) <= len(obses) - header_len
    carrier = obses[:header_len] + hidden + obses[header_len + len(hidden) :]
    entries = [Entry(n, carrier if n == "obses.npy" else d) for n, d in contents.items()]
    rews = entries.pop([e.name for e in entries].index("rews.npy"))
    before_obses = sum(
        len(local_record(e)) for e in entries[: [e.name for e in entries].index("obses.npy")]
    )
    offset = before_obses + 30 + len(b"obses.npy") + header_len
    path = tmp_path / "overlap.npz"
    path.write_bytes(build_zip(entries, [(rews, offset)]))
    assert "overlaps" in str(refused(path))


# ------------------------------------------------------------------- archives of any size


def test_archives_with_thousands_of_members_are_checked_in_linear_time(tmp_path: Path) -> None:
    """Issue 12: duplicate and member-set checks were quadratic (40,000 entries took 11.7 s)."""
    r = example_rollout(num_steps=2, num_envs=1, keys=())
    outs = {f"k{i}": np.zeros((3, 1), np.float32) for i in range(2000)}
    path = tmp_path / "wide.npz"
    save(r.replace(model_outs=outs), path)  # _prepare read model_outs.arrays once per key
    assert len(read_metadata(path).model_output_keys) == 2000
    assert list(load(path, mmap=True).model_outs.keys()) == list(outs)
    good = tmp_path / "good.npz"
    save(r, good)
    extra = {**members(good), **{f"x{i}": b"" for i in range(10_000)}}
    error = refused(rebuild(tmp_path / "many.npz", extra))
    assert error.member == "x0"
    assert "x7 and 9992 more" in str(error)
    assert len(str(error)) < 1000
    duplicated = [Entry(n, d) for n, d in members(good).items()]
    duplicated += [Entry(f"y{i}", b"") for i in range(10_000)] + [Entry("y9999", b"")]
    dup = tmp_path / "dup.npz"
    dup.write_bytes(build_zip(duplicated))
    error = refused(dup)
    assert error.member == "y9999"
    assert "more than once" in str(error)


# ----------------------------------------------------- JSON members: memory and shared rules


def with_infos(good: Path, text: bytes, *, compress: bool = True, size: int | None = None) -> bytes:
    """The good file with this infos.json, deflated, its declared size optionally a lie."""
    entries = [Entry(n, d) for n, d in members(good).items() if n != "infos.json"]
    infos = Entry("infos.json", text, zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
    infos.file_size = size
    return build_zip([*entries, infos])


def test_a_json_member_declaring_4_gb_is_refused_without_allocating_it(
    tmp_path: Path, good: Path
) -> None:
    """Issue 12: the reader zero-filled a buffer of the declared size (4.1 GB, 8.7 s)."""
    path = tmp_path / "big.npz"
    path.write_bytes(with_infos(good, b"[" + b" " * 100_000, size=4_000_000_000))
    assert path.stat().st_size < 16 << 10

    def check() -> None:
        error = refused(path)
        assert error.member == "infos.json"
        assert (
            "decoding it would take more than 536870912 bytes of memory (counted on its "
            "declared size, before decoding)" in str(error)
        )
        error = refused(path, max_bytes=None)  # no budget: read as it arrives, and it ends early
        assert "truncated" in str(error)

    assert peak_bytes_of(check) < 2 << 20


def dense(count: int) -> bytes:
    """Honest infos (T=16, B=2) whose infos[0][0] holds `count` empty objects."""
    rows: list[list[dict[str, Any]]] = [[{} for _ in range(B)] for _ in range(T)]
    text = json.dumps(rows, separators=(",", ":")).encode()
    return text.replace(b"{}", b'{"a":[' + b",".join([b"{}"] * count) + b"]}", 1)


def test_densely_nested_infos_are_refused_before_decoding(tmp_path: Path, good: Path) -> None:
    """Issue 12: 40 Mi empty objects in a 124 KB file took 3.2 GB (26x the JSON) to load.

    The JSON budget counts every `{` (a dict, 192 bytes) as the bytes arrive: with
    `max_bytes=16 MiB` (a budget of 64 MiB) 400,000 empty objects are refused before a byte is
    decoded, by `load` and by `save` alike; at the default budget they load.
    """
    text = dense(400_000)  # 1.2 MB of JSON in a few KB
    path = tmp_path / "dense.npz"
    path.write_bytes(with_infos(good, text))
    assert path.stat().st_size < 64 << 10

    def check() -> None:
        error = refused(path, max_bytes=16 << 20)
        assert error.member == "infos.json"
        assert "decoding it would take more than 67108864 bytes of memory" in str(error)

    assert peak_bytes_of(check) < 2 * len(text) + (1 << 20)  # the bytes, never their objects
    assert len(load(path).infos[0][0]["a"]) == 400_000
    r = example_rollout(num_steps=T, num_envs=B, truncation=True)
    infos = r.infos
    infos[0][0] = {"a": [{} for _ in range(400_000)]}
    target = tmp_path / "x.npz"
    target.write_bytes(b"old")
    with pytest.raises(ValueError, match=r"^infos.json would take \d+ bytes of memory to decode"):
        save(r.replace(infos=infos), target, max_bytes=16 << 20)  # the writer refuses the same
    assert target.read_bytes() == b"old"


def test_nested_infos_within_the_limit_load_in_memory_proportional_to_their_size(
    tmp_path: Path, rollout: trajkit.Rollout
) -> None:
    limit = 4096 + 400_000 // 16
    infos = rollout.infos
    infos[0][0] = {"pad": "x" * 400_000, "a": [{} for _ in range(limit - 200)]}
    r = rollout.replace(infos=infos)
    path = tmp_path / "r.npz"
    save(r, path, compress=True)
    size = len(json.dumps(infos, separators=(",", ":")))
    loaded: list[trajkit.Rollout] = []
    peak = peak_bytes_of(lambda: loaded.append(load(path)))
    assert loaded[0] == r
    assert peak < 12 * size


def lone_surrogate_infos() -> bytes:
    return json.dumps([[{"k": "ok"}, {"k": "\ud800"}]] + [[{}, {}]] * (T - 1)).encode()


def nested_infos(levels: int) -> list[list[dict[str, Any]]]:
    """Infos whose infos[1][0] nests `levels` containers, itself included."""
    info: Any = {}
    for i in range(levels - 1):  # lists and dicts in turn, a dict outermost
        info = {"a": info} if (levels - 2 - i) % 2 == 0 else [info]
    rows: list[list[dict[str, Any]]] = [[{}, {}] for _ in range(T)]
    rows[1][0] = info
    return rows


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


@pytest.mark.parametrize("levels", [60, 64])
def test_infos_nested_to_the_limit_round_trip(
    tmp_path: Path, rollout: trajkit.Rollout, levels: int
) -> None:
    infos = nested_infos(levels)
    assert depth_of(infos[1][0]) == levels
    r = rollout.replace(infos=infos)
    save(r, tmp_path / "r.npz")
    assert load(tmp_path / "r.npz") == r


def test_the_reader_refuses_exactly_what_the_writer_refuses(
    tmp_path: Path, good: Path, rollout: trajkit.Rollout
) -> None:
    """Issue 12: load accepted infos that save refused, so save(load(f)) failed."""
    deep = nested_infos(65)
    assert depth_of(deep[1][0]) == 65
    with pytest.raises(ValueError, match=r"infos\[1\]\[0\]\['a'\].* is nested more than 64"):
        save(rollout.replace(infos=deep), tmp_path / "w.npz")
    path = tmp_path / "deep.npz"
    path.write_bytes(with_infos(good, json.dumps(deep).encode()))
    assert "nests lists and dicts more than 64 levels deep" in str(refused(path))

    with pytest.raises(ValueError, match=r"infos\[0\]\[1\]\['k'\] is a str that is not valid"):
        save(rollout.replace(infos=json.loads(lone_surrogate_infos())), tmp_path / "w.npz")
    path.write_bytes(with_infos(good, lone_surrogate_infos()))
    error = refused(path)
    assert "infos[0][1]['k'] is a str that is not valid Unicode (lone surrogate)" in str(error)
    pair = lone_surrogate_infos().replace(b"\\ud800", b"\\ud83d\\ude00")
    path.write_bytes(with_infos(good, pair))
    assert load(path).infos[0][1] == {"k": "\U0001f600"}
    key = lone_surrogate_infos().replace(b'{"k": "\\ud800"}', b'{"\\udfff": 1}')
    path.write_bytes(with_infos(good, key))
    assert "infos[0][1] key '\\udfff' is a str that is not valid" in str(refused(path))


@pytest.mark.parametrize("limit", [None, 0, 10_000])
def test_integers_of_more_than_4300_digits_are_refused_naming_them(
    tmp_path: Path, good: Path, rollout: trajkit.Rollout, limit: int | None
) -> None:
    """Issue 12: a 4,301-digit int raised json's error without naming infos[t][b], and the
    limit depended on the process's sys.set_int_max_str_digits()."""
    import sys

    before = sys.get_int_max_str_digits()
    if limit is not None:
        sys.set_int_max_str_digits(limit)
    try:
        infos: list[list[dict[str, Any]]] = [[{}, {}] for _ in range(T)]
        infos[2][1] = {"n": [1, 10**4300]}
        with pytest.raises(ValueError, match=r"infos\[2\]\[1\]\['n'\]\[1\] is an integer of more"):
            save(rollout.replace(infos=infos), tmp_path / "w.npz")
        infos[2][1] = {"n": [1, 7777]}
        text = json.dumps(infos).encode().replace(b"7777", b"9" * 4301)
        path = tmp_path / "int.npz"
        path.write_bytes(with_infos(good, text))
        error = refused(path)
        assert error.member == "infos.json"
        assert "infos[2][1]['n'][1] is an integer of more than 4300 digits" in str(error)
        infos[2][1] = {"n": [1, 10**4299]}  # 4300 digits: stored and loaded back
        save(rollout.replace(infos=infos), tmp_path / "ok.npz")
        assert load(tmp_path / "ok.npz").infos[2][1]["n"][1] == 10**4299
    finally:
        sys.set_int_max_str_digits(before)


# ------------------------------------------------------------------ one exception, always


def test_a_memory_error_while_validating_is_a_refusal(
    tmp_path: Path, good: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 12: an 877 KB file declaring B=1e8 under a 1.2 GB limit let MemoryError escape
    from the validation of its values, outside the block that turned errors into refusals."""
    from trajkit._io import reader

    def exhausted(*args: object, **kwargs: object) -> trajkit.Rollout:
        raise MemoryError

    monkeypatch.setattr(reader, "Rollout", exhausted)
    for mmap in (False, True):
        error = refused(good, mmap=mmap)
        assert "out of memory while reading" in str(error)
        assert isinstance(error.__cause__, MemoryError)


def test_a_nul_byte_in_the_path_is_a_refusal(tmp_path: Path) -> None:
    with pytest.raises(RolloutFileError, match="cannot open: the path holds a NUL byte"):
        load(str(tmp_path / "a\0b.npz"))
    with pytest.raises(RolloutFileError, match="the path holds a NUL byte"):
        read_metadata(str(tmp_path / "a\0b.npz"))


# ------------------------------------------------------- no more lenient than the spec


@pytest.mark.parametrize(
    ("drop", "add", "match"),
    [
        ("min_steps", None, "spec: missing field\\(s\\) min_steps"),
        ("max_envs", None, "spec: missing field\\(s\\) max_envs"),
        ("state_dtype", None, "spec: missing field\\(s\\) state_dtype"),
        ("has_truncation", None, "spec: missing field\\(s\\) has_truncation"),
        (None, "obs_leaves", "spec: field\\(s\\) obs_leaves must be left out"),
    ],
)
def test_metadata_must_hold_every_field_save_writes(
    tmp_path: Path, good: Path, drop: str | None, add: str | None, match: str
) -> None:
    """Issue 12: the reader filled in the spec's defaults for fields missing from a file."""
    contents = members(good)
    meta = json.loads(contents["metadata.json"])
    if drop:
        del meta["spec"][drop]
    if add:
        meta["spec"][add] = None
    path = rebuild(tmp_path / "m.npz", {**contents, "metadata.json": json.dumps(meta).encode()})
    error = refused(path)
    assert error.member == "metadata.json"
    assert pytest.importorskip("re").search(match, str(error)), str(error)
    with pytest.raises(RolloutFileError, match=match):
        read_metadata(path)


def npy_with(header_dict: bytes, data: bytes, version: bytes = b"\x01\x00") -> bytes:
    """A .npy member with this header dict text, padded as NumPy pads it."""
    prefix = len(b"\x93NUMPY") + 2 + (2 if version == b"\x01\x00" else 4)
    text = header_dict + b" " * (-(prefix + len(header_dict) + 1) % 64) + b"\n"
    width = 2 if version == b"\x01\x00" else 4
    return b"\x93NUMPY" + version + len(text).to_bytes(width, "little") + text + data


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (b"{'descr': '=f4', 'fortran_order': False, 'shape': (16, 2), }", "has dtype =f4"),
        (b"{'descr': 'float32', 'fortran_order': False, 'shape': (16, 2), }", "has dtype float32"),
        (b"{'descr': 'f4', 'fortran_order': False, 'shape': (16, 2), }", "has dtype f4"),
        # NumPy warns of the deprecated alias 'a': found by the fuzz suite, with warnings as errors
        (b"{'descr': 'a4', 'fortran_order': False, 'shape': (16, 2), }", "has dtype a4"),
        (
            b"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (16, 2), }",
            "keys descr, fortran_order, shape once each",
        ),
        (b"{'descr': '<f4', 'fortran_order': False, 'shape': (16L, 2L), }", "malformed"),
        (b"{'descr': '<f4', 'fortran_order': 0, 'shape': (16, 2), }", "not a valid bool: 0"),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, True), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': [16, 2], }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, -2), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, 2), 'x': 1}", "once each"),
        (
            b"{'descr': b'<f4', 'fortran_order': False, 'shape': (16, 2), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, 2), }\n", "one line"),
        (b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, 2), }\xe9", "not ASCII"),
        (b"dict(descr='<f4', fortran_order=False, shape=(16, 2))", "not a dict literal"),
        (b"{'descr': '<f4', 'fortran_order': False, 'shape': 16, }", "shape is not valid: 16"),
        (b"{'descr': 'x7', 'fortran_order': False, 'shape': (16, 2), }", "not a valid dtype"),
        # Issue 26: Python's syntax accepted these, the format's page does not.
        (
            b"{'descr': '<' 'f4', 'fortran_order': False, 'shape': (16, 2), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': '\\x3cf4', 'fortran_order': False, 'shape': (16, 2), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (0x10, 0b10), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (1_6, 2), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (016, 2), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': u'<f4', 'fortran_order': False, 'shape': (16, 2), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr':\t'<f4', 'fortran_order': False, 'shape': (16, 2), }",
            "malformed .npy header: the header holds the control character '\\t' at column 9 "
            "(only printable ASCII and spaces: no tab, no carriage return)",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, 2), }\r",
            "the control character '\\r' at column 60",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': ((16, 2),), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (16 2), }",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        (
            b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, 2) } x",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
        # found by the fuzz suite: a header that ends where a value should be
        (b"{'descr': ", "malformed .npy header: not a dict literal as the format spells it"),
        (
            b"{'descr': '<f4', 'shape': (16",
            "malformed .npy header: not a dict literal as the format spells it",
        ),
    ],
)
def test_npy_headers_are_parsed_as_the_spec_says(
    tmp_path: Path, good: Path, rollout: trajkit.Rollout, header: bytes, match: str
) -> None:
    """Issue 12: NumPy's parser took '=f4' and 'float32', duplicate keys and Python-2 `16L`;
    issue 26: implicit concatenation, escapes, other integer spellings. NumPy reads the
    header now (issue 33), after it is matched against the format's spelling."""
    contents = members(good)
    for version in (b"\x01\x00", b"\x02\x00"):
        blob = npy_with(header, rollout.rews.tobytes(), version)
        path = rebuild(tmp_path / "h.npz", {**contents, "rews.npy": blob})
        error = refused(path)
        assert error.member == "rews.npy"
        assert match in str(error), str(error)
    honest = b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, 2), }"
    path = rebuild(
        tmp_path / "ok.npz", {**contents, "rews.npy": npy_with(honest, rollout.rews.tobytes())}
    )
    assert load(path) == rollout


@pytest.mark.parametrize(
    "header",
    [
        b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, 2)}",  # NumPy before 1.9
        b'{"descr": "<f4", "fortran_order": False, "shape": (16, 2), }',
        b"{'shape': (16, 2,), 'fortran_order': False, 'descr': '<f4'}",
        b"  {  'descr' :'<f4','fortran_order':False,'shape':(  16 ,2 ) , }  ",
    ],
)
def test_npy_headers_as_numpy_spells_them_load(
    tmp_path: Path, good: Path, rollout: trajkit.Rollout, header: bytes
) -> None:
    """The page allows any order, either quote, spaces and trailing commas: those still load."""
    blob = npy_with(header, rollout.rews.tobytes())
    path = rebuild(tmp_path / "ok.npz", {**members(good), "rews.npy": blob})
    assert load(path) == rollout


def test_a_header_of_many_dimensions_is_refused_early() -> None:
    from trajkit._io.npy import parse_npy_dict

    text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (" + b"1, " * 65 + b"), }\n"
    with pytest.raises(ValueError, match="a tuple or list of more than 64 items"):
        parse_npy_dict(text)


def test_a_member_name_with_a_nul_byte_is_refused(tmp_path: Path, good: Path) -> None:
    """Issue 12: zipfile cuts names at a NUL, so `states.npy\\x00evil` read as states.npy."""
    entries = [
        Entry("states.npy\x00evil" if n == "states.npy" else n, d) for n, d in members(good).items()
    ]
    path = tmp_path / "nul.npz"
    path.write_bytes(build_zip(entries))
    error = refused(path)
    assert error.member == "states.npy"
    assert "'states.npy\\x00evil' holds a NUL byte" in str(error)


def test_bool_bytes_other_than_0_and_1_are_refused(tmp_path: Path) -> None:
    """Issue 12: a bool array's byte 2 loaded as a value that is True yet not equal to True."""
    r = example_rollout(num_steps=T, num_envs=B)
    r = r.replace(obses=r.obses > 0)
    path = tmp_path / "b.npz"
    save(r, path)
    contents = members(path)
    blob = bytearray(contents["obses.npy"])
    blob[-1] = 2
    for compress in (False, True):
        bad = rebuild(
            tmp_path / "bad.npz", {**contents, "obses.npy": bytes(blob)}, compress=compress
        )
        for mmap in (False, True):
            error = refused(bad, mmap=mmap)
            assert error.member == "obses.npy"
            assert "a bool array holds bytes other than 0 and 1" in str(error)


@pytest.mark.parametrize(
    ("offset", "value", "match"),
    [
        (4, 1, "the end of central directory record's disk number is 1, not 0: a rollout file "
         "is one disk"),
        (6, 3, "the end of central directory record's central directory disk is 3, not 0"),
        (8, 2, "the end of central directory record's entry count on this disk is 2, but the "
         "central directory holds {n} entries (expected {n})"),
        (10, 99, "the end of central directory record's entry count is 99, but the central "
         "directory holds {n} entries (expected {n})"),
        (10, 0xFFFF, "entry count is 65535, but the central directory holds {n} entries"),
    ],
)  # fmt: skip
def test_an_end_record_naming_other_disks_or_counts_is_refused(
    tmp_path: Path, good: Path, offset: int, value: int, match: str
) -> None:
    """Issue 26: zipfile reads the directory by its size and ignores the disks and counts."""
    blob = bytearray(good.read_bytes())
    end = len(blob) - 22  # save writes no comment
    blob[end + offset : end + offset + 2] = value.to_bytes(2, "little")
    path = tmp_path / "end.npz"
    path.write_bytes(bytes(blob))
    assert match.format(n=len(members(good))) in str(refused(path))
    with pytest.raises(RolloutFileError, match="end of central directory record"):
        read_metadata(path)


@pytest.fixture
def zip64(tmp_path: Path, rollout: trajkit.Rollout, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A rollout file with ZIP64 end records, as save writes past 2 GiB of directory offset."""
    monkeypatch.setattr(zipfile, "ZIP64_LIMIT", 100)
    path = tmp_path / "zip64.npz"
    save(rollout, path)
    monkeypatch.undo()
    assert b"PK\x06\x06" in path.read_bytes()[-200:]
    return path


def test_zip64_end_records_load(zip64: Path, rollout: trajkit.Rollout, tmp_path: Path) -> None:
    assert load(zip64) == rollout
    blob = bytearray(zip64.read_bytes())
    end = len(blob) - 22
    blob[end + 8 : end + 12] = b"\xff\xff\xff\xff"  # the counts are in the ZIP64 record
    path = tmp_path / "ffff.npz"
    path.write_bytes(bytes(blob))
    assert load(path) == rollout


@pytest.mark.parametrize(
    ("where", "offset", "value", "match"),
    [
        ("record", 16, 1, "the ZIP64 end of central directory record's disk number is 1, not 0"),
        ("record", 20, 1, "ZIP64 end of central directory record's central directory disk is 1"),
        ("record", 24, 8, "ZIP64 end of central directory record's entry count on this disk is "
         "8, but the central directory holds {n} entries (expected {n})"),
        ("record", 32, 99, "ZIP64 end of central directory record's entry count is 99"),
        ("locator", 16, 0, "the ZIP64 end of central directory locator names disk 0 of 0; a "
         "rollout file is one disk"),
        ("locator", 4, 2, "zipfiles that span multiple disks are not supported"),  # zipfile's
    ],
)  # fmt: skip
def test_zip64_end_records_naming_other_disks_or_counts_are_refused(
    zip64: Path, tmp_path: Path, where: str, offset: int, value: int, match: str
) -> None:
    blob = bytearray(zip64.read_bytes())
    locator = len(blob) - 22 - 20
    start = locator if where == "locator" else locator - 56
    width = 8 if offset in (24, 32) else 4
    blob[start + offset : start + offset + width] = value.to_bytes(width, "little")
    path = tmp_path / "bad64.npz"
    path.write_bytes(bytes(blob))
    assert match.format(n=len(members(zip64))) in str(refused(path))


def test_bytes_after_the_end_record_are_refused(tmp_path: Path, good: Path) -> None:
    """Issue 12: zipfile ignores what follows the end of central directory record."""
    blob = good.read_bytes()
    path = tmp_path / "junk.npz"
    path.write_bytes(blob + b"junk")
    assert "4 bytes after the end of the ZIP archive" in str(refused(path))
    with pytest.raises(RolloutFileError, match="after the end of the ZIP archive"):
        read_metadata(path)
    path.write_bytes(blob[:-2] + b"\x10\x00" + b"a comment, 16 b.")  # a comment: no data
    assert load(path) == load(good)
    path.write_bytes(blob[:-2] + b"\x10\x00" + b"short")
    assert "comment runs past the end of the file" in str(refused(path))


def test_a_memory_mapped_rollout_holds_one_file_descriptor(tmp_path: Path) -> None:
    """Issue 12: each mapped member held a descriptor (8 for an ordinary file)."""
    r = example_rollout(num_steps=T, num_envs=B, truncation=True, nested=True)
    save(r, tmp_path / "r.npz")
    fds = Path("/proc/self/fd")
    if not fds.is_dir():  # pragma: no cover - Linux only
        pytest.skip("no /proc/self/fd")
    before = len(list(fds.iterdir()))
    loaded = load(tmp_path / "r.npz", mmap=True)
    assert len(list(fds.iterdir())) - before == 1
    assert loaded == r
    base = loaded.obses["image"]
    while isinstance(base.base, np.ndarray):
        base = base.base
    assert base.size == (tmp_path / "r.npz").stat().st_size  # a view of the one map of the file
    del loaded


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (b"[]", r'must be an object \{"entries"'),
        (b'{"entries": [], "x": 1}', r'must be an object \{"entries"'),
        (b'{"entries": [[0, 0]]}', r"entry 0 must be \[t, b, info\]"),
        (b'{"entries": [[0, true, {"a": 1}]]}', r"entry 0 must be \[t, b, info\]"),
        (b'{"entries": [[0, 9, {"a": 1}]]}', r"entry 0 is for step 0 of env 9, outside"),
        (b'{"entries": [[-1, 0, {"a": 1}]]}', r"entry 0 is for step -1 of env 0, outside"),
        (b'{"entries": [[1, 0, {"a": 1}], [0, 1, {"a": 1}]]}', r"entry 1 .* out of order"),
        (b'{"entries": [[1, 0, {"a": 1}], [1, 0, {"b": 1}]]}', r"entry 1 .* repeated"),
        (b'{"entries": [[1, 0, {}]]}', r"entry 0 holds an empty info"),
        (b'{"entries": [[0, 0, {"a": NaN}]]}', r"NaN|not a finite|constant"),
        (b'{"entries": [[0, 0, {"a": "\\ud800"}]]}', r"infos\[0\]\[0\]\['a'\]"),
        (b'{"entries": [[0, 0, {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}]]}", r"more than"),
    ],
)
def test_bad_sparse_infos_json(tmp_path: Path, text: bytes, match: str) -> None:
    # format version 3: infos.json lists the non-empty infos only
    r = example_rollout(num_steps=T, num_envs=B, truncation=True)
    bare = trajkit.Rollout(
        r.states, r.obses, r.rews, r.dones, None, r.model_outs,
        truncated=r.truncated, final_values=r.final_values,
    )  # fmt: skip
    save(bare, tmp_path / "sparse.npz")
    assert trajkit.read_metadata(tmp_path / "sparse.npz").format_version == 3
    path = rebuild(tmp_path / "i.npz", {**members(tmp_path / "sparse.npz"), "infos.json": text})
    error = refused(path)
    assert error.member == "infos.json"
    assert re.search(match, str(error)), str(error)


@pytest.mark.parametrize("levels", [64, 65])
def test_sparse_infos_that_save_refuses_do_not_load(levels: int) -> None:
    # The reader's check before decoding counts up to one entry per 12 bytes; after decoding
    # it applies the writer's rule to the entries there are, so that whatever loads saves.
    from trajkit._io.infos import sparse_infos_from_json, sparse_infos_to_json

    rows = nested_infos(levels)
    text = json.dumps({"entries": [[1, 0, rows[1][0]]]}, separators=(",", ":")).encode()
    if levels == 64:
        assert sparse_infos_to_json(rows) == text
        assert sparse_infos_from_json(text, T, B) == rows
        return
    with pytest.raises(ValueError, match=r"infos\[1\]\[0\]\['a'\].* is nested more than 64"):
        sparse_infos_to_json(rows)
    with pytest.raises(ValueError, match=r"^infos\.json nests lists and dicts more than 64 levels"):
        sparse_infos_from_json(text, T, B)


def test_only_short_npy_headers_and_paths_are_remembered() -> None:
    # Parsed headers and leaf paths are cached (files of one structure repeat them), but only
    # short ones: a hostile file's 64 KiB header of padding is parsed and forgotten.
    from trajkit._core import tree
    from trajkit._io import npy

    short = b"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }" + b" " * 10 + b"\n"
    long = short[:-1] + b" " * 1000 + b"\n"
    assert npy.parse_npy_dict(short) == npy.parse_npy_dict(long) == ("<f4", False, (3, 2))
    cached = npy._parse_npy_cached.cache_info().currsize
    npy.parse_npy_dict(long[:-1] + b" \n")
    assert npy._parse_npy_cached.cache_info().currsize == cached
    path = "obses" + "['a']" * 100
    assert tree.parse_path(path, "obses") == ("a",) * 100
    assert tree._parse_path_cached.cache_info().currsize <= 256
    before = tree._parse_path_cached.cache_info().currsize
    tree.parse_path(path + "[0]", "obses")
    assert tree._parse_path_cached.cache_info().currsize == before
