"""How the text of an `icepack.*` table property becomes a value: numbers in plain ASCII digits (no `_`
separators, no other scripts' digits), booleans `true` or `false` in any case. Stricter than Iceberg's
own Java parsing (domain/table/iceberg_properties.py) on purpose: icepack's settings are read one way only.
"""

from __future__ import annotations

import re

_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)
_MAX_NUMBER_TEXT = 40  # longer digit strings are never a sensible setting


def parse_whole_number(text: str) -> int:
    """A whole number: ASCII digits 0-9 with an optional sign, nothing else."""
    if len(text) > _MAX_NUMBER_TEXT or not _INT.fullmatch(text):
        raise ValueError("must be a whole number written with digits 0-9")
    return int(text)


def parse_number(text: str) -> float:
    """A decimal number in ASCII digits, optionally with a fraction and an exponent (`6`, `0.5`, `1e3`)."""
    if len(text) > _MAX_NUMBER_TEXT or not _FLOAT.fullmatch(text):
        raise ValueError("must be a number written with digits 0-9 (e.g. 6 or 0.5)")
    return float(text)


def parse_flag(text: str) -> bool:
    """`true` or `false`, any letter case."""
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ValueError("must be true or false")
    return lowered == "true"
