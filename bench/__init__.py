"""Benchmarks (not tests): one command each, see bench/README.md and docs/PERFORMANCE.md."""
