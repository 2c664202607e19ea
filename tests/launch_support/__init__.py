"""Helpers for tests/test_launch.py: a fake Pedelec Desktop written out as an executable."""
