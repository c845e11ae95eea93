"""The SQL of a maintenance as a person reads it: each session setting once (every action's statements
start with the same `SET`s, which the runner needs and a reader does not need repeated), and each
`CALL` with one argument per line, so a long `where` or `options` map wraps instead of running off the
right edge. Display only: the runner executes the statements exactly as rendered."""

from __future__ import annotations

from collections.abc import Iterable

_INDENT = "  "
_WIDTH = 100  # a CALL this short stays on one line


def _top_level_commas(text: str) -> list[int]:
    """Positions of the commas that separate a CALL's arguments: outside quotes and nested parentheses."""
    commas, depth, quote, escaped = [], 0, "", False
    for position, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == "'":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "'`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 1:
            commas.append(position)
    return commas


def call_lines(statement: str) -> str:
    """A long `CALL c.system.x(a => 1, b => 2)` as `CALL c.system.x(` / one argument a line / `)`."""
    opening = statement.find("(")
    if len(statement) <= _WIDTH or not statement.startswith("CALL ") or opening < 0:
        return statement
    cuts = [opening, *_top_level_commas(statement), len(statement) - 1]
    arguments = [statement[start + 1 : end].strip() for start, end in zip(cuts, cuts[1:], strict=False)]
    body = [f"{_INDENT}{argument}," for argument in arguments[:-1]] + [f"{_INDENT}{arguments[-1]}"]
    return "\n".join([statement[: opening + 1], *body, ")"])


def readable_sql(statements: Iterable[str]) -> list[str]:
    """`statements` in order, each `SET` kept at its first occurrence only, each CALL one argument a line."""
    shown: list[str] = []
    settings: set[str] = set()
    for statement in statements:
        if statement.upper().startswith("SET "):
            if statement in settings:
                continue
            settings.add(statement)
        shown.append(call_lines(statement))
    return shown
