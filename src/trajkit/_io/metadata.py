"""The `metadata.json` member of a rollout file, and the member layout it implies.

The metadata declares T, B, the model-output keys (in order) and the rollout's `RolloutSpec`.
Every array member's name, dtype and shape follow from these, so a reader knows exactly what to
expect before it opens any array. See `docs/file-format.md` for the specification.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, ClassVar, Final, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import Self

from trajkit._base.version import __version__
from trajkit._core import tree as _tree
from trajkit._models.rollout import Rollout
from trajkit._models.spec import RolloutSpec

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "INFOS_MEMBER",
    "MAX_METADATA_BYTES",
    "METADATA_MEMBER",
    "SPARSE_INFOS_VERSION",
    "ArrayMember",
    "RolloutFileMetadata",
]

FORMAT_NAME: Final = "trajkit.rollout"
"""The value of `format` in every rollout file's metadata."""

FORMAT_VERSION: Final = 3
"""The newest format version this trajkit reads and writes.

Version 2 adds nested `obses` and `states` (one member per leaf). `trajkit.save` writes version 1,
the same layout, for rollouts without nested fields, so that older readers still open them.
"""

_NESTED_VERSION: Final = 2  # the first version that stores nested fields
SPARSE_INFOS_VERSION: Final = 3  # the first version whose infos.json lists non-empty infos only

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


class RolloutFileMetadata(BaseModel):
    """The contents of `metadata.json`: format, versions, T, B, model-output keys and spec.

    Read it cheaply with [`trajkit.read_metadata`][trajkit.read_metadata]. The member names,
    dtypes and shapes of the file follow from it: see
    [`arrays`][trajkit.RolloutFileMetadata.arrays].

    Args:
        format: Always `"trajkit.rollout"`.
        format_version: The file format version: `3` when `infos.json` lists only the
            non-empty infos; else `1`, or `2` when `obses` or `states` is nested.
        trajkit_version: The trajkit version that wrote the file (informational).
        num_steps: T.
        batch_size: B.
        model_output_keys: The model-output keys in order; key `i` is stored in member
            `model_outs/{i}.npy`.
        spec: The rollout's spec (no bounds on T and B).

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
        extra="forbid", frozen=True, use_attribute_docstrings=True, protected_namespaces=()
    )

    format: Literal["trajkit.rollout"]
    """The format name: always `trajkit.rollout`."""
    format_version: Literal[1, 2, 3]
    """The format version (an integer; this trajkit reads versions 1, 2 and 3)."""
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
        nested = [name for name in ("obses", "states") if self.spec.leaves(name)[0][0]]
        if nested and self.format_version < _NESTED_VERSION:
            raise ValueError(
                f"nested {' and '.join(nested)} need format version {_NESTED_VERSION}, but the "
                f"file declares version {self.format_version}"
            )
        problems = self.spec.compare(self.spec, num_steps=self.num_steps, num_envs=self.batch_size)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @classmethod
    def from_rollout(cls, rollout: Rollout, *, sparse_infos: bool = False) -> RolloutFileMetadata:
        """The metadata `trajkit.save` writes for `rollout`.

        Args:
            rollout: Any valid rollout.
            sparse_infos: Whether `infos.json` lists only the non-empty infos (version 3).

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
        nested = any(spec.leaves(name)[0][0] for name in ("obses", "states"))
        return cls(
            format=FORMAT_NAME,
            format_version=SPARSE_INFOS_VERSION
            if sparse_infos
            else (_NESTED_VERSION if nested else 1),
            trajkit_version=__version__,
            num_steps=rollout.num_steps,
            batch_size=rollout.batch_size,
            model_output_keys=list(rollout.model_outs.keys()),
            spec=spec,
        )

    def arrays(self) -> list[ArrayMember]:
        """Every `.npy` member the file must hold, in the order they are written.

        Returns:
            `states.npy`, `obses.npy`, `rews.npy`, `dones.npy`, then `truncated.npy` and
            `final_values.npy` when the spec has truncation, then `model_outs/{i}.npy`. A
            nested `states` or `obses` (version 2) has a member per leaf instead,
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
            ArrayMember("rews.npy", "rews", None, "float32", (T, B)),
            ArrayMember("dones.npy", "dones", None, "float32", (T + 1, B)),
        ]
        if spec.has_truncation:
            members.append(ArrayMember("truncated.npy", "truncated", None, "float32", (T, B)))
            members.append(ArrayMember("final_values.npy", "final_values", None, "float32", (T, B)))
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
        return [METADATA_MEMBER, *(m.name for m in self.arrays()), INFOS_MEMBER]

    def data_bytes(self) -> int:
        """The total size of the array data the metadata declares, in bytes.

        Returns:
            The sum of every array member's `nbytes` (what loading allocates, before infos).

        Examples:
            >>> from trajkit.testing import example_rollout
            >>> RolloutFileMetadata.from_rollout(example_rollout(keys=())).data_bytes()
            312
        """
        return sum(m.nbytes for m in self.arrays())


def _field_members(
    spec: RolloutSpec, name: Literal["obses", "states"], T: int, B: int
) -> list[ArrayMember]:
    """`{name}.npy` for a flat field, else one `{name}/{i}.npy` per leaf, in spec order."""
    leaves = spec.leaves(name)
    if len(leaves) == 1 and not leaves[0][0]:
        leaf = leaves[0][1]
        return [ArrayMember(f"{name}.npy", name, None, leaf.dtype, (T + 1, B, *leaf.shape))]
    return [
        ArrayMember(f"{name}/{i}.npy", name, None, leaf.dtype, (T + 1, B, *leaf.shape), path)
        for i, (path, leaf) in enumerate(leaves)
    ]
