"""Typed validators for option values that reach Spark SQL as text (procedure options, SET overrides):
each parses the string and prints it back from its type, so only canonical values are ever rendered."""

from __future__ import annotations

import re
from collections.abc import Callable

Validator = Callable[[str], str]

_INT = re.compile(r"[0-9]{1,18}")


def int_between(low: int, high: int) -> Validator:
    def validate(value: str) -> str:
        if not _INT.fullmatch(value) or not low <= int(value) <= high:
            raise ValueError(f"expected a whole number from {low} to {high}")
        return str(int(value))

    return validate


def boolean(value: str) -> str:
    if value.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return value.lower()
