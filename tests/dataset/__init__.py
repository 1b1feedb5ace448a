"""Tests of `trajkit.dataset`: a folder of rollout files that pins one spec."""
