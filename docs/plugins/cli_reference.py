"""MkDocs hook: write the CLI reference from trajkit's argument parser at build time.

`docs/reference/cli.md` holds the marker below; this hook replaces it with
`trajkit._cli.reference.cli_reference()`, so the page always says what `trajkit --help` says.
Loaded by `hooks:` in `mkdocs.yml`; not part of the package.
"""

from __future__ import annotations

from typing import Any

from trajkit._cli.reference import cli_reference

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, *, page: Any, **kwargs: Any) -> str:
    """Replace the marker on the CLI page with the generated reference."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())
