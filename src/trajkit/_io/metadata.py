"""The `metadata.json` member of a rollout file, and the member layout it implies.

The metadata declares T, B, the model-output keys (in order) and the rollout's `RolloutSpec`.
Every array member's name, dtype and shape follow from these, so a reader knows exactly what to
expect before it opens any array. See `docs/file-format.md` for the specification.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, ClassVar, Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator
from typing_extensions import Self

from trajkit._base.docstrings import described
from trajkit._base.version import __version__
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.rules import FIELD_RULES, TREE_FIELDS, TreeField
from trajkit._models.spec import RolloutSpec

__all__ = [
    "FORMAT_NAME",
    "FINAL_OBSES_VERSION",
    "FORMAT_VERSION",
    "INFOS_MEMBER",
    "MAX_METADATA_BYTES",
    "METADATA_MEMBER",
    "RECORDING_VERSION",
    "SPARSE_INFOS_VERSION",
    "ArrayMember",
    "Recording",
    "RolloutFileMetadata",
    "data_bytes",
    "member_names",
]

FORMAT_NAME: Final = "trajkit.rollout"
"""The value of `format` in every rollout file's metadata."""

FORMAT_VERSION: Final = 5
"""The newest format version this trajkit reads and writes.

Version 2 adds nested `obses` and `states` (one member per leaf), version 3 sparse infos,
version 4 the `recording` metadata, version 5 `final_obses` (the true final observations,
counted by `num_final_obses`). `trajkit.save` writes the oldest version that holds what the
rollout needs (version 1 for rollouts without nested fields, sparse infos, recording or final
observations), so that older readers still open them.
"""

_NESTED_VERSION: Final = 2  # the first version that stores nested fields
SPARSE_INFOS_VERSION: Final = 3  # the first version whose infos.json lists non-empty infos only
RECORDING_VERSION: Final = 4
"""The first format version whose metadata may hold a `recording`."""
FINAL_OBSES_VERSION: Final = 5
"""The first format version that stores `final_obses` (declared by `num_final_obses`)."""

METADATA_MEMBER = "metadata.json"
"""The name of the metadata member, always the first member of the archive."""

INFOS_MEMBER = "infos.json"
"""The name of the member holding the infos as UTF-8 JSON."""

MAX_METADATA_BYTES = 1 << 20
"""The largest `metadata.json` a reader accepts (1 MiB)."""


@dataclass(frozen=True)
class ArrayMember:
    """One `.npy` member of a rollout file, as the metadata declares it.

    Attributes:
        name: The member name in the archive, such as `"rews.npy"` or `"model_outs/0.npy"`.
        field: The `Rollout` field it holds (`"rews"`, `"model_outs"`, ...).
        key: The model-output key for `model_outs` members, else `None`.
        dtype: The canonical dtype name; stored little-endian.
        shape: The full shape, including `T+1` or `T` and `B`.
        path: For a leaf of nested `obses` or `states` (format version 2), its path in the
            field's structure, such as `('image',)`; else `None`.

    Examples:
        >>> m = ArrayMember("rews.npy", "rews", None, "float32", (4, 2))
        >>> m.nbytes, m.descr
        (32, '<f4')
    """

    name: str
    field: str
    key: str | None
    dtype: str
    shape: tuple[int, ...]
    path: tuple[str | int, ...] | None = None

    @property
    def nbytes(self) -> int:
        """The size of the array data, in bytes (without the `.npy` header)."""
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    @property
    def descr(self) -> str:
        """The `.npy` header `descr` the member must have, e.g. `'<f4'` or `'|u1'`."""
        return str(np.dtype(self.dtype).newbyteorder("<").str)

    @property
    def label(self) -> str:
        """The rollout field as written in error messages, e.g. `model_outs['critic']`."""
        if self.path is not None:
            return _tree.format_path(self.field, self.path)
        return self.field if self.key is None else f"{self.field}[{self.key!r}]"


