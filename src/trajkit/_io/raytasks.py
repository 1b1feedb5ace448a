"""Ray as an engine: connecting, and chunks of per-file work as Ray tasks.

Ray is imported here only when called (`trajkit[ray]`), never by `import trajkit`. `submitter`
gives `run_ordered` (see `trajkit._io.engine`) a `submit` that runs each chunk as a one-CPU
Ray task; `in_flight` its limits. Used by `validate_files(engine="ray")` and
`trajkit.ray`.
"""

from __future__ import annotations

import importlib
import logging
from functools import partial
from typing import Any, TypedDict

from trajkit._base.errors import RolloutFileError
from trajkit._io.engine import Item, Submit, Work

__all__ = ["InFlight", "connect", "in_flight", "ray_module", "submitter"]


def ray_module() -> Any:
    """The `ray` module.

    Raises:
        ImportError: Saying `pip install 'trajkit[ray]'` when Ray is not installed.
    """
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ImportError(
            "trajkit.ray needs Ray; install it with: pip install 'trajkit[ray]'"
        ) from exc


def connect(address: str | None) -> Any:
    """The `ray` module, initialized: `ray.init(address=...)` unless Ray already runs."""
    ray = ray_module()
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING)
    return ray


def _run_chunk(work: Any, group: list[Item]) -> Any:
    """The Ray task: one chunk of files through `work`."""
    return work(group)


def submitter(ray: Any) -> Submit[Any]:
    """A `submit` for `run_ordered` that runs each chunk as a one-CPU Ray task."""
    task = ray.remote(num_cpus=1)(_run_chunk)

    def submit(work: Work[Any], group: list[Item]) -> Any:
        return partial(_result, ray, task.remote(work, group))

    return submit


def _result(ray: Any, ref: Any) -> Any:
    """Wait for a task; a refused file raises its own `RolloutFileError`, not Ray's wrapper."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, RolloutFileError):
            raise cause from None
        raise


class InFlight(TypedDict):
    """`run_ordered`'s `jobs` and `window` for Ray tasks."""

    jobs: int
    window: int | None


def in_flight(ray: Any, most: int | None) -> InFlight:
    """`run_ordered`'s limits: at most `most` tasks at once, or four chunks per cluster CPU."""
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    return {"jobs": most or cpus, "window": most}
