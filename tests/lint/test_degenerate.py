"""Every check on degenerate but valid rollouts: where a check's evidence is absent, it is silent.

T = 0 and 1, B = 1, every row a done, no dones, a done at row 0 only, truncations everywhere,
constant and all-zero observations, nested observations, `final_obses`, one file and many,
with and without a recording: lint's per-file work (`lint_rollout`) and the dataset fold
(`LintFold`) with every check selected raise nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajkit import Rollout
from trajkit._core import tree as _tree
from trajkit._io.metadata import Recording, RolloutFileMetadata
from trajkit.lint.config import LintOptions
from trajkit.lint.registry import CHECKS, Finding
from trajkit.lint.run import LintFold, lint_rollout
from trajkit.testing import ACTION_KINDS, example_rollout, rollouts

Array = np.ndarray[Any, Any]

EVERY_CHECK = frozenset(CHECKS)


def _dones(pattern: str, drawn: Array) -> Array:
    """`[T+1, B]` dones: as drawn, every row, none, or row 0 only."""
    if pattern == "drawn":
        return drawn
    if pattern == "all":
        return np.ones_like(drawn)
    dones = np.zeros_like(drawn)
    if pattern == "row0":
        dones[0] = True
    return dones


@st.composite
def degenerate(draw: st.DrawFn, max_envs: int = 3) -> Rollout:
    """A valid rollout with T in [0, 5], an extreme done pattern and maybe constant obses."""
    r = draw(
        rollouts(
            min_steps=0,
            max_steps=5,
            max_envs=max_envs,
            truncation=None,
            nested=None,
            final_obs=None,
            action_kinds=ACTION_KINDS,
        )
    )
    dones = _dones(draw(st.sampled_from(["drawn", "all", "none", "row0"])), r.dones == 1)
    truncated = None
    if r.truncated is not None:  # truncations everywhere an episode ends, or some
        truncated = dones[1:].copy() if draw(st.booleans()) else dones[1:] & (r.truncated == 1)
    obses = r.obses
    constant = draw(st.sampled_from([None, 0, 7]))
    if constant is not None:
        obses = _tree.map_leaves(lambda leaf: np.full_like(leaf, constant), obses)
    finals = None
    if r.final_obses is not None:  # each episode end's final observation: the reset's, or 0
        ends = dones[1:]
        reset = draw(st.booleans())
        finals = _tree.map_leaves(
            lambda leaf: leaf[1:][ends].copy() if reset else np.zeros_like(leaf[1:][ends]), obses
        )
    return Rollout(
        states=r.states,
        obses=obses,
        rews=r.rews,
        dones=dones,
        infos=r.infos,
        model_outs=dict(r.model_outs.arrays),
        truncated=truncated,
        final_values=r.final_values,
        final_obses=finals,
    )


def _space(r: Rollout, kind: str) -> dict[str, Any] | None:
    """An action space the actions fit (`fit`) or not (`tight`), or none."""
    actions = r.model_outs.arrays.get("actions")
    if kind == "none" or actions is None:
        return None
    if actions.dtype.kind == "f":
        return {"type": "Box", "low": -1.0, "high": 1.0, "shape": list(actions.shape[2:])}
    if actions.ndim == 2:
        return {"type": "Discrete", "n": 1 if kind == "tight" else 8, "start": 0}
    nvec = np.full(actions.shape[2:], 1 if kind == "tight" else 8).tolist()
    return {"type": "MultiDiscrete", "nvec": nvec, "start": np.zeros_like(nvec).tolist()}


def _observation_space(obses: Any, kind: str) -> dict[str, Any] | None:
    """A space for `obses` (Dict and Tuple for nested ones): Box [0, 1], or by dtype."""
    if kind == "none":
        return None
    if isinstance(obses, dict):
        return {
            "type": "Dict",
            "spaces": {k: _observation_space(v, kind) for k, v in obses.items()},
        }
    if isinstance(obses, tuple):
        return {"type": "Tuple", "spaces": [_observation_space(v, kind) for v in obses]}
    shape = list(obses.shape[2:])
    if kind == "dtype" and obses.dtype == np.uint8:
        return {"type": "MultiBinary", "n": shape} if shape else {"type": "Discrete", "n": 256}
    return {"type": "Box", "low": 0.0, "high": 1.0, "shape": shape}


@st.composite
def metadata(draw: st.DrawFn, r: Rollout, index: int) -> RolloutFileMetadata | None:
    """The file's metadata: none, without a recording, or with a recording of varied claims."""
    kind = draw(st.sampled_from(["none", "plain", "recorded"]))
    if kind == "none":
        return None
    if kind == "plain":
        return RolloutFileMetadata.from_rollout(r)
    recording = Recording(
        id="rec",
        index=draw(st.sampled_from([index, 0])),  # 0 again: a recording reused
        num_envs=r.batch_size,
        seed=draw(st.sampled_from([None, 0])),
        autoreset_mode=draw(st.sampled_from(["NEXT_STEP", "SAME_STEP", "DISABLED"])),
        max_episode_steps=draw(st.sampled_from([None, 1, 2, 5])),
        action_space=_space(r, draw(st.sampled_from(["none", "fit", "tight"]))),
        observation_space=_observation_space(
            r.obses, draw(st.sampled_from(["none", "box", "dtype"]))
        ),
        wrappers=draw(st.sampled_from([[], ["NormalizeReward", "NormalizeObservation"]])),
    )
    return RolloutFileMetadata.from_rollout(r, recording=recording)


