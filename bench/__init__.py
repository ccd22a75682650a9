"""Benchmarks that start their own broker and gateway; run them as scripts (see docs/benchmarks.md)."""
