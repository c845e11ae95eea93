"""Waiting for something another process or thread does, with a deadline and no fixed sleep: a
server answering, a run reaching a state, a file appearing, a lease renewed. Every wait in the suite
goes through here, so each one fails saying what never happened instead of hanging or sleeping."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(check: Callable[[], T | None], timeout: float, every: float) -> T | None:
    """The first truthy value `check` returns within `timeout` seconds, asked every `every` seconds;
    None when it never did."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            return None
        time.sleep(every)


def wait_until(
    check: Callable[[], T | None],
    what: str,
    timeout: float = 180,
    every: float = 0.5,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll `check` until it returns something truthy, and return that; fail after `timeout` seconds
    saying `what` never happened, followed by `detail()` (a log tail, the states seen). A check that
    knows the wait is hopeless (the process it waits for has exited) raises at once."""
    value = poll(check, timeout, every)
    if value:
        return value
    message = f"timed out after {timeout:.0f} s waiting for {what}"
    raise AssertionError(f"{message}\n{detail()}" if detail else message)
