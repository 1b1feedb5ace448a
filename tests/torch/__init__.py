"""Tests of `trajkit.torch`: minibatches as PyTorch tensors."""
