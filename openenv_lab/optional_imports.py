"""Skipping optional imports that cost seconds and that nothing of ours uses.

Several libraries import something heavy only to offer an extra we never use: openenv's server framework
imports Gradio for its web UI (seconds), ``jsonschema`` imports ``rfc3987_syntax`` for an "iri" format
check (compiling lark grammars: seconds), httpx imports its command-line tool's ``click``, ``rich`` and
``pygments`` (a tenth of ``import openenv_lab``). The server start times that follow are measured by
``benchmarks/fleet.py``. Each treats the module as optional, so we import the library with the
module hidden (`hidden_module`), then un-hide it: a later ``import`` of the module works as usual.
What the library built without it stays without it (``httpx.main``, the ``httpx`` command's entry point,
is httpx's "install httpx[cli]" stub in such a process; the ``httpx`` command itself is unaffected).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

__all__ = ["hidden_module"]


@contextlib.contextmanager
def hidden_module(name: str) -> Iterator[bool]:
    """Make ``import name`` fail fast inside the block (unless it is imported already), then undo that.

    Yields whether the module is hidden. Optional imports are skipped this way, never removed: after the
    block, importing the module works as usual.
    """
    hide = name not in sys.modules
    if hide:
        sys.modules[name] = None  # type: ignore[assignment]  # makes `import name` raise ImportError
    try:
        yield hide
    finally:
        if hide and sys.modules.get(name, 0) is None:
            del sys.modules[name]
