"""What the project tests share: the MkDocs hooks of docs/plugins/, imported from their files."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]


def load_hook(name: str) -> Any:
    """Import one of the MkDocs hooks in docs/plugins/ (they are not part of the package)."""
    spec = importlib.util.spec_from_file_location(
        f"{name}_hook", ROOT / "docs" / "plugins" / f"{name}.py"
    )
    assert spec is not None
    assert spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook
