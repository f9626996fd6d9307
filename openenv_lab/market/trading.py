"""FinRL's stock-trading rules as a small numpy simulator, with no dependency on the ``finrl`` package.

The rules, as in FinRL's ``StockTradingEnv`` (``finrl/meta/env_stock_trading/env_stocktrading.py``):

- **State** ``[cash] + closes (N) + holdings (N) + indicators (K x N)``, the indicators grouped by indicator,
  then by ticker: length ``1 + 2N + K*N``. Prices are the day's closes.
- **Actions** one number per ticker in [-1, 1] (values outside are clipped), scaled by ``hmax`` and
  truncated toward zero to whole shares: 0.57 with ``hmax=100`` is 57 shares to buy, -0.57 is 57 to sell.
- **Trading** at the day's close: sells first, the most negative action first, never more than is held
  (the seller receives ``price * shares * (1 - sell_cost_pct)``); then buys, the largest first, never more
  than the cash pays for (``cash // (price * (1 + buy_cost_pct))``). Each order is one trade.
- **Turbulence** (optional): when ``turbulence_threshold`` is set and the day's turbulence index reaches
  it, every action becomes "sell ``hmax`` shares" (everything, in practice), as FinRL does in crashes.
- **Reward** ``(total_asset_after - total_asset_before) * reward_scaling``, where total asset = cash +
  sum(close * holdings), valued at the next day's close (costs included).
- **End** the episode ends on the last day of the data: a truncation (the market did not end). It
  terminates early only if the account is ruined: total assets at or below ``ruin_fraction`` of the
  initial amount. (FinRL adds one extra no-op step at the end that repeats the last reward; we do not.)

Example:
    >>> import numpy as np
    >>> from openenv_lab.market import MarketData, synthetic_prices
    >>> from openenv_lab.market.trading import StockTradingSimulator
    >>> market = MarketData.from_prices(synthetic_prices(tickers=2, days=200, seed=1))
    >>> sim = StockTradingSimulator(market, initial_amount=100_000)
    >>> state = sim.reset()
    >>> len(state) == 1 + 2 * 2 + 8 * 2
    True
    >>> state, reward, done = sim.step(np.array([0.5, -1.0]))
    >>> sim.holdings.tolist(), done
    ([50, 0], False)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .data import MarketData

__all__ = ["StockTradingSimulator", "TradingConfig", "whole_shares"]


@dataclass(frozen=True)
class TradingConfig:
    """The trading rules' parameters; FinRL's defaults, except the initial amount FinRL examples use."""

    initial_amount: float = 1_000_000.0
    hmax: int = 100
    buy_cost_pct: float = 0.001
    sell_cost_pct: float = 0.001
    reward_scaling: float = 1e-4
    turbulence_threshold: float | None = None
    ruin_fraction: float = 0.05

    def __post_init__(self) -> None:
        if self.initial_amount <= 0:
            raise ValueError(f"initial_amount must be positive, got {self.initial_amount}")
        if self.hmax < 1:
            raise ValueError(f"hmax must be at least 1 share, got {self.hmax}")
        for name in ("buy_cost_pct", "sell_cost_pct"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if not 0.0 <= self.ruin_fraction < 1.0:
            raise ValueError(f"ruin_fraction must be in [0, 1), got {self.ruin_fraction}")


class StockTradingSimulator:
    """One trading account over `MarketData`, stepped day by day with FinRL's rules (see the module).

    Attributes after `reset`: ``day`` (index into the data), ``cash``, ``holdings`` (shares per ticker),
    ``cost`` (transaction costs paid), ``trades`` (orders filled).
    """

    def __init__(self, market: MarketData, config: TradingConfig | None = None, **overrides: float) -> None:
        base = config or TradingConfig()
        self.config = TradingConfig(**{**base.__dict__, **overrides}) if overrides else base
        _check_finite(market)
        self.market = market
        self.stock_dim = len(market.tickers)
        self.state_space = 1 + 2 * self.stock_dim + len(market.indicator_names) * self.stock_dim
        # Plain Python numbers: with a handful of tickers, numpy's per-call cost dominates a step.
        self._closes: list[list[float]] = market.closes.tolist()
        self._indicators: list[list[float]] = market.indicators.reshape(len(market.dates), -1).tolist()
        self._turbulence: list[float] = market.turbulence.tolist()
        self._last_day = len(market.dates) - 1
        self.day = 0
        self.cash = self.config.initial_amount
        self._holdings = [0] * self.stock_dim
        self.cost = 0.0
        self.trades = 0

    @property
    def holdings(self) -> np.ndarray:
        """Shares held, per ticker."""
        return np.array(self._holdings, dtype=np.int64)

    def reset(self, start_day: int = 0) -> np.ndarray:
        """Start with ``initial_amount`` in cash and no shares, on day ``start_day`` of the data."""
        if not 0 <= start_day < self._last_day:
            raise ValueError(f"start_day must leave at least one day to trade, got {start_day}")
        self.day = start_day
        self.cash = float(self.config.initial_amount)
        self._holdings = [0] * self.stock_dim
        self.cost = 0.0
        self.trades = 0
        return self.state()

    @property
    def total_asset(self) -> float:
        """Cash plus the shares at today's closing prices."""
        return self.cash + sum(p * h for p, h in zip(self._closes[self.day], self._holdings, strict=True))

    @property
    def ruined(self) -> bool:
        return self.total_asset <= self.config.ruin_fraction * self.config.initial_amount

    @property
    def at_end(self) -> bool:
        return self.day >= self._last_day

    def holdings_list(self) -> list[int]:
        """Shares held, per ticker, as a list (`holdings` as Python numbers)."""
        return list(self._holdings)

    def state(self) -> np.ndarray:
        """``[cash] + closes + holdings + indicators (by indicator, then ticker)`` for the current day."""
        return np.array(self.state_list(), dtype=np.float64)

    def state_list(self) -> list[float]:
        """`state` as a list of Python floats (``state().tolist()``, what a server sends), without making
        an array."""
        day = self.day
        return [float(self.cash), *self._closes[day], *map(float, self._holdings), *self._indicators[day]]

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, float, bool]:
        """Trade at today's close, move to the next day; returns (state, reward, done)."""
        reward, done = self.trade(actions)
        return self.state(), reward, done

    def trade(self, actions: np.ndarray | list[float]) -> tuple[float, bool]:
        """`step` without making the state's array: returns (reward, done); `state_list` has the state.

        A server's actions arrive as a list of floats and leave as lists: with no array in between, a
        step makes no numpy call, which costs a server more than a benchmark loop shows (each call's code
        is cold again after every network wait).
        """
        if self.at_end:
            raise ValueError("The episode is over (last day of the data); reset to trade again")
        if type(actions) is list and all(type(action) is float for action in actions):
            values = actions
        else:
            values = np.asarray(actions, dtype=np.float64).reshape(-1).tolist()
        if len(values) != self.stock_dim:
            raise ValueError(f"Expected {self.stock_dim} actions (one per ticker), got {len(values)}")
        config = self.config
        shares = whole_shares(values, config.hmax)
        turbulent = (
            config.turbulence_threshold is not None
            and self._turbulence[self.day] >= config.turbulence_threshold
        )
        if turbulent:
            shares = [-config.hmax] * self.stock_dim
        prices = self._closes[self.day]
        before = self.total_asset
        order = sorted(range(self.stock_dim), key=shares.__getitem__)
        for index in order:  # sells, most negative first
            if shares[index] < 0:
                self._sell(index, -shares[index], prices[index], everything=turbulent)
        for index in reversed(order):  # buys, largest first
            if shares[index] > 0:
                self._buy(index, shares[index], prices[index])
        self.day += 1
        after = self.total_asset
        reward = (after - before) * config.reward_scaling
        done = self.day >= self._last_day or after <= config.ruin_fraction * config.initial_amount
        return reward, done

    def _sell(self, index: int, count: int, price: float, *, everything: bool) -> None:
        held = self._holdings[index]
        if price <= 0 or held <= 0:
            return
        sold = held if everything else min(count, held)
        self.cash += price * sold * (1 - self.config.sell_cost_pct)
        self.cost += price * sold * self.config.sell_cost_pct
        self._holdings[index] = held - sold
        self.trades += 1

    def _buy(self, index: int, count: int, price: float) -> None:
        if price <= 0:
            return
        affordable = int(self.cash // (price * (1 + self.config.buy_cost_pct)))
        bought = min(count, affordable)
        if bought <= 0:
            return
        self.cash -= price * bought * (1 + self.config.buy_cost_pct)
        self.cost += price * bought * self.config.buy_cost_pct
        self._holdings[index] += bought
        self.trades += 1


def whole_shares(actions: list[float], hmax: int) -> list[int]:
    """Shares to trade per ticker: each action clipped to [-1, 1], times ``hmax``, truncated toward zero.

    In plain Python: for a handful of tickers, numpy's clip, multiply and cast cost a tenth of a step.

    Example:
        >>> whole_shares([0.579, -0.015, 7.0, -2.0], hmax=100)
        [57, -1, 100, -100]
    """
    if not all(map(math.isfinite, actions)):
        raise ValueError(f"Actions must be finite numbers, got {actions}")
    return [int(min(1.0, max(-1.0, action)) * hmax) for action in actions]


def _check_finite(market: MarketData) -> None:
    """Refuse closes, indicators or turbulence that are NaN or infinite, naming the first (day, ticker).

    `MarketData.from_prices` never builds such a market (its data check refuses non-finite prices); this
    catches hand-built ones before a step turns them into a NaN portfolio value.
    """
    for name, values in (("closes", market.closes), ("indicators", market.indicators)):
        bad = np.argwhere(~np.isfinite(values))
        if bad.size:
            day, ticker = int(bad[0][0]), int(bad[0][-1])
            raise ValueError(
                f"MarketData.{name} has {len(bad)} NaN or infinite value(s), the first for "
                f"{market.tickers[ticker]} on {market.dates[day]}; fill or drop them (or build the market "
                "with MarketData.from_prices, which checks the prices)"
            )
    bad_days = np.flatnonzero(~np.isfinite(market.turbulence))
    if bad_days.size:
        raise ValueError(
            f"MarketData.turbulence has {bad_days.size} NaN or infinite value(s), the first on "
            f"{market.dates[int(bad_days[0])]}"
        )
