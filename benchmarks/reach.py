"""Whether a speed target is within reach on the machine that measured it: the one rule for both the
benchmark's printout (`ceilings.py`) and the rendered docs (``scripts/render_benchmarks.py``).

A target is *met* when ours makes at least the target's share of what it is measured against (a ceiling,
or the raw baseline); *reachable* when the raw implementation doing the same work does; else it is
*above* what this machine allows. Each share is the median of a run's rounds; where the rounds' own
shares (their lowest and highest, ``ours_rounds``/``raw_rounds``) fall on both sides of the target, the
verdict is *edge*: one run's median could land either way, so the next run may well say otherwise.

    >>> reach(ours=0.92, raw=0.70, target=0.9), reach(0.6, 0.95, 0.9), reach(0.6, 0.7, 0.9)
    ('met', 'reachable', 'above')
    >>> reach(0.6, 0.84, 0.9, raw_rounds=(0.74, 0.94))
    'edge'

`target_reach` and `transport_reach` read the verdict's inputs from a row of ``ceilings.py``'s report
(its JSON), where a share's rounds are ``[lowest, highest]`` under the share's name with ``_rounds``.
"""

from __future__ import annotations

from typing import Any, Literal

Reach = Literal["met", "reachable", "edge", "above"]


def reach(
    ours: float,
    raw: float,
    target: float,
    *,
    ours_rounds: tuple[float, float] | None = None,
    raw_rounds: tuple[float, float] | None = None,
) -> Reach:
    """``"met"``, ``"reachable"``, ``"edge"`` or ``"above"``: see the module's docstring. A round range
    is ``(lowest, highest)``; where ours is met in every round, raw's rounds do not matter."""

    def straddles(rounds: tuple[float, float] | None) -> bool:
        return rounds is not None and rounds[0] < target <= rounds[1]

    if ours >= target and not straddles(ours_rounds):
        return "met"
    if straddles(ours_rounds) or straddles(raw_rounds):
        return "edge"
    return "reachable" if raw >= target else "above"


def target_reach(row: dict[str, Any]) -> Reach:
    """A ceiling target's verdict, from its row of the report's ``targets``: ours and the raw pair, each
    against its own ceiling."""
    return _reach_of(row, "of_ceiling", "raw_of_raw_ceiling")


def transport_reach(t: dict[str, Any]) -> Reach:
    """The transport target's verdict, from the report's ``transport``: ours and the raw pair stepping our
    ``EchoEnvironment``, each against the raw baseline."""
    return _reach_of(t, "vs_raw", "raw_echo_env_of_raw")


def _reach_of(row: dict[str, Any], ours: str, raw: str) -> Reach:
    def rounds(share: str) -> tuple[float, float]:
        lowest, highest = row[f"{share}_rounds"]
        return lowest, highest

    return reach(row[ours], row[raw], row["target"], ours_rounds=rounds(ours), raw_rounds=rounds(raw))
