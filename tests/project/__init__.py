"""Tests of the whole project, not of one module.

Docs, layers, public API, typing, wheel, fresh processes, examples, Makefile.
"""
