"""What the Minari tests share: each test's datasets in its own temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Minari's datasets folder (`MINARI_DATASETS_PATH`), this test's temporary folder."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    return tmp_path
