"""Our FinRL-style stock-trading OpenEnv server: FinRL's rules and data format without the ``finrl`` package.

Wire-compatible with the official ``finrl_env``: action ``{"actions": [one float in -1..1 per ticker]}``;
observation ``state`` (``[cash] + closes + holdings + indicators``, FinRL's order), ``portfolio_value``,
``date``; ``GET /config`` with ``stock_dim``, ``initial_amount``, ``action_space``, ``state_space`` and
``tech_indicators``. The trading rules are in `openenv_lab.market.trading` (documented there); the data
pipeline in `openenv_lab.market.data`.

The market is loaded once, when the server starts: a FinRL long-format CSV or Parquet file (``data=...``)
or, by default, the seeded synthetic market of `openenv_lab.market.synthetic_prices`. A bad file stops the
server at start with a message naming the problem. The data is split by date into ``train`` (before
``trade_start``) and ``trade`` (from ``trade_start``); each session picks its split at reset.

Additions, invisible to clients that do not ask for them:

- ``reset(split="train"|"trade"|"all", random_start=False, seed=None)``: the period to trade, and whether
  to start on a random day of it (seeded; at least ``min_episode_days`` before the end);
- metadata says why an episode ended: ``end_of_data`` (a truncation) or ``ruined`` (a termination), and
  carries ``cash``, ``holdings``, ``cost`` and ``trades``;
- each step's reward in two named parts, ``metadata["reward_components"]``: ``market`` (what the prices
  did to the portfolio) and ``costs`` (the transaction costs paid, negative), scaled as the reward is and
  adding up to it;
- ``/config`` also lists the tickers, the split dates and the trading parameters;
- many concurrent sessions (the market data is shared, read-only).
"""

from __future__ import annotations

import functools
import random
import uuid
from pathlib import Path
from typing import Any

from pydantic import Field

from ..market.data import (
    DEFAULT_INDICATORS,
    MarketData,
    MarketDataError,
    load_prices,
    parse_indicators,
    synthetic_prices,
)
from ..market.trading import StockTradingSimulator, TradingConfig
from ._app import build_app
from ._base import Action, Observation, ServerEnvironment, State
from .catalogue import BUNDLED_SERVERS

__all__ = ["FinRLAction", "FinRLEnvironment", "FinRLObservation", "Market", "make_app"]

#: The options and their ranges (the catalogue declares them once).
SPEC = BUNDLED_SERVERS["finrl"]

SPLITS: tuple[str, ...] = SPEC.option("split").choices or ()
DEFAULT_TRADE_START = "2021-01-01"


class FinRLAction(Action):
    """One number per ticker in [-1, 1]: the fraction of ``hmax`` shares to buy (> 0) or sell (< 0)."""

    actions: list[float] = Field(..., description="One value in [-1, 1] per ticker")


class FinRLObservation(Observation):
    state: list[float] = Field(default_factory=list, description="[cash] + closes + holdings + indicators")
    portfolio_value: float = 0.0
    date: str = ""


class FinRLState(State):
    split: str = "train"
    date: str = ""
    day: int = 0
    seed: int | None = None


class Market:
    """The server's market: the data, split by date, and the trading parameters (shared by all sessions)."""

    def __init__(
        self,
        data: MarketData,
        trade_start: str,
        config: TradingConfig,
        source: str,
        min_episode_days: int = 20,
    ) -> None:
        self.data = data
        self.config = config
        self.source = source
        self.trade_start = trade_start
        self.min_episode_days = min_episode_days
        self.splits = {"all": data}
        try:
            self.splits["train"] = data.between(None, _day_before(trade_start))
            self.splits["trade"] = data.between(trade_start, None)
        except MarketDataError as exc:
            raise MarketDataError(
                f"trade_start={trade_start} leaves a split without trading days ({exc}); choose a date "
                f"between {data.dates[1]} and {data.dates[-2]}"
            ) from None

    def describe(self) -> dict[str, Any]:
        """The ``/config`` route: the official fields first, then ours."""
        sim = StockTradingSimulator(self.data, self.config)
        return {
            "stock_dim": sim.stock_dim,
            "initial_amount": self.config.initial_amount,
            "action_space": sim.stock_dim,
            "state_space": sim.state_space,
            "tech_indicators": list(self.data.indicator_names),
            "tickers": list(self.data.tickers),
            "hmax": self.config.hmax,
            "buy_cost_pct": self.config.buy_cost_pct,
            "sell_cost_pct": self.config.sell_cost_pct,
            "reward_scaling": self.config.reward_scaling,
            "turbulence_threshold": self.config.turbulence_threshold,
            "ruin_fraction": self.config.ruin_fraction,
            "splits": {
                name: [str(split.dates[0]), str(split.dates[-1]), len(split.dates)]
                for name, split in self.splits.items()
            },
            "data": self.source,
        }


