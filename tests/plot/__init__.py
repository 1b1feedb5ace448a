"""Tests of `trajkit.plot` and `trajkit plot`: figures of recorded rollouts."""
