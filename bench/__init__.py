"""Benchmarks of the host against baselines measured in the same run (see README.md)."""
