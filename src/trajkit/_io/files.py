"""Save and load rollouts in a safe, versioned `.npz`-based file format.

The format lives in the modules this one gathers, one concept each: `trajkit._io.zipfmt`
(the ZIP layout and its end record), `trajkit._io.npy` (`.npy` headers), `trajkit._io.stream`
(bounded, capped reads of one member), `trajkit._io.reader` (`load`, `read_metadata`),
`trajkit._io.writer` (`save`) and `trajkit._io.atomic` (atomic outputs, for every file trajkit
writes). This module keeps the names other modules have imported from it. The specification
is `docs/file-format.md`.
"""

from __future__ import annotations

from trajkit._io.reader import DEFAULT_MAX_BYTES, load, read_metadata, read_metadata_from
from trajkit._io.writer import save

__all__ = ["DEFAULT_MAX_BYTES", "load", "read_metadata", "read_metadata_from", "save"]
