"""Technical indicators by name: FinRL's defaults, and reading a list of names as users write it."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_INDICATORS", "MarketDataError", "parse_indicators"]

#: FinRL's default technical indicators (``finrl.config.INDICATORS``).
DEFAULT_INDICATORS = (
    "macd",
    "boll_ub",
    "boll_lb",
    "rsi_30",
    "cci_30",
    "dx_30",
    "close_30_sma",
    "close_60_sma",
)


class MarketDataError(ValueError):
    """Market data that cannot be used, with what is wrong with it."""


def parse_indicators(indicators: str | Sequence[str]) -> tuple[str, ...]:
    """Indicator names from a comma-separated string (``"macd, rsi_30"``) or a sequence of names.

    Surrounding whitespace and empty entries are dropped, so ``""`` means no indicators; a name given twice
    or a value that is not text is a `MarketDataError`.
    """
    if not isinstance(indicators, (str, Sequence)):
        raise MarketDataError(
            f"indicators must be stockstats names, as a list or a comma-separated string such as "
            f"'macd,rsi_30'; got {indicators!r}"
        )
    items = [indicators] if isinstance(indicators, str) else list(indicators)
    names: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise MarketDataError(
                f"indicators must be stockstats names (text), like {', '.join(DEFAULT_INDICATORS[:3])}; got "
                f"{item!r} ({type(item).__name__})"
            )
        names += [name.strip() for name in item.split(",") if name.strip()]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise MarketDataError(f"indicators lists {', '.join(repeated)} more than once; give each name once")
    return tuple(names)
