"""Fuzzing the reader with mutations of real saved files.

Each example takes a file that `trajkit.save` wrote and damages it, either as bytes (aimed at the
ZIP records: local headers, the central directory, the end records; at `.npy` headers, JSON
members and array data) or member by member, rebuilding a well-formed archive around a mutated
`metadata.json`, `infos.json`, `.npy` header or array, so that the mutation gets past the
CRC-32s to the checks behind them. For every example:

- `load` (read and memory-mapped) and `read_metadata` either succeed or raise
  `RolloutFileError`: nothing else ever escapes;
- whatever loads passes `Rollout.revalidate()`, saves again, and loads back equal
  (`save(load(f))` works and round-trips);
- the memory that loading allocates (tracemalloc's peak) stays within a generous multiple of the
  file's size.

The examples are deterministic: example `i` of seed `s` draws from `numpy.random.default_rng([s,
i])`, so a failure names the seed and the example that reproduce it. The default budget runs in a
few seconds; a longer run (nightly) sets the number of examples per test:

    TRAJKIT_FUZZ_EXAMPLES=100000 TRAJKIT_FUZZ_SEED=7 pytest tests/io/test_fuzz.py

A fifth test saves large rollouts, compressed or not (zeros, random data and long runs, every
member kind, sizes on both sides of the reader's and zlib's buffer sizes), checks that each
loads back equal, then damages it once as the byte mutations do. It runs one example per 50
of the others (at least 4), of files up to `TRAJKIT_FUZZ_MAX_MB` MiB of data (2 by default; 32
in the nightly run).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import struct
import tracemalloc
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import trajkit
from tests.io.helpers import KINDS, PATTERNS, rollout_with
from trajkit import RolloutFileError, load, read_metadata, save
from trajkit._io.stream import IO_CHUNK
from trajkit._models.spec import SUPPORTED_DTYPES
from trajkit.testing import example_rollout

EXAMPLES = int(os.environ.get("TRAJKIT_FUZZ_EXAMPLES", "200"))
"""Examples per fuzz test (there are four): a few seconds in all by default."""

SEED = int(os.environ.get("TRAJKIT_FUZZ_SEED", "0"))

LARGE_EXAMPLES = max(4, EXAMPLES // 50)
"""Examples of the large-file test."""

LARGE_MAX_BYTES = int(os.environ.get("TRAJKIT_FUZZ_MAX_MB", "2")) << 20
"""The most bytes of data in the large member of a large-file example."""

MEMORY_FACTOR = 64  # loading may allocate this many times the file's size ...
MEMORY_SLACK = 1 << 20  # ... plus this much (pydantic, NumPy and zipfile bookkeeping)

Rng = np.random.Generator

INTERESTING_INTS = (0, 1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


# ------------------------------------------------------------------------------- the corpus


def corpus_rollouts() -> dict[str, trajkit.Rollout]:
    """Small rollouts covering the format: flat and nested, every dtype family, T = 0, infos."""
    r = example_rollout(num_steps=6, num_envs=2, truncation=True, seed=3)
    infos = r.infos
    infos[0][0] = {"episode": {"r": 1.5, "l": 7}, "s": "é", "list": [1, None, True]}
    bools = example_rollout(num_steps=3, num_envs=3, keys=("critic",))
    return {
        "flat": r.replace(infos=infos),
        "nested": example_rollout(num_steps=4, num_envs=2, nested=True, seed=5),
        "bool-uint8": bools.replace(
            obses=bools.obses > 0,
            model_outs={"critic": bools.model_outs.arrays["critic"], "u": bools.obses > 1},
        ),
        "empty": example_rollout(num_steps=0, num_envs=2, keys=("critic", "actions")),
        "box": example_rollout(num_steps=3, num_envs=1, action_kind="box", seed=9),
        # format version 3: infos.json lists only the non-empty infos
        "sparse": r.replace(infos=[[{}, {}]] * 5 + [[{}, {"lives": [1, 2]}]]),
    }


@dataclass(frozen=True)
class Seed:
    """A saved file and the regions of its bytes worth aiming at."""

    name: str
    data: bytes
    regions: dict[str, list[tuple[int, int]]]  # kind -> [(start, end)] byte ranges
    members: dict[str, bytes]  # uncompressed member contents, in archive order
    compressed: bool


def regions_of(data: bytes) -> dict[str, list[tuple[int, int]]]:
    """Byte ranges of the ZIP records, `.npy` headers, JSON members and array data."""
    regions: dict[str, list[tuple[int, int]]] = {
        "local": [],
        "npy": [],
        "json": [],
        "data": [],
        "central": [],
        "end": [],
    }
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        for info in infos:
            name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
            start = info.header_offset + 30 + name_len + extra_len
            regions["local"].append((info.header_offset, start))
            end = start + info.compress_size
            if info.compress_type != zipfile.ZIP_STORED:
                regions["data"].append((start, end))
            elif info.filename.endswith(".json"):
                regions["json"].append((start, end))
            else:
                header = 10 + int.from_bytes(data[start + 8 : start + 10], "little")
                regions["npy"].append((start, start + header))
                if end > start + header:
                    regions["data"].append((start + header, end))
    first_central = data.find(b"PK\x01\x02", max(end for _, end in regions["local"]))
    ends = [pos for pos in (data.rfind(b"PK\x06\x06"), data.rfind(b"PK\x05\x06")) if pos >= 0]
    regions["central"].append((first_central, min(ends)))
    regions["end"].append((min(ends), len(data)))
    return regions


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> list[Seed]:
    folder = tmp_path_factory.mktemp("corpus")
    out = []
    for name, rollout in corpus_rollouts().items():
        for compress in (False, True):
            path = folder / f"{name}-{compress}.npz"
            save(rollout, path, compress=compress)
            data = path.read_bytes()
            with zipfile.ZipFile(path) as archive:
                contents = {n: archive.read(n) for n in archive.namelist()}
            out.append(Seed(f"{name}-{compress}", data, regions_of(data), contents, compress))
    return out


# ---------------------------------------------------------------------------- byte mutations


def pick_position(rng: Rng, seed: Seed, size: int) -> int:
    kinds = [kind for kind, spans in seed.regions.items() if spans]
    kind = kinds[int(rng.integers(len(kinds)))]
    start, end = seed.regions[kind][int(rng.integers(len(seed.regions[kind])))]
    return int(rng.integers(start, max(start + 1, min(end, size))))


def mutate_bytes(rng: Rng, seed: Seed) -> tuple[bytes, str]:
    """One to three byte-level mutations aimed at the file's regions."""
    blob = bytearray(seed.data)
    done = []
    for _ in range(int(rng.integers(1, 4))):
        if not blob:
            break
        pos = min(pick_position(rng, seed, len(blob)), len(blob) - 1)
        op = str(rng.choice(["flip", "byte", "int16", "int32", "insert", "delete", "copy", "cut"]))
        if op == "flip":
            blob[pos] ^= 1 << int(rng.integers(8))
        elif op == "byte":
            blob[pos] = int(rng.choice([0, 1, 0x7F, 0x80, 0xFF, int(rng.integers(256))]))
        elif op in ("int16", "int32"):
            width = 2 if op == "int16" else 4
            old = int.from_bytes(blob[pos : pos + width], "little")
            new = int(rng.choice([*INTERESTING_INTS, old + 1, old - 1, old * 2, old // 2]))
            blob[pos : pos + width] = (new % (1 << (8 * width))).to_bytes(width, "little")
        elif op == "insert":
            blob[pos:pos] = rng.integers(0, 256, int(rng.integers(1, 17)), np.uint8).tobytes()
        elif op == "delete":
            del blob[pos : pos + int(rng.integers(1, 17))]
        elif op == "copy":
            src = int(rng.integers(len(blob)))
            chunk = blob[src : src + int(rng.integers(1, 64))]
            blob[pos : pos + len(chunk)] = chunk
        else:
            del blob[pos:]
        done.append(f"{op}@{pos}")
    if rng.random() < 0.05:
        blob += rng.integers(0, 256, int(rng.integers(1, 64)), np.uint8).tobytes()
        done.append("append")
    return bytes(blob), " ".join(done)


# -------------------------------------------------------------------------- member mutations


JSON_TOKENS = [
    b"-1", b"0", b"1", b"1.5", b"1e999", b"-0", b"9223372036854775808", b'"1"', b"true",
    b"null", b"[]", b"{}", b'"\\ud800"', b'"\\u0000"', b"NaN", b"Infinity", b'"\x1b[2J"',
    b"[" * 70 + b"]" * 70, b"9" * 4301, b'"' + b"x" * 100 + b'"', b'{"a":1,"a":2}',
]  # fmt: skip
JSON_BYTES = b'{}[]",:0123456789eE.-+ \\utnrfal\n'


def mutate_text(rng: Rng, text: bytes, alphabet: bytes, tokens: list[bytes]) -> bytes:
    """One mutation of JSON-like text: a token or byte swapped in, a span deleted or copied."""
    blob = bytearray(text)
    pos = int(rng.integers(len(blob) + 1))
    op = int(rng.integers(5))
    if op == 0 and blob:  # replace the number, string or literal at pos by a token
        match = re.compile(rb'-?[0-9][0-9.eE+-]*|"(?:[^"\\]|\\.)*"|true|false|null').search(
            bytes(blob), pos
        )
        if match:
            blob[match.start() : match.end()] = tokens[int(rng.integers(len(tokens)))]
    elif op == 1:
        blob[pos:pos] = bytes([alphabet[int(rng.integers(len(alphabet)))]])
    elif op == 2:
        del blob[pos : pos + int(rng.integers(1, 8))]
    elif op == 3 and blob:  # copy a span elsewhere: duplicate keys, members of lists
        src = int(rng.integers(len(blob)))
        blob[pos:pos] = blob[src : src + int(rng.integers(1, 40))]
    else:
        blob[pos:pos] = tokens[int(rng.integers(len(tokens)))]
    return bytes(blob)


NPY_TOKENS = [
    b"'=f4'", b"'float32'", b"'>f4'", b"'|O'", b"'<f8'", b"'|b1'", b"'<i4'", b"'|u1'",
    b"True", b"False", b"()", b"(0,)", b"(10000000000000, 2)", b"-1", b"16L", b"None",
    b"'descr'", b"'shape'", b"1", b"0", b"[1, 2]", b"'\\x00'",
]  # fmt: skip
NPY_BYTES = b"{}()[]',:0123456789 TrueFalse<>|=fiubO\n"


def mutate_npy(rng: Rng, blob: bytes) -> tuple[bytes, str]:
    """Mutate a `.npy` member: its header dict text, its header fields, or its data."""
    width = 2 if blob[6] == 1 else 4
    length = int.from_bytes(blob[8 : 8 + width], "little")
    head, text, data = (
        blob[: 8 + width],
        blob[8 + width : 8 + width + length],
        blob[8 + width + length :],
    )
    choice = int(rng.integers(4))
    if choice == 0:  # the header dict, its length field following
        text = mutate_text(rng, text, NPY_BYTES, NPY_TOKENS)
        if rng.random() < 0.8:
            head = head[:8] + (len(text) % (1 << (8 * width))).to_bytes(width, "little")
        return head + text + data, "npy header text"
    if choice == 1:  # the magic, the version, the length field
        raw = bytearray(head)
        pos = int(rng.integers(len(raw)))
        raw[pos] = int(rng.choice([0, 1, 2, 3, 0xFF, int(rng.integers(256))]))
        return bytes(raw) + text + data, f"npy prefix byte {pos}"
    if choice == 2 and data:  # the values: break a rule of Rollout (dones 2, NaN rewards, ...)
        raw = bytearray(data)
        pos = int(rng.integers(len(raw)))
        raw[pos] = int(rng.choice([0x02, 0x7F, 0xC0, 0xFF, int(rng.integers(256))]))
        return head + text + bytes(raw), f"npy data byte {pos}"
    cut = int(rng.integers(len(data) + 1))  # rows missing or extra
    extra = rng.integers(0, 256, int(rng.integers(1, 9)), np.uint8).tobytes()
    return head + text + (data[:cut] if rng.random() < 0.5 else data + extra), "npy data length"


def rebuild(members: dict[str, bytes], rng: Rng, compressed: bool) -> bytes:
    """A well-formed archive of these members (valid CRC-32s), stored or deflated."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            method = zipfile.ZIP_DEFLATED if compressed and rng.random() < 0.9 else 0
            if name == "metadata.json" and rng.random() < 0.9:
                method = zipfile.ZIP_STORED
            archive.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data, method)
    return out.getvalue()


def mutate_member(rng: Rng, seed: Seed, kind: str) -> tuple[bytes, str]:
    members = dict(seed.members)
    if kind == "json":
        name = str(rng.choice(["metadata.json", "infos.json"]))
        for _ in range(int(rng.integers(1, 3))):
            members[name] = mutate_text(rng, members[name], JSON_BYTES, JSON_TOKENS)
        what = f"{name} text"
    else:
        names = [n for n in members if n.endswith(".npy")]
        name = names[int(rng.integers(len(names)))]
        members[name], what = mutate_npy(rng, members[name])
        what = f"{name}: {what}"
    if rng.random() < 0.1:  # and the member set: one missing, renamed or added
        names = list(members)
        victim = names[int(rng.integers(1, len(names)))]
        op = int(rng.integers(3))
        if op == 0:
            del members[victim]
        elif op == 1:
            members[victim + "\x00x" if rng.random() < 0.5 else victim.upper()] = members.pop(
                victim
            )
        else:
            members[victim + ".extra"] = members[victim]
        what += f", member set ({op}: {victim})"
    return rebuild(members, rng, seed.compressed), what


# ------------------------------------------------------------------------------ the checks


@dataclass
class Outcome:
    loaded: int = 0
    refused: int = 0
    ratio: float = 0.0  # the largest peak allocation over the file's size
    peak: int = 0  # the largest peak allocation


def check(
    path: Path, blob: bytes, out: Path, outcome: Outcome, where: str, result: int = 0
) -> None:
    """Load the mutated file every way; only refusals or rollouts that round-trip.

    `result` is the size of the arrays the file held before it was damaged: a deflated file
    may hold far more than its size, and loading may take what the result holds."""
    if path.exists():
        path.unlink()  # a new file, never rewritten in place under a live memory map
    path.write_bytes(blob)
    with contextlib.suppress(RolloutFileError):
        read_metadata(path)
    results: list[trajkit.Rollout] = []
    tracemalloc.start()
    try:
        results.append(load(path))
    except RolloutFileError:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    limit = MEMORY_FACTOR * len(blob) + MEMORY_SLACK + 2 * result
    assert peak <= limit, f"{where}: {peak} bytes allocated"
    outcome.ratio = max(outcome.ratio, peak / max(1, len(blob)))
    outcome.peak = max(outcome.peak, peak)
    with contextlib.suppress(RolloutFileError):
        results.append(load(path, mmap=True, verify=True))
    with contextlib.suppress(RolloutFileError):
        results.append(load(path, mmap=True))  # the data is not checked: it may still differ
    if not results:
        outcome.refused += 1
        return
    outcome.loaded += 1
    for rollout in results:
        rollout.revalidate()
        if out.exists():
            out.unlink()
        save(rollout, out)
        assert load(out) == rollout, f"{where}: the saved copy differs"


def run(
    tmp_path: Path,
    seeds: list[Seed],
    mutate: Callable[[Rng, Seed], tuple[bytes, str]],
    family: int,
) -> Outcome:
    outcome = Outcome()
    for index in range(EXAMPLES):
        rng = np.random.default_rng([SEED, family, index])
        seed = seeds[int(rng.integers(len(seeds)))]
        blob, what = mutate(rng, seed)
        where = f"TRAJKIT_FUZZ_SEED={SEED}, family {family}, example {index}: {seed.name}, {what}"
        try:
            check(tmp_path / "m.npz", blob, tmp_path / "copy.npz", outcome, where)
        except Exception as exc:  # AssertionError included: say how to reproduce it
            (tmp_path / "failing.npz").write_bytes(blob)
            raise AssertionError(f"{where}: {type(exc).__name__}: {exc}") from exc
    print(
        f"family {family}: {outcome.loaded} loaded, {outcome.refused} refused; peak allocation "
        f"at most {outcome.peak} bytes, {outcome.ratio:.1f} times the file's size"
    )
    return outcome


def test_the_seeds_load_and_round_trip(tmp_path: Path, seeds: list[Seed]) -> None:
    for seed in seeds:
        outcome = Outcome()
        check(tmp_path / "s.npz", seed.data, tmp_path / "c.npz", outcome, seed.name)
        assert outcome.loaded == 1, seed.name
        assert set(seed.regions["npy"]) or seed.compressed


def test_fuzz_zip_records_and_raw_bytes(tmp_path: Path, seeds: list[Seed]) -> None:
    outcome = run(tmp_path, seeds, mutate_bytes, 0)
    assert outcome.refused > EXAMPLES // 4  # the mutations do reach the checks


def test_fuzz_json_members(tmp_path: Path, seeds: list[Seed]) -> None:
    outcome = run(tmp_path, seeds, lambda rng, seed: mutate_member(rng, seed, "json"), 1)
    assert outcome.refused > EXAMPLES // 4
    assert outcome.loaded > 0  # and some mutations are harmless (whitespace, equal values)


def test_fuzz_npy_members(tmp_path: Path, seeds: list[Seed]) -> None:
    outcome = run(tmp_path, seeds, lambda rng, seed: mutate_member(rng, seed, "npy"), 2)
    assert outcome.refused > EXAMPLES // 4
    assert outcome.loaded > 0


def mixed(rng: Rng, seed: Seed) -> tuple[bytes, str]:
    """A member mutation, then byte mutations of the rebuilt archive."""
    blob, what = mutate_member(rng, seed, str(rng.choice(["json", "npy"])))
    try:
        rebuilt = Seed(seed.name, blob, regions_of(blob), seed.members, seed.compressed)
    except (zipfile.BadZipFile, ValueError, struct.error, KeyError):
        return blob, what
    more, how = mutate_bytes(rng, rebuilt)
    return more, f"{what}, then {how}"


def test_fuzz_mixed(tmp_path: Path, seeds: list[Seed]) -> None:
    outcome = run(tmp_path, seeds, mixed, 3)
    assert outcome.refused > EXAMPLES // 4


# ------------------------------------------------------------------------------ large files


def large_size(rng: Rng) -> int:
    """A size of data near a multiple of a buffer size, or spread evenly on a log scale."""
    if rng.random() < 0.6:
        unit = int(rng.choice([IO_CHUNK, 1 << 20, 1 << 15, 1 << 16]))
        size = unit * int(rng.integers(1, max(2, LARGE_MAX_BYTES // unit + 1)))
        size += int(rng.integers(-300, 301))
    else:
        size = int(np.exp(rng.uniform(np.log(1 << 16), np.log(LARGE_MAX_BYTES))))
    return max(0, min(size, LARGE_MAX_BYTES))


def test_fuzz_large_and_compressed_files(tmp_path: Path) -> None:
    outcome = Outcome()
    for index in range(LARGE_EXAMPLES):
        rng = np.random.default_rng([SEED, 4, index])
        kind = KINDS[int(rng.integers(len(KINDS)))]
        pattern = PATTERNS[int(rng.integers(len(PATTERNS)))]
        dtype = SUPPORTED_DTYPES[int(rng.integers(len(SUPPORTED_DTYPES)))]
        compress = bool(rng.random() < 0.7)
        size = large_size(rng)
        where = (
            f"TRAJKIT_FUZZ_SEED={SEED}, TRAJKIT_FUZZ_MAX_MB={LARGE_MAX_BYTES >> 20}, large "
            f"example {index}: {kind} {pattern} {dtype} {size} bytes, compress={compress}"
        )
        rollout = rollout_with(kind, size, pattern, dtype, int(rng.integers(1 << 16)))
        path = tmp_path / "large.npz"
        save(rollout, path, compress=compress)
        try:
            assert load(path) == rollout, "loads back different"
            assert load(path, mmap=True, verify=True) == rollout, "maps back different"
            data = path.read_bytes()
            seed = Seed(kind, data, regions_of(data), {}, compress)
            blob, what = mutate_bytes(rng, seed)
            result = sum(int(m.nbytes) for m in read_metadata(path).arrays())
            path.unlink()
            check(
                tmp_path / "m.npz", blob, tmp_path / "copy.npz", outcome, f"{where}, {what}", result
            )
        except Exception as exc:
            raise AssertionError(f"{where}: {type(exc).__name__}: {exc}") from exc
    print(
        f"large files: {outcome.loaded} loaded after damage, {outcome.refused} refused; peak "
        f"allocation at most {outcome.peak} bytes, {outcome.ratio:.1f} times the file's size"
    )
