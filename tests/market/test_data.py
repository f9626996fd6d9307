"""The market data pipeline: FinRL's long format in, checked, with indicators, split by date."""

from __future__ import annotations

import sys

import numpy as np
import polars as pl
import pytest

from openenv_lab.market import DEFAULT_INDICATORS, MarketData, MarketDataError, load_prices, synthetic_prices
from openenv_lab.market.data import add_turbulence, indicator_window, parse_indicators


@pytest.fixture(scope="module")
def prices() -> pl.DataFrame:
    return synthetic_prices(tickers=3, days=300, seed=1)


def test_synthetic_prices_are_seeded_and_well_formed(prices):
    assert prices.equals(synthetic_prices(tickers=3, days=300, seed=1))
    assert not prices.equals(synthetic_prices(tickers=3, days=300, seed=2))
    assert prices.height == 900 and prices["tic"].n_unique() == 3
    assert (prices["high"] >= prices[["open", "close"]].max_horizontal()).all()
    assert (prices["low"] <= prices[["open", "close"]].min_horizontal()).all()
    assert all(day.weekday() < 5 for day in prices["date"].unique())
    returns = prices.pivot(on="tic", index="date", values="close").drop("date").to_numpy()
    correlation = np.corrcoef(np.diff(np.log(returns), axis=0), rowvar=False)
    assert (correlation[np.triu_indices(3, 1)] > 0.3).all()  # one market factor moves them together


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_files_round_trip(tmp_path, prices, suffix):
    path = tmp_path / f"prices{suffix}"
    prices.write_csv(path) if suffix == ".csv" else prices.write_parquet(path)
    assert load_prices(path).equals(prices.sort("date", "tic"))


def test_indicators_follow_stockstats_and_skip_the_warm_up(prices):
    market = MarketData.from_prices(prices)
    assert market.indicator_names == DEFAULT_INDICATORS
    assert market.closes.shape == (300 - 60, 3)  # close_60_sma needs 60 days
    assert market.indicators.shape == (240, 8, 3)
    first = sorted(prices["date"].unique())[60]
    assert market.dates[0] == first
    # close_30_sma on the first kept day is the mean of the last 30 closes, for every ticker.
    closes = prices.pivot(on="tic", index="date", values="close").sort("date").drop("date").to_numpy()
    np.testing.assert_allclose(market.indicators[0, 6], closes[31:61].mean(axis=0))
    assert np.isfinite(market.indicators).all()


def test_indicator_windows():
    assert indicator_window("rsi_30") == 30 and indicator_window("close_60_sma") == 60
    assert indicator_window("macd") == 26 and indicator_window("boll_ub") == 20


def test_turbulence_is_zero_until_a_year_of_history(prices):
    frame = add_turbulence(prices, lookback=100)
    by_day = frame.group_by("date").agg(pl.col("turbulence").first()).sort("date")["turbulence"].to_numpy()
    assert (by_day[:100] == 0).all() and (by_day[100:] > 0).all()


def test_splits_by_date(prices):
    market = MarketData.from_prices(prices)
    middle = market.dates[100]
    before, after = market.between(None, str(market.dates[99])), market.between(middle, None)
    assert len(before.dates) + len(after.dates) == len(market.dates)
    np.testing.assert_array_equal(after.closes, market.closes[100:])
    with pytest.raises(MarketDataError, match="Only 0 trading day"):
        market.between("1999-01-01", "1999-12-31")


def write(tmp_path, frame: pl.DataFrame) -> str:
    path = tmp_path / "bad.csv"
    frame.write_csv(path)
    return str(path)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.drop("volume"), r"lacks the column\(s\) \['volume'\]"),
        (
            lambda f: f.with_columns(pl.col("close").cast(pl.Utf8).str.replace(r"^1", "x")),
            "'close' is not numeric",
        ),
        (
            lambda f: f.with_columns(
                pl.when(pl.int_range(pl.len()) == 7).then(-1.0).otherwise(pl.col("low")).alias("low")
            ),
            "non-positive prices",
        ),
        (lambda f: f.filter(~((pl.col("tic") == "BRVO") & (pl.int_range(pl.len()) < 30))), "BRVO"),
        (lambda f: pl.concat([f, f.head(1)]), "several rows"),
        (lambda f: f.with_columns(pl.lit("soon").alias("date")), "dates like"),
    ],
)
def test_bad_files_are_named_and_explained(tmp_path, prices, mutate, message):
    with pytest.raises(MarketDataError, match=message):
        load_prices(write(tmp_path, mutate(prices)))


