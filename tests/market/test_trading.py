"""FinRL's trading rules, checked on a hand-built market where every number can be worked out by hand."""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openenv_lab.market import MarketData, synthetic_prices
from openenv_lab.market.trading import StockTradingSimulator, TradingConfig, whole_shares


def market(closes: list[list[float]], turbulence: list[float] | None = None) -> MarketData:
    """A market with these closes (days x tickers) and no indicators."""
    days, tickers = len(closes), len(closes[0])
    dates = tuple(dt.date(2024, 1, 1) + dt.timedelta(days=d) for d in range(days))
    table = pl.DataFrame({"date": [d for d in dates for _ in range(tickers)]})
    return MarketData(
        dates=dates,
        tickers=tuple(f"T{i}" for i in range(tickers)),
        indicator_names=(),
        closes=np.array(closes, dtype=np.float64),
        indicators=np.zeros((days, 0, tickers)),
        turbulence=np.array(turbulence or [0.0] * days),
        table=table,
    )


NO_COSTS = TradingConfig(
    initial_amount=10_000, hmax=100, buy_cost_pct=0.0, sell_cost_pct=0.0, reward_scaling=1.0
)


def test_state_layout_and_share_scaling_truncates_toward_zero():
    sim = StockTradingSimulator(market([[10, 20], [11, 22], [12, 24]]), NO_COSTS)
    assert sim.reset().tolist() == [10_000, 10, 20, 0, 0]
    state, reward, done = sim.step(np.array([0.579, 0.015]))  # 57.9 -> 57 shares, 1.5 -> 1 share
    assert sim.holdings.tolist() == [57, 1]
    assert state.tolist() == [10_000 - 57 * 10 - 20, 11, 22, 57, 1]
    assert reward == pytest.approx(57 * 1 + 1 * 2)  # the shares gained a day's price move
    assert not done


def test_sells_come_first_and_fund_buys():
    config = TradingConfig(initial_amount=1_000, hmax=100, buy_cost_pct=0.0, sell_cost_pct=0.0)
    sim = StockTradingSimulator(market([[10, 10], [10, 10], [10, 10]]), config)
    sim.reset()
    sim.step(np.array([1.0, 0.0]))  # 100 shares of T0 for all the cash
    assert sim.holdings.tolist() == [100, 0] and sim.cash == 0
    sim.step(np.array([-0.5, 0.3]))  # sell 50 T0 first, then 30 T1 with the proceeds
    assert sim.holdings.tolist() == [50, 30] and sim.cash == pytest.approx(200)


def test_buys_are_capped_by_cash_and_costs():
    config = TradingConfig(initial_amount=1_000, hmax=100, buy_cost_pct=0.01, sell_cost_pct=0.02)
    sim = StockTradingSimulator(market([[10.0], [10.0], [10.0]]), config)
    sim.reset()
    sim.step(np.array([1.0]))  # 1000 // 10.1 = 99 shares
    assert sim.holdings.tolist() == [99]
    assert sim.cash == pytest.approx(1_000 - 99 * 10 * 1.01)
    assert sim.cost == pytest.approx(99 * 10 * 0.01)
    sim.step(np.array([-1.0]))  # sell all 99 (not 100: never more than held)
    assert sim.holdings.tolist() == [0]
    assert sim.cost == pytest.approx(99 * 10 * 0.01 + 99 * 10 * 0.02)
    assert sim.trades == 2


def test_reward_is_scaled_change_in_total_assets():
    config = TradingConfig(
        initial_amount=2_000, hmax=10, buy_cost_pct=0.001, sell_cost_pct=0.001, reward_scaling=1e-4
    )
    sim = StockTradingSimulator(market([[100.0], [110.0], [110.0]]), config)
    sim.reset()
    _, reward, _ = sim.step(np.array([1.0]))  # 10 shares at 100 with 0.1% cost, worth 110 tomorrow
    assert sim.holdings.tolist() == [10]
    assert reward == pytest.approx((10 * 110 + (2_000 - 10 * 100 * 1.001) - 2_000) * 1e-4)


