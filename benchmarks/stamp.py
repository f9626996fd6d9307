"""What every benchmark's JSON says of its run: when, at which commit, on how many CPUs, with which Python.

The docs' captions read it (scripts/render_benchmarks.py), so a figure always names where it came from.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def commit() -> str | None:
    """The checkout's short commit hash, or None outside a git checkout."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10, cwd=ROOT
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None


def stamp() -> dict[str, Any]:
    """``when`` (UTC, ISO 8601), ``commit``, ``cpus`` and ``python`` of this run."""
    return {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "commit": commit(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
