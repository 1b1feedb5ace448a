"""Tests of `trajkit.ray`: rollout files on a Ray cluster."""
