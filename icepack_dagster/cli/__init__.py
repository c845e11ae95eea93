"""The `icepack` command (`app.py`), its commands grouped by what they touch, and what they share
(`context.py`). `main` is the console-script entry point."""

from icepack_dagster.cli.app import cli, main

__all__ = ["cli", "main"]
