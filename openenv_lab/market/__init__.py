"""FinRL-style stock trading without the ``finrl`` package: market data and the trading rules.

`openenv_lab.market.data` loads and prepares prices (polars + stockstats); `openenv_lab.market.trading`
implements FinRL's ``StockTradingEnv`` rules as a small numpy simulator. The ``finrl`` OpenEnv server
(`openenv_lab.servers.finrl`) serves that simulator; notebooks use both directly for baselines.

The data names load on first use, so that importing this package does not import polars (about a quarter
of a second of every ``import openenv_lab``): the server catalogue reads `DEFAULT_INDICATORS` and the FinRL
adapter checks indicator names with `parse_indicators` before any server starts.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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


if TYPE_CHECKING:
    from .data import (
        MarketData,
        add_indicators,
        add_turbulence,
        load_prices,
        synthetic_prices,
    )


def __getattr__(name: str) -> Any:
    if name in __all__:  # the names of `data` (those defined above never reach __getattr__)
        value = getattr(importlib.import_module(".data", __name__), name)
        globals()[name] = value
        return value
    if name in ("data", "trading"):  # `openenv_lab.market.data` after a bare `import openenv_lab.market`
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "DEFAULT_INDICATORS",
    "MarketData",
    "MarketDataError",
    "add_indicators",
    "add_turbulence",
    "load_prices",
    "parse_indicators",
    "synthetic_prices",
]
