"""Tests of `trajkit.sb3`: Stable-Baselines3 rollouts as trajkit rollouts."""
