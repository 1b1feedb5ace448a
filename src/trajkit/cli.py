"""The `trajkit` command line as a library: `main(argv) -> int`.

`trajkit` (the console script) and `python -m trajkit` both run `main`. The commands are
`validate`, `info` and `schema`; see the file-format page of the docs for the reference.

Examples:
    >>> from trajkit.cli import main
    >>> main(["--version"])
    trajkit ...
    0
"""

from trajkit._cli.main import console_main, main

__all__ = ["console_main", "main"]
