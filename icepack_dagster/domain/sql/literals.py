"""Spark SQL literals and identifiers that say exactly what they hold: a string literal that unescapes
to its value, an identifier with every part in backticks. Every statement icepack renders quotes with
these (procedure calls, partition filters, SET overrides)."""

from __future__ import annotations


def sql_string(value: str) -> str:
    """A Spark SQL string literal that unescapes to exactly `value`."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_identifier(*parts: str) -> str:
    """A multipart identifier with every part in backticks (backticks doubled)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)