def test_too_few_days_for_the_indicators(prices):
    short = prices.filter(pl.col("date") <= sorted(prices["date"].unique())[40])
    with pytest.raises(MarketDataError, match=r"Too few days for the indicators.*60 days"):
        MarketData.from_prices(short)


def test_missing_file():
    with pytest.raises(MarketDataError, match="No market data file"):
        load_prices("/no/such/file.csv")


def with_value(frame: pl.DataFrame, column: str, row: int, value: float | None) -> pl.DataFrame:
    """``frame`` (sorted by date, ticker) with ``value`` in ``column`` at ``row``."""
    frame = frame.sort("date", "tic")
    return frame.with_columns(
        pl.when(pl.int_range(pl.len()) == row).then(value).otherwise(pl.col(column)).alias(column)
    )


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize(
    ("column", "value", "shown"),
    [
        ("close", float("nan"), "NaN"),
        ("close", float("inf"), "inf"),
        ("low", float("-inf"), "-inf"),
        ("open", None, "empty"),
        ("volume", float("nan"), "NaN"),
    ],
)
def test_non_finite_prices_and_volumes_are_refused_naming_the_first(
    tmp_path, prices, suffix, column, value, shown
):
    frame = with_value(prices, column, 301, value)  # 3 tickers: row 301 is the second one on day 100
    ticker, date = frame.row(301, named=True)["tic"], frame.row(301, named=True)["date"]
    path = tmp_path / f"prices{suffix}"
    frame.write_csv(path) if suffix == ".csv" else frame.write_parquet(path)
    expected = rf"column '{column}' has 1 missing or non-finite .*the first is {shown} for {ticker} on {date}"
    with pytest.raises(MarketDataError, match=expected) as caught:
        load_prices(path)
    assert "fill the gaps" in str(caught.value)
    with pytest.raises(MarketDataError, match=expected):
        MarketData.from_prices(frame)  # the same check for frames built in code


@pytest.mark.parametrize(("text", "shown"), [("nan", "NaN"), ("Infinity", "inf"), ("-inf", "-inf")])
def test_csv_spellings_of_non_finite_numbers_get_the_non_finite_message(tmp_path, prices, text, shown):
    frame = prices.sort("date", "tic").with_columns(pl.col("close").cast(pl.Utf8))
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 4).then(pl.lit(text)).otherwise(pl.col("close")).alias("close")
    )
    with pytest.raises(
        MarketDataError, match=rf"'close' has 1 missing or non-finite.*the first is {shown} for"
    ):
        load_prices(write(tmp_path, frame))


def test_a_non_numeric_value_is_shown_as_it_is(tmp_path, prices):
    frame = prices.sort("date", "tic").with_columns(pl.col("volume").cast(pl.Utf8))
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 5).then(pl.lit("12k")).otherwise(pl.col("volume")).alias("volume")
    )
    row = frame.row(5, named=True)
    with pytest.raises(
        MarketDataError, match=rf"'volume' is not numeric.*the first '12k' for {row['tic']} on {row['date']}"
    ):
        load_prices(write(tmp_path, frame))


def test_indicators_as_one_comma_separated_string(prices):
    assert parse_indicators(" macd, ,rsi_30,") == ("macd", "rsi_30")
    assert parse_indicators(["macd", " rsi_30 ", ""]) == ("macd", "rsi_30")
    assert parse_indicators("") == ()
    market = MarketData.from_prices(prices, "macd , rsi_30")
    assert market.indicator_names == ("macd", "rsi_30") and market.indicators.shape[1] == 2
    assert MarketData.from_prices(prices, "macd").indicator_names == ("macd",)  # not 'm', 'a', 'c', 'd'
    with pytest.raises(MarketDataError, match="lists macd more than once"):
        parse_indicators("macd,rsi_30, macd")
    with pytest.raises(MarketDataError, match=r"stockstats names \(text\).*got 30 \(int\)"):
        parse_indicators(["rsi", 30])


def test_an_unknown_indicator_is_named(prices):
    with pytest.raises(MarketDataError, match=r"cannot compute indicator 'nonsense'.*FinRL's defaults macd"):
        MarketData.from_prices(prices, ["macd", "nonsense"])


def test_indicators_without_stockstats_say_what_to_install(monkeypatch, prices):
    monkeypatch.setitem(sys.modules, "stockstats", None)  # as if it were not installed
    with pytest.raises(
        ImportError, match=r"Market indicators need stockstats: pip install 'openenv-lab\[finrl\]'"
    ):
        MarketData.from_prices(prices)
