"""FinRL-style stock trading without the ``finrl`` package: market data and the trading rules.

`openenv_lab.market.data` loads and prepares prices (polars + stockstats); `openenv_lab.market.trading`
implements FinRL's ``StockTradingEnv`` rules as a small numpy simulator. The ``finrl`` OpenEnv server
(`openenv_lab.servers.finrl`) serves that simulator; notebooks use both directly for baselines.
"""

from .data import (
    DEFAULT_INDICATORS,
    MarketData,
    MarketDataError,
    add_indicators,
    add_turbulence,
    load_prices,
    synthetic_prices,
)

__all__ = [
    "DEFAULT_INDICATORS",
    "MarketData",
    "MarketDataError",
    "add_indicators",
    "add_turbulence",
    "load_prices",
    "synthetic_prices",
]
