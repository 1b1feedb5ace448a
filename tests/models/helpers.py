"""What the models tests share: the count of Python calls that validating a rollout makes."""

from __future__ import annotations

import gc
import sys
from typing import Any

from trajkit import Rollout


def python_calls_to_build(fields: dict[str, Any]) -> int:
    """Count the function calls made while `Rollout(**fields)` validates its inputs."""
    calls = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        # Python and C calls both count. Comprehensions are frames of their own before Python
        # 3.12; filling in `infos=None` builds T rows of empty dicts, which is not validation.
        if frame.f_code.co_name.startswith("<"):
            return
        if event in ("call", "c_call"):
            calls += 1

    gc.disable()  # collections (and callbacks on them, such as Hypothesis's) are not ours
    sys.setprofile(profile)
    try:
        Rollout(**fields)
    finally:
        sys.setprofile(None)
        gc.enable()
    return calls
