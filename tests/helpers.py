"""Small helpers shared by tests."""

from __future__ import annotations

import queue
import selectors
import subprocess
import sys
import threading
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


def serve_cli(server: str, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``openenv-lab serve SERVER --port 0 ARGS``; the process and its banner's lines (the first,
    with the URL, and those printed at once after it, such as a generated token)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_lab", "serve", server, "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    banner = [lines.get(timeout=60)]
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            banner.append(lines.get(timeout=max(0.01, deadline - time.monotonic())))
        except queue.Empty:
            break
    return process, [line.rstrip("\n") for line in banner]
