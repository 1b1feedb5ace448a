"""The JSON budget: one memory rule for JSON members, which `save` and `load` apply alike.

`JsonCost` counts what decoding a member takes as its bytes arrive; `load` refuses a member
over the budget (`max_bytes / 8`, at least 64 MiB) before decoding it, and `save` refuses to
write what `load` would refuse. How close the count is to the real peak is measured in a fresh
process by tests/io/test_memory.py.
"""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajkit
from trajkit._io.jsonbudget import JsonCost, json_budget

SMALL = 256 << 20  # a max_bytes whose JSON budget is the least one, 64 MiB
WIDE_EXTRA = 6  # a byte of a member holding non-ASCII or a `\u` escape costs this much more


def test_a_u_escape_makes_every_byte_count_as_wide() -> None:
    # `\u00e9` decodes to a character of up to 4 bytes in a `str`, like UTF-8 that is not ASCII.
    escaped = b'[{"k":"\\u00e9"}]'
    plain = b'[{"k":"xu00e9"}]'  # the same tokens and length, ASCII only
    assert JsonCost.of(escaped).bound - JsonCost.of(plain).bound == WIDE_EXTRA * len(escaped)
    utf8 = '[{"k":"é"}]'.encode()
    assert JsonCost.of(utf8).bound - JsonCost.of(b'[{"k":"ab"}]').bound == WIDE_EXTRA * len(utf8)


@pytest.mark.parametrize(
    ("first", "second", "wide"),
    [
        (b'[{"k":"\\', b'u00e9"}]', True),  # the escape straddles the pieces
        (b'[{"k":"\\', b'n00e9"}]', False),  # a backslash ends a piece, `\n` is no `\u`
        (b'[{"k":"x', b'u00e9"}]', False),  # a piece starts with `u`, no backslash before
        (b'[{"k":"\\u', b'00e9"}]', True),
    ],
)
def test_a_u_escape_is_found_across_pieces(first: bytes, second: bytes, wide: bool) -> None:
    cost = JsonCost()
    cost.add(first)
    cost.add(second)
    whole = first + second
    narrow = JsonCost.of(whole.replace(b"\\", b"x")).bound  # the same tokens, no escape
    assert cost.bound - narrow == (WIDE_EXTRA * len(whole) if wide else 0)


def test_a_repeated_key_costs_no_string_or_slot_in_the_memo() -> None:
    repeated = JsonCost.of(b'[{"lives":3},{"lives":3}]').bound
    distinct = JsonCost.of(b'[{"lives":3},{"livez":3}]').bound
    assert distinct - repeated == 48 + 2 * 32 + len(b"lives")  # memo slot, str, characters


def test_keys_inside_strings_and_split_keys_are_not_taken_for_repeats() -> None:
    inside = b'[{"a":"\\"k\\":1"},{"a":"\\"k\\":1"}]'  # "k": twice, inside strings
    cost = JsonCost.of(inside)
    assert cost.bound == cost._upper - (48 + 2 * 32 + 1)  # the second "a" only
    assert cost._keys == {b"a"}
    split = JsonCost()
    for piece in (b'[{"lives":3},{"li', b'ves":3}]'):  # the second key is cut in two
        split.add(piece)
    assert split.bound > JsonCost.of(b'[{"lives":3},{"lives":3}]').bound


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=24,
)


@settings(max_examples=60, deadline=None)
@given(
    value=json_values,
    cuts=st.lists(st.integers(1, 1 << 16), max_size=6),
    copies=st.integers(1, 400),
)
def test_the_bound_holds_what_decoding_takes_and_splits_only_raise_it(
    value: Any, cuts: list[int], copies: int
) -> None:
    data = json.dumps([value] * copies, ensure_ascii=bool(copies % 2)).encode()
    whole = JsonCost.of(data)
    pieces = JsonCost()
    start = 0
    for cut in sorted(cuts):
        pieces.add(data[start:cut])
        start = max(start, cut)
    pieces.add(data[start:])
    assert pieces.bound >= whole.bound >= JsonCost.least(len(data))
    tracemalloc.start()
    try:
        decoded = json.loads(data.decode())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert decoded == [value] * copies
    assert whole.bound >= peak + len(data)  # the bytes are held while they are decoded


infos_of_one_step = st.fixed_dictionaries(
    {"lives": st.integers(0, 5)},
    optional={
        "score": st.floats(-1e6, 1e6, allow_nan=False),
        "tag": st.text(max_size=6),
        "xs": st.lists(st.floats(0, 1), max_size=4),
        "TimeLimit.truncated": st.booleans(),
    },
)