class FinRLEnvironment(ServerEnvironment):
    """One trading account per session, on the server's shared `Market`."""

    NAME = "finrl"

    def __init__(self, market: Market) -> None:
        super().__init__()
        self._market = market
        self._split = "train"
        self._sim = StockTradingSimulator(market.splits["train"], market.config)
        self._started = False
        self._state = FinRLState()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        split: str = "train",
        random_start: bool = False,
        **unknown: Any,
    ) -> FinRLObservation:
        SPEC.refuse_unknown(unknown)
        SPEC.check(seed=seed, split=split, random_start=random_start)
        data = self._market.splits[split]
        if split != self._split:
            self._sim = StockTradingSimulator(data, self._market.config)
            self._split = split
        start = 0
        if random_start:
            latest = max(0, len(data.dates) - 1 - self._market.min_episode_days)
            start = random.Random(seed).randint(0, latest)
        self._sim.reset(start)
        self._started = True
        self._state = FinRLState(
            episode_id=episode_id or str(uuid.uuid4()), step_count=0, split=split, seed=seed
        )
        metadata: dict[str, Any] = {
            "split": split,
            "start_date": str(data.dates[start]),
            "end_date": str(data.dates[-1]),
        }
        if seed is not None:
            metadata["seed"] = seed
        return self._observation(0.0, False, metadata)

    def step(self, action: FinRLAction, timeout_s: float | None = None, **kwargs: Any) -> FinRLObservation:
        if not self._started:
            raise ValueError("Send a reset before the first step")
        if self._sim.at_end or self._sim.ruined:
            raise ValueError("The episode is over; send a reset to trade again")
        cost_before = self._sim.cost
        reward, done = self._sim.trade(action.actions)
        self._update_state(step_count=self._state.step_count + 1)
        costs = -(self._sim.cost - cost_before) * self._market.config.reward_scaling
        metadata: dict[str, Any] = {"reward_components": {"market": reward - costs, "costs": costs}}
        if done:
            metadata["end_reason"] = "ruined" if self._sim.ruined else "end_of_data"
        return self._observation(reward, done, metadata)

    def describe(self) -> str:
        return (
            f"FinRL-style stock trading over {len(self._market.data.tickers)} tickers "
            f"({self._market.source}), wire-compatible with OpenEnv's finrl_env."
        )

    def _observation(self, reward: float, done: bool, metadata: dict[str, Any]) -> FinRLObservation:
        sim = self._sim
        date = str(sim.market.dates[sim.day])
        self._update_state(date=date, day=sim.day)
        metadata.update(cash=sim.cash, holdings=sim.holdings_list(), cost=sim.cost, trades=sim.trades)
        return FinRLObservation(
            state=sim.state_list(),
            portfolio_value=sim.total_asset,
            date=date,
            done=done,
            reward=reward,
            metadata=metadata,
        )


def _day_before(date: str) -> str:
    import datetime as dt

    return str(dt.date.fromisoformat(date) - dt.timedelta(days=1))


@functools.lru_cache(maxsize=4)
def load_market(
    data: str = "synthetic",
    trade_start: str = DEFAULT_TRADE_START,
    indicators: str = ",".join(DEFAULT_INDICATORS),
    initial_amount: float = 1_000_000.0,
    hmax: int = 100,
    buy_cost_pct: float = 0.001,
    sell_cost_pct: float = 0.001,
    reward_scaling: float = 1e-4,
    turbulence_threshold: float | None = None,
) -> Market:
    """Load and prepare the server's market (cached per set of arguments).

    ``indicators`` is comma-separated (``"macd,rsi_30"``); spaces and empty entries are ignored, so ``""``
    means none. A name stockstats does not know stops the server with a message naming it.
    """
    names = parse_indicators(indicators)
    if data == "synthetic":
        prices = synthetic_prices()
        source = "synthetic market: 5 tickers, seeded regime-switching GBM"
    else:
        prices = load_prices(Path(data))
        source = str(data)
    market = MarketData.from_prices(prices, names, turbulence=turbulence_threshold is not None)
    config = TradingConfig(
        initial_amount=initial_amount,
        hmax=hmax,
        buy_cost_pct=buy_cost_pct,
        sell_cost_pct=sell_cost_pct,
        reward_scaling=reward_scaling,
        turbulence_threshold=turbulence_threshold,
    )
    return Market(market, trade_start, config, source)


def make_app(max_sessions: int = 64, **options: Any) -> Any:
    """The FastAPI app of the FinRL server, with ``GET /config``; ``options`` go to `load_market`."""
    SPEC.check(**options)
    market = load_market(**options)
    app = build_app(
        functools.partial(FinRLEnvironment, market),
        FinRLAction,
        FinRLObservation,
        FinRLState,
        env_name="finrl",
        max_sessions=max_sessions,
    )

    @app.get("/config", tags=["Environment Info"], summary="The market and the trading parameters")
    def config() -> dict[str, Any]:
        return market.describe()

    return app
