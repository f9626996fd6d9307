"""How much memory a run can still use here, so a notebook can say it needs more before it starts.

On Binder (2 GB per session) and other container hosts the limit is the container's (its cgroup), not the
machine's: ``/proc/meminfo`` there reports the host's memory, and a kernel over the cgroup's limit is
killed without a word. `available_memory_mib` reads both and takes the smaller; `require_memory` turns a
run that would not fit into one clear sentence before it starts.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["NotEnoughMemory", "available_memory_mib", "require_memory"]

MIB = 1024 * 1024
#: Where cgroup v2 (one file tree) and v1 (a "memory" controller tree) keep the container's limit and use.
_CGROUP_FILES = (
    ("memory.max", "memory.current"),
    ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"),
)


class NotEnoughMemory(MemoryError):
    """A run needs more memory than this machine (or its container) has left.

    Example:
        >>> issubclass(NotEnoughMemory, MemoryError)
        True
    """


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # cgroup v2 writes "max" when there is no limit


def _meminfo_available(meminfo: Path) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_memory_mib(
    cgroup: str | os.PathLike[str] = "/sys/fs/cgroup", meminfo: str | os.PathLike[str] = "/proc/meminfo"
) -> float | None:
    """MiB this process can still allocate: the machine's available memory, or what its container's limit
    leaves if that is less; None where neither can be read (not Linux).

    Example:
        >>> free = available_memory_mib()
        >>> free is None or free > 0
        True
    """
    candidates = []
    machine = _meminfo_available(Path(meminfo))
    if machine is not None:
        candidates.append(machine)
    for limit_file, usage_file in _CGROUP_FILES:
        limit, usage = _read_int(Path(cgroup) / limit_file), _read_int(Path(cgroup) / usage_file)
        if limit is not None and usage is not None and limit < 1 << 60:  # v1 writes a huge number for none
            candidates.append(max(limit - usage, 0))
            break
    return min(candidates) / MIB if candidates else None


def require_memory(
    needed_mib: float, what: str = "This notebook", *, available_mib: float | None = None
) -> None:
    """Raise `NotEnoughMemory`, in one sentence that says what to do, when less than ``needed_mib`` MiB
    more can be allocated here (``available_mib``: `available_memory_mib` unless given). Where the
    memory cannot be read, nothing is checked.

    Example:
        >>> require_memory(100, available_mib=4096)          # fits: says nothing
        >>> require_memory(3000, "Training", available_mib=1500)
        Traceback (most recent call last):
        ...
        openenv_lab.machine.NotEnoughMemory: Training needs about 3,000 MiB more and this machine has \
1,500 MiB free (Binder gives 2,048 MiB in all): lower the budgets above (fewer environments or \
steps), or run it on Colab or your own machine.
    """
    free = available_memory_mib() if available_mib is None else available_mib
    if free is None or free >= needed_mib:
        return
    raise NotEnoughMemory(
        f"{what} needs about {needed_mib:,.0f} MiB more and this machine has {free:,.0f} MiB free "
        "(Binder gives 2,048 MiB in all): lower the budgets above (fewer environments or steps), or run "
        "it on Colab or your own machine."
    )
