"""Whether a speed target is within reach on the machine that measured it: the one rule for both the
benchmark's printout (`ceilings.py`) and the rendered docs (``scripts/render_benchmarks.py``).

A target is *met* when ours makes at least the target's share of what it is measured against (a ceiling,
or the raw baseline); *reachable* when the raw implementation doing the same work does; else it is
*above* what this machine allows. Light on purpose (no imports) so the renderer can use it.

    >>> reach(ours=0.92, raw=0.70, target=0.9), reach(0.6, 0.95, 0.9), reach(0.6, 0.7, 0.9)
    ('met', 'reachable', 'above')
"""

from __future__ import annotations

from typing import Literal

Reach = Literal["met", "reachable", "above"]


def reach(ours: float, raw: float, target: float) -> Reach:
    """``"met"``, ``"reachable"`` or ``"above"``: see the module's docstring."""
    if ours >= target:
        return "met"
    return "reachable" if raw >= target else "above"
