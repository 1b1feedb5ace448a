"""Tests of the whole project: docs, layers, public API, typing, wheel, fresh processes, examples, Makefile."""
