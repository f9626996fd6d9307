"""The ranges of our servers' numeric options: what a request may ask for, checked before any work is done.

A server shared by a class or a fleet must not let one request ask for unbounded work: an Atari
``frameskip`` of 500 million runs one step for minutes, a ``screen_size`` of 300,000 pixels a side asks
for a 90 GB screen. Every number a server takes (a constructor argument, a ``serve`` flag, a reset
option) has a `Range` declared once, beside the option it bounds (`openenv_lab.servers.BUNDLED_SERVERS`,
`openenv_lab.preprocessing`); the server, the command line and the docs (``docs/options.md``) all read
it there. The bounds are generous for research (ten times what the literature uses) and small enough that
no value inside them can stall a server.

Example:
    >>> from openenv_lab.ranges import Range
    >>> frameskip = Range(1, 100)
    >>> str(frameskip)
    'a whole number from 1 to 100'
    >>> frameskip.check("frameskip", 500_000_000)
    Traceback (most recent call last):
    ...
    ValueError: frameskip must be a whole number from 1 to 100, got 500000000
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Range"]


@dataclass(frozen=True)
class Range:
    """Numbers from ``low`` to ``high``, both included: whole numbers unless ``integer=False``."""

    low: float
    high: float
    integer: bool = True

    def __post_init__(self) -> None:
        if not self.low <= self.high:
            raise ValueError(f"A range's low end must not exceed its high end, got {self.low} > {self.high}")

    def __str__(self) -> str:
        kind = "a whole number" if self.integer else "a number"
        return f"{kind} from {_number(self.low)} to {_number(self.high)}"

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a number of the right kind in the range (``True`` is not a number here)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.integer and not isinstance(value, int):
            return False
        return math.isfinite(value) and self.low <= value <= self.high

    def check(self, name: str, value: Any) -> None:
        """Raise a `ValueError` naming ``name``, the range and ``value`` unless the range contains it."""
        if not self.contains(value):
            raise ValueError(f"{name} must be {self}, got {value!r}")


def _number(value: float) -> str:
    """``value`` as written in the docs: whole numbers with thousands separators, others as given."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}"
