r"""MkDocs hook: search previews show math as text, not as raw LaTeX.

The search index is built from the pages' HTML, where `pymdownx.arithmatex` leaves math as
`\(...\)` and `\[...\]` for KaTeX to render in the page. Search results would show that
source (`\delta_t = r_t + \gamma ...`). After the build, this hook rewrites the math in
`search/search_index.json` as readable text (`δ_t = r_t + γ ...`); the pages are unchanged.
It runs before Material's `offline` plugin copies the index into `search_index.js`.
Loaded by `hooks:` in `mkdocs.yml`; not part of the package.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

# ruff: noqa: RUF001, RUF002 - Greek letters are the point here

SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "lambda": "λ",
    "tau": "τ", "theta": "θ", "pi": "π", "sigma": "σ", "mu": "μ", "cdot": "·", "in": "∈",
    "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "dots": "…", "ldots": "…", "cdots": "⋯",
    "infty": "∞", "sum": "Σ", "prod": "Π", "times": "×", "max": "max", "min": "min",
    "log": "log", "exp": "exp", "quad": " ", "qquad": "  ",
}  # fmt: skip
_MATH = re.compile(r"\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_WRAPPER = re.compile(r"\\(?:operatorname|text|mathrm|mathbf|mathit|hat|bar|tilde)\s*\{([^{}]*)\}")
_ENVIRONMENT = re.compile(r"\\(?:begin|end)\{[^{}]*\}")
_COMMAND = re.compile(r"\\([A-Za-z]+)")
_GROUP = re.compile(r"([_^])\{([^{}]*)\}")


def math_as_text(tex: str) -> str:
    """Return TeX math as plain text: Greek letters and operators as symbols, no markup."""
    text = _ENVIRONMENT.sub(" ", tex)
    for _ in range(3):  # nested wrappers, innermost first
        text = _WRAPPER.sub(r"\1", text)
    text = _COMMAND.sub(lambda m: SYMBOLS.get(m.group(1), m.group(1)), text)
    text = text.replace("\\\\", "; ").replace("\\,", " ").replace("\\_", "_").replace("&", "")
    for _ in range(3):
        text = _GROUP.sub(
            lambda m: m.group(1) + (m.group(2) if len(m.group(2)) == 1 else f"({m.group(2)})"), text
        )
    text = text.replace("{", "").replace("}", "")
    return " ".join(text.split())


def readable(text: str) -> str:
    r"""Replace every `\(...\)` and `\[...\]` in `text` with `math_as_text` of it."""
    return _MATH.sub(lambda m: math_as_text(m.group(1) or m.group(2)), text)


def on_post_build(*, config: Any, **kwargs: Any) -> None:
    """Rewrite the math in the built search index."""
    path = Path(config["site_dir"]) / "search" / "search_index.json"
    if not path.is_file():
        return
    index = json.loads(path.read_text(encoding="utf-8"))
    for doc in index.get("docs", []):
        doc["text"] = readable(doc.get("text", ""))
        doc["title"] = readable(doc.get("title", ""))
    path.write_text(json.dumps(index, ensure_ascii=False), encoding="utf-8")
