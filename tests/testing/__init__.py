"""Tests of `trajkit.testing`: the example rollout and the Hypothesis strategy users build on."""