def rollout_of(info: dict[str, Any], count: int, sparse: bool, leaves: int) -> trajkit.Rollout:
    """A rollout with `count` infos equal to `info`, every other one empty if `sparse`."""
    B = 8
    T = -(-count * (2 if sparse else 1) // B)
    rows: list[list[dict[str, Any]]] = [[{} for _ in range(B)] for _ in range(T)]
    for k in range(count):
        slot = 2 * k if sparse else k
        rows[slot // B][slot % B] = dict(info, step=k)
    obses = {f"leaf{i}": np.zeros((T + 1, B), np.float32) for i in range(leaves)}
    return trajkit.Rollout(
        obses=obses,
        states=np.zeros((T + 1, B, 0), np.float32),
        rews=np.zeros((T, B), np.float32),
        dones=np.zeros((T + 1, B), np.float32),
        infos=rows,
        model_outs={},
    )


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    info=infos_of_one_step,
    scale=st.floats(0.9, 1.1),
    compress=st.booleans(),
    sparse=st.booleans(),
    leaves=st.integers(1, 24),
)
def test_what_save_writes_load_reads_at_the_budget(
    tmp_path: Path, info: dict[str, Any], scale: float, compress: bool, sparse: bool, leaves: int
) -> None:
    """Infos sized to about the least JSON budget (64 MiB): either `save` refuses them, before
    writing and keeping the old file, or `load` with the same `max_bytes` reads them back."""
    budget = json_budget(SMALL)
    assert budget is not None
    sample = rollout_of(info, 2000, sparse, 1)
    path = tmp_path / "r.npz"
    trajkit.save(sample, path)
    with zipfile.ZipFile(path) as archive:
        per_info = JsonCost.of(archive.read("infos.json")).bound / 2000
    r = rollout_of(info, int(scale * budget / per_info), sparse, leaves)
    path.write_bytes(b"old")
    refusal = ""
    try:
        trajkit.save(r, path, compress=compress, max_bytes=SMALL)
    except ValueError as exc:
        refusal = str(exc)
    if refusal:
        assert refusal.startswith("infos.json would take")
        assert "over the JSON budget of 67108864 bytes" in refusal
        assert path.read_bytes() == b"old"
        assert scale > 0.95  # refused only near the budget
    else:
        assert trajkit.load(path, max_bytes=SMALL) == r


def test_save_refuses_what_load_refuses_at_its_defaults(tmp_path: Path) -> None:
    r = rollout_of({"a": [{}] * 50}, 8000, False, 1)  # 1.2 MB of JSON, 83 MB decoded
    path = tmp_path / "r.npz"
    path.write_bytes(b"old")
    with pytest.raises(
        ValueError,
        match=r"^infos.json would take \d+ bytes of memory to decode \(as load\(\) counts "
        r"it\), over the JSON budget of 67108864 bytes for max_bytes=8388608 \(max_bytes / 8, "
        r"at least 64 MiB\), so load\(\) would refuse the file",
    ):
        trajkit.save(r, path, max_bytes=8 << 20)
    assert path.read_bytes() == b"old"


@settings(max_examples=200)
@given(
    data=st.one_of(
        st.binary(max_size=2000),
        st.text(alphabet='{}[]:,"\\u0é a1', max_size=2000).map(str.encode),
    ),
    cuts=st.lists(st.integers(0, 2000), max_size=6),
)
def test_no_member_of_a_size_costs_more_than_its_most(data: bytes, cuts: list[int]) -> None:
    # The reader skips counting a member whose `most` is within the budget.
    pieces = JsonCost()
    start = 0
    for cut in sorted(cuts):
        pieces.add(data[start:cut])
        start = max(start, cut)
    pieces.add(data[start:])
    assert JsonCost.of(data).bound <= pieces.bound <= JsonCost.most(len(data))


@pytest.mark.parametrize("over", [False, True])
def test_the_reader_counts_a_member_only_if_its_size_allows_passing_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, over: bool
) -> None:
    path = tmp_path / "r.npz"
    trajkit.save(trajkit.load(_example(tmp_path)), path)
    with zipfile.ZipFile(path) as archive:  # the larger of the two JSON members
        size = max(archive.getinfo(name).file_size for name in ("metadata.json", "infos.json"))
    budget = JsonCost.most(size) - over  # at the member's most, or just below it
    counted: list[int] = []
    add = JsonCost.add

    def counting(self: JsonCost, piece: bytes) -> None:
        counted.append(len(piece))
        add(self, piece)

    monkeypatch.setattr(JsonCost, "add", counting)
    monkeypatch.setattr("trajkit._io.reader.json_budget", lambda max_bytes: budget)
    trajkit.load(path)
    assert bool(counted) == over


def _example(tmp_path: Path) -> Path:
    from trajkit.testing import example_rollout

    path = tmp_path / "example.npz"
    trajkit.save(example_rollout(num_steps=8, num_envs=2), path)
    return path