def test_out_of_range_actions_are_clipped_and_bad_ones_refused():
    sim = StockTradingSimulator(market([[10.0], [10.0], [10.0]]), NO_COSTS)
    sim.reset()
    sim.step(np.array([7.0]))
    assert sim.holdings.tolist() == [100]  # 7.0 acts as 1.0: hmax shares
    with pytest.raises(ValueError, match="Expected 1 actions"):
        sim.step(np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="finite"):
        sim.step(np.array([np.nan]))


def test_end_of_data_and_ruin():
    sim = StockTradingSimulator(market([[10.0], [10.0], [10.0]]), NO_COSTS)
    sim.reset()
    assert sim.step(np.array([0.0]))[2] is False
    assert sim.step(np.array([0.0]))[2] is True and sim.at_end and not sim.ruined
    with pytest.raises(ValueError, match="episode is over"):
        sim.step(np.array([0.0]))
    crash = StockTradingSimulator(market([[10.0], [0.1], [0.1]]), NO_COSTS)
    crash.reset()
    assert crash.step(np.array([1.0]))[2] is False  # 1,000 of the 10,000 lose 99% ...
    assert not crash.ruined  # ... which is not ruin
    all_in = StockTradingSimulator(
        market([[1.0], [0.01], [0.01]]),
        TradingConfig(initial_amount=100, hmax=100, buy_cost_pct=0, sell_cost_pct=0),
    )
    all_in.reset()
    assert all_in.step(np.array([1.0]))[2] is True and all_in.ruined


def test_turbulence_sells_everything():
    config = TradingConfig(
        initial_amount=1_000, hmax=10, buy_cost_pct=0.0, sell_cost_pct=0.0, turbulence_threshold=5.0
    )
    sim = StockTradingSimulator(market([[10.0], [10.0], [10.0], [10.0]], turbulence=[0, 0, 9, 0]), config)
    sim.reset()
    sim.step(np.array([1.0]))
    sim.step(np.array([1.0]))
    assert sim.holdings.tolist() == [20]
    sim.step(np.array([1.0]))  # a turbulent day: buys become "sell everything"
    assert sim.holdings.tolist() == [0]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_hand_built_market_with_non_finite_closes_is_refused(bad):
    with pytest.raises(
        ValueError, match=r"closes has 1 NaN or infinite value\(s\), the first for T1 on 2024-01-02"
    ):
        StockTradingSimulator(market([[10, 20], [11, bad], [12, 24]]), NO_COSTS)


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False)
        | st.sampled_from([-1.0, 1.0, -0.0, 0.0, 0.01, -0.01, 0.999999, -1.000001]),
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 10_000),
)
def test_whole_shares_follow_the_numpy_rule(actions, hmax):
    """FinRL's rule as numpy states it (clip, scale, cast to int64) and the plain-Python one agree."""
    expected = (np.clip(np.array(actions, dtype=np.float64), -1.0, 1.0) * hmax).astype(np.int64).tolist()
    assert whole_shares(actions, hmax) == expected


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_whole_shares_refuse_what_is_not_finite(bad):
    with pytest.raises(ValueError, match="finite"):
        whole_shares([0.5, bad], 100)


def test_trading_from_lists_matches_stepping_with_arrays():
    """A server's path (`trade` on lists of floats, `state_list`) and `step` on arrays agree exactly."""
    prices = synthetic_prices(tickers=3, days=120, seed=4)
    by_list = StockTradingSimulator(MarketData.from_prices(prices), initial_amount=50_000)
    by_array = StockTradingSimulator(MarketData.from_prices(prices), initial_amount=50_000)
    assert by_list.reset(5).tolist() == by_array.reset(5).tolist() == by_list.state_list()
    rng = np.random.default_rng(0)
    done = False
    while not done:
        actions = rng.uniform(-1.5, 1.5, 3)
        reward, done = by_list.trade(actions.tolist())
        state, expected_reward, expected_done = by_array.step(actions)
        assert (reward, done) == (expected_reward, expected_done)
        assert by_list.state_list() == state.tolist()
        assert {type(number) for number in by_list.state_list()} == {float}  # 68.0, not 68: as numpy
        assert by_list.holdings_list() == by_array.holdings.tolist()
    by_list.reset()
    with pytest.raises(ValueError, match="Expected 3 actions"):
        by_list.trade([0.1, 0.2])
    with pytest.raises(ValueError, match="finite"):
        by_list.trade([0.1, float("nan"), 0.2])