class Recording(BaseModel):
    """Where a rollout was recorded: what `trajkit lint --replay` needs to replay it.

    Written by [`trajkit.save`][trajkit.save]`(rollout, path, recording=...)`, typically with
    [`RolloutRecorder.recording`][trajkit.gym.RolloutRecorder.recording], and read back with
    `trajkit.read_metadata(path).recording`. The envs are re-created with
    `gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync", **env_kwargs)`
    and env b is reset with `seed + b`, as Gymnasium's vector envs seed them.

    Args:
        id: Names one recording: every rollout a recorder returns has the same id.
        index: This rollout's position in the recording (0 for the first `record()`).
        env_id: The env's registered id (`env.spec.id`), if it has one.
        env_kwargs: Keyword arguments of `make_vec` besides `num_envs` and
            `vectorization_mode` (such as `max_episode_steps`), when they are JSON.
        unrecorded_kwargs: The names of `make_vec`'s other keyword arguments, which are not
            JSON (such as `wrappers=`): a recording with any cannot be replayed.
        vectorization_mode: `make_vec`'s mode (`sync`, `async`, `vector_entry_point`).
        num_envs: B.
        seed: The seed of the first reset; `None` when it was not seeded.
        autoreset_mode: `NEXT_STEP`, `SAME_STEP` or `DISABLED`.
        max_episode_steps: The envs' time limit, if they have one.
        observation_space: The single-env observation space as JSON (see the Lint page).
        action_space: The single-env action space as JSON, such as
            `{"type": "Discrete", "n": 2, "start": 0}`.
        wrappers: The class names of the vector wrappers around the env, outermost first.

    Examples:
        >>> rec = Recording(id="a1", index=0, num_envs=2, autoreset_mode="NEXT_STEP")
        >>> rec.env_id is None, rec.model_dump()["wrappers"]
        (True, [])
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid",
        frozen=True,
        protected_namespaces=(),
        defer_build=True,  # built when a file is first read, not at import
        json_schema_extra=described(),  # the fields' docstrings describe them
    )

    id: Annotated[str, Field(min_length=1, max_length=64)]
    """Names one recording: every rollout a recorder returns has the same id."""
    index: Annotated[int, Field(ge=0)]
    """This rollout's position in the recording (0 for the first)."""
    env_id: Annotated[str, Field(max_length=256)] | None = None
    """The env's registered id, if it has one."""
    env_kwargs: dict[str, JsonValue] = Field(default_factory=dict)
    """`make_vec`'s other keyword arguments (such as `max_episode_steps`)."""
    unrecorded_kwargs: list[Annotated[str, Field(max_length=256)]] = Field(default_factory=list)
    """The names of `make_vec`'s keyword arguments that are not JSON, so not recorded."""
    vectorization_mode: Annotated[str, Field(max_length=64)] | None = None
    """`make_vec`'s vectorization mode."""
    num_envs: Annotated[int, Field(ge=1)]
    """B, the number of envs."""
    seed: int | None = None
    """The seed of the first reset (env b gets `seed + b`); `None` if not seeded."""
    autoreset_mode: Literal["NEXT_STEP", "SAME_STEP", "DISABLED"]
    """How the vector env resets ended episodes."""
    max_episode_steps: Annotated[int, Field(ge=1)] | None = None
    """The envs' time limit, if they have one."""
    observation_space: dict[str, JsonValue] | None = None
    """The single-env observation space as JSON."""
    action_space: dict[str, JsonValue] | None = None
    """The single-env action space as JSON."""
    wrappers: list[str] = Field(default_factory=list)
    """The class names of the vector wrappers around the env, outermost first."""