def lint_in_memory(
    files: list[tuple[Rollout, RolloutFileMetadata | None]], options: LintOptions
) -> list[Finding]:
    """`trajkit lint`'s per-file work and fold on in-memory files (replay aside).

    A check that raises fails the test: `lint_rollout` raises, and the fold, which reports a
    check's error and goes on, must have none to report.
    """
    fold = LintFold(options)
    found: list[Finding] = []
    for i, (r, metadata) in enumerate(files):
        found += fold.add(lint_rollout(r, f"r{i}.npz", metadata, options))
    found += fold.finish()
    assert fold.failures == []
    return found


@st.composite
def datasets(draw: st.DrawFn) -> list[tuple[Rollout, RolloutFileMetadata | None]]:
    files = draw(st.lists(degenerate(), min_size=1, max_size=3))
    return [(r, draw(metadata(r, i))) for i, r in enumerate(files)]


@settings(max_examples=150, deadline=None)
@given(datasets(), st.sampled_from([None, 1, 3]))
def test_every_check_is_silent_or_reports_on_degenerate_rollouts(
    files: list[tuple[Rollout, RolloutFileMetadata | None]], limit: int | None
) -> None:
    options = LintOptions(EVERY_CHECK, max_episode_steps=limit)
    for finding in lint_in_memory(files, options):
        assert finding.code in CHECKS


@settings(max_examples=60, deadline=None)
@given(st.lists(degenerate(max_envs=1), min_size=1, max_size=4))
def test_many_small_files_of_one_env(files: list[Rollout]) -> None:
    options = LintOptions(EVERY_CHECK, max_episode_steps=2)
    lint_in_memory([(r, None) for r in files], options)


def test_a_rollout_of_no_steps_gives_no_finding() -> None:
    r = example_rollout(num_steps=0)
    assert r.num_steps == 0
    assert lint_in_memory([(r, None), (r.copy(), None)], LintOptions(EVERY_CHECK)) == []


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["all", "none", "row0"])
@pytest.mark.parametrize("obs", ["drawn", "zeros", "nested", "image"])
def test_every_check_on_long_degenerate_rollouts(pattern: str, obs: str) -> None:
    """Long enough for every threshold (10,000 observations for TK201), with extreme dones."""
    r = example_rollout(
        num_steps=2_500,
        num_envs=4,
        truncation=True,
        nested=obs == "nested",
        final_obs=True,
        obs_shape=(6, 6, 3) if obs == "image" else (4,),
    )
    dones = _dones(pattern, r.dones == 1)
    obses = r.obses
    if obs in ("zeros", "image"):
        dtype = np.uint8 if obs == "image" else None
        obses = _tree.map_leaves(lambda leaf: np.zeros_like(leaf, dtype=dtype), obses)
    ends = dones[1:]
    r = r.replace(
        dones=dones,
        obses=obses,
        truncated=ends,  # every episode end a truncation
        final_obses=_tree.map_leaves(lambda leaf: leaf[1:][ends], obses),
    )
    recording = Recording(id="rec", index=0, num_envs=4, autoreset_mode="SAME_STEP")
    files = [(r, RolloutFileMetadata.from_rollout(r, recording=recording)), (r, None)]
    for limit in (None, 1):
        for finding in lint_in_memory(files, LintOptions(EVERY_CHECK, max_episode_steps=limit)):
            assert finding.code in CHECKS
