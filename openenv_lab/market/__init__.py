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
from typing import TYPE_CHECKING, Any

from .indicators import DEFAULT_INDICATORS, MarketDataError, parse_indicators

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
