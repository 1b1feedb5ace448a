"""Tests of `trajkit._base`: the errors, warnings and helpers every layer above uses."""
