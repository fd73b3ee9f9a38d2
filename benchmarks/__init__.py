"""Benchmarks: run with `uv run python -m benchmarks.<name>`."""
