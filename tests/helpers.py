"""Small helpers shared by tests."""

from __future__ import annotations

import selectors
import subprocess
import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes (for process lifetimes, not speed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The next line of a child's stdout, or "" if none comes within ``timeout`` (never blocks longer)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()