class RolloutFileMetadata(BaseModel):
    """The contents of `metadata.json`: format, versions, T, B, model-output keys and spec.

    Read it cheaply with [`trajkit.read_metadata`][trajkit.read_metadata]. The member names,
    dtypes and shapes of the file follow from it: see
    [`arrays`][trajkit.RolloutFileMetadata.arrays].

    Args:
        format: Always `"trajkit.rollout"`.
        format_version: The file format version: `5` with `final_obses`; else `4` with a
            `recording`; else `3` when `infos.json` lists only the non-empty infos; else `1`,
            or `2` when `obses` or `states` is nested.
        trajkit_version: The trajkit version that wrote the file (informational).
        num_steps: T.
        batch_size: B.
        model_output_keys: The model-output keys in order; key `i` is stored in member
            `model_outs/{i}.npy`.
        spec: The rollout's spec (no bounds on T and B).
        recording: Where the rollout was recorded (format version 4), if given to `save`.
        num_final_obses: E, the number of entries of `final_obses` (format version 5), when
            the rollout has them (then `spec.has_final_obses` is true).

    Raises:
        pydantic.ValidationError: On unknown fields, an unknown format or version, or keys that
            disagree with the spec.

    Examples:
        >>> from trajkit.testing import example_rollout
        >>> meta = RolloutFileMetadata.from_rollout(example_rollout(keys={"critic"}))
        >>> meta.num_steps, meta.batch_size, meta.model_output_keys
        (4, 2, ['critic'])
        >>> [m.name for m in meta.arrays()]
        ['states.npy', 'obses.npy', 'rews.npy', 'dones.npy', 'model_outs/0.npy']
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid",
        frozen=True,
        protected_namespaces=(),
        defer_build=True,  # built when a file is first read, not at import
        json_schema_extra=described(),  # the fields' docstrings describe them
    )

    format: Literal["trajkit.rollout"]
    """The format name: always `trajkit.rollout`."""
    format_version: Literal[1, 2, 3, 4, 5]
    """The format version (an integer; this trajkit reads versions 1 to 5)."""
    trajkit_version: Annotated[str, Field(max_length=64)]
    """The version of trajkit that wrote the file; informational only."""
    num_steps: Annotated[int, Field(ge=0)]
    """T, the number of steps."""
    batch_size: Annotated[int, Field(ge=1)]
    """B, the number of environments."""
    model_output_keys: list[str]
    """Model-output keys in order; key `i` is stored in member `model_outs/{i}.npy`."""
    spec: RolloutSpec
    """Per-step shapes and dtypes, model-output layouts and whether truncation data is present."""
    recording: Recording | None = None
    """Where the rollout was recorded (version 4; absent from the file when `None`)."""
    num_final_obses: Annotated[int, Field(ge=0)] | None = None
    """E, the entries of `final_obses` (version 5; absent from the file when `None`)."""

    @model_validator(mode="after")
    def _check_keys(self) -> Self:
        keys = self.model_output_keys
        if len(set(keys)) != len(keys):
            raise ValueError(f"model_output_keys has duplicates: {keys}")
        if set(keys) != set(self.spec.model_outputs):
            raise ValueError(
                f"model_output_keys {sorted(keys)} differ from the keys of "
                f"spec.model_outputs {sorted(self.spec.model_outputs)}"
            )
        nested = [name for name in TREE_FIELDS if self.spec.leaves(name)[0][0]]
        if nested and self.format_version < _NESTED_VERSION:
            raise ValueError(
                f"nested {' and '.join(nested)} need format version {_NESTED_VERSION}, but the "
                f"file declares version {self.format_version}"
            )
        if self.recording is not None:
            if self.format_version < RECORDING_VERSION:
                raise ValueError(
                    f"recording needs format version {RECORDING_VERSION}, but the file declares "
                    f"version {self.format_version}"
                )
            if self.recording.num_envs != self.batch_size:
                raise ValueError(
                    f"recording.num_envs is {self.recording.num_envs}, but batch_size is "
                    f"{self.batch_size}"
                )
        if (self.num_final_obses is not None) != self.spec.has_final_obses:
            raise ValueError(
                f"num_final_obses is {self.num_final_obses}, but spec.has_final_obses is "
                f"{str(self.spec.has_final_obses).lower()}: give both or neither"
            )
        if self.num_final_obses is not None:
            if self.format_version < FINAL_OBSES_VERSION:
                raise ValueError(
                    f"final_obses need format version {FINAL_OBSES_VERSION}, but the file "
                    f"declares version {self.format_version}"
                )
            if self.num_final_obses > self.num_steps * self.batch_size:
                raise ValueError(
                    f"num_final_obses is {self.num_final_obses}, over T*B = "
                    f"{self.num_steps * self.batch_size}: there is at most one episode end "
                    "per step and env"
                )
        problems = self.spec.compare(self.spec, num_steps=self.num_steps, num_envs=self.batch_size)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def from_rollout(
        cls,
        rollout: Rollout,
        *,
        sparse_infos: bool = False,
        recording: Recording | None = None,
    ) -> RolloutFileMetadata:
        """The metadata `trajkit.save` writes for `rollout`.

        Args:
            rollout: Any valid rollout.
            sparse_infos: Whether `infos.json` lists only the non-empty infos (version 3).
            recording: Where it was recorded (version 4).

        Returns:
            The metadata, with this trajkit's version.

        Raises:
            ValueError: If an array has a dtype the format cannot store (such as float128).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> RolloutFileMetadata.from_rollout(example_rollout()).format
            'trajkit.rollout'
        """
        spec = RolloutSpec.from_rollout(rollout)
        nested = any(spec.leaves(name)[0][0] for name in TREE_FIELDS)
        version: Literal[1, 2, 3, 4, 5]
        finals = rollout.final_obses
        if finals is not None:
            version = FINAL_OBSES_VERSION
        elif recording is not None:
            version = RECORDING_VERSION
        elif sparse_infos:
            version = SPARSE_INFOS_VERSION
        else:
            version = _NESTED_VERSION if nested else 1
        return cls(
            format=FORMAT_NAME,
            format_version=version,
            trajkit_version=__version__,
            num_steps=rollout.num_steps,
            batch_size=rollout.batch_size,
            model_output_keys=list(rollout.model_outs.keys()),
            spec=spec,
            recording=recording,
            num_final_obses=None if finals is None else len(_tree.leaves(finals)[0]),
        )

    def arrays(self) -> list[ArrayMember]:
        """Every `.npy` member the file must hold, in the order they are written.

        Returns:
            `states.npy`, `obses.npy`, `rews.npy`, `dones.npy`, then `truncated.npy` and
            `final_values.npy` when the spec has truncation, then `model_outs/{i}.npy`, then
            `final_obses.npy` (`[E, ...]`, laid out as `obses`; version 5). A nested
            `states`, `obses` or `final_obses` has a member per leaf instead,
            `states/{i}.npy` for the i-th leaf in `RolloutSpec.leaves` order.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> meta = RolloutFileMetadata.from_rollout(example_rollout(num_steps=3, keys=()))
            >>> [(m.name, m.dtype, m.shape) for m in meta.arrays()]
            [('states.npy', 'float32', (4, 2, 2)), ('obses.npy', 'float32', (4, 2, 4)),
             ('rews.npy', 'float32', (3, 2)), ('dones.npy', 'float32', (4, 2))]
        """
        T, B, spec = self.num_steps, self.batch_size, self.spec
        members = [
            *_field_members(spec, "states", T, B),
            *_field_members(spec, "obses", T, B),
            _fixed_member("rews", (T, B)),
            _fixed_member("dones", (T + 1, B)),
        ]
        if spec.has_truncation:
            members.append(_fixed_member("truncated", (T, B)))
            members.append(_fixed_member("final_values", (T, B)))
        for i, key in enumerate(self.model_output_keys):
            out = spec.model_outputs[key]
            members.append(
                ArrayMember(
                    f"model_outs/{i}.npy",
                    "model_outs",
                    key,
                    out.dtype,
                    (T + 1, B, *out.shape) if out.per_env else (T + 1,),
                )
            )
        if self.num_final_obses is not None:
            members += _field_members(spec, "obses", T, B, final=self.num_final_obses)
        return members

    def members(self) -> list[str]:
        """The names of all members, in the order `trajkit.save` writes them.

        Returns:
            `metadata.json`, the `.npy` members of [`arrays`][trajkit.RolloutFileMetadata.arrays],
            then `infos.json`.

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> RolloutFileMetadata.from_rollout(example_rollout(keys=())).members()
            ['metadata.json', 'states.npy', 'obses.npy', 'rews.npy', 'dones.npy', 'infos.json']
        """
        return member_names(self.arrays())

    def data_bytes(self) -> int:
        """The total size of the array data the metadata declares, in bytes.

        Returns:
            The sum of every array member's `nbytes` (what loading allocates, before infos).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> RolloutFileMetadata.from_rollout(example_rollout(keys=())).data_bytes()
            312
        """
        return data_bytes(self.arrays())


def member_names(arrays: Iterable[ArrayMember]) -> list[str]:
    """The names of a file's members, its `.npy` members `arrays` among them, in saved order.

    What `RolloutFileMetadata.members` gives, for a reader that has listed `arrays` already.
    """
    return [METADATA_MEMBER, *(m.name for m in arrays), INFOS_MEMBER]


def data_bytes(arrays: Iterable[ArrayMember]) -> int:
    """The bytes of array data of `.npy` members `arrays` (`RolloutFileMetadata.data_bytes`)."""
    return sum(m.nbytes for m in arrays)


def _field_members(
    spec: RolloutSpec,
    name: TreeField,
    T: int,
    B: int,
    *,
    final: int | None = None,
) -> list[ArrayMember]:
    """`{name}.npy` for a flat field, else one `{name}/{i}.npy` per leaf, in spec order.

    With `final` (E), the members of `final_obses`, `[E, ...]` laid out as `obses`.
    """
    field = name if final is None else "final_obses"
    lead = (T + 1, B) if final is None else (final,)
    leaves = spec.leaves(name)
    if len(leaves) == 1 and not leaves[0][0]:
        leaf = leaves[0][1]
        return [ArrayMember(f"{field}.npy", field, None, leaf.dtype, (*lead, *leaf.shape))]
    return [
        ArrayMember(f"{field}/{i}.npy", field, None, leaf.dtype, (*lead, *leaf.shape), path)
        for i, (path, leaf) in enumerate(leaves)
    ]


def _fixed_member(field: str, shape: tuple[int, ...]) -> ArrayMember:
    """The member of a field saved in the one dtype its rule declares (`rews`: float32)."""
    dtype = FIELD_RULES[field].file_dtype
    if dtype is None:  # pragma: no cover - only fields of a fixed dtype are passed
        raise ValueError(f"{field} has no fixed file dtype")
    return ArrayMember(f"{field}.npy", field, None, dtype, shape)
