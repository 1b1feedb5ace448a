"""The trajkit version, the single source for packaging and file metadata."""

__version__ = "0.1.0"
