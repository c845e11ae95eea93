"""Byte counts as a person reads them (binary units: 1 KiB = 1024 B), shared by the CLI's text and
the Dagster metadata so both print the same size the same way."""

from __future__ import annotations


def human_bytes(value: float | None) -> str:
    """`1536` -> `1.5 KiB`; whole bytes below 1 KiB; None -> `-`."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
