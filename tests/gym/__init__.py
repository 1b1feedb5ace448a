"""Tests of `trajkit.gym`, the recorder for Gymnasium vector environments."""
