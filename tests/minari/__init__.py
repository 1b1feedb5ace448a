"""Tests of `trajkit.minari`: rollouts to and from Minari datasets."""
