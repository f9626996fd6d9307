"""Market data for the stock-trading environment: load, check, add indicators, split by date.

The format is FinRL's long format: one row per (date, ticker) with ``date, tic, open, high, low, close,
volume``, from CSV or Parquet (read with polars). `add_indicators` computes FinRL's default technical
indicators with stockstats, ticker by ticker, and drops the warm-up days in which the longest indicator
window is not yet full (stockstats would otherwise fill them from partial windows). `add_turbulence`
computes FinRL's turbulence index. `MarketData` holds the result as aligned numpy arrays for fast stepping.

With no file, `synthetic_prices` generates a market of our own: seeded, several tickers with correlated
geometric-Brownian-motion returns whose drift and volatility switch between bull, bear and calm regimes
(a Markov chain), over a few years of weekday trading days. No download, no licence question.

Everything that is wrong with a file is reported when it is loaded, naming the problem: a missing file, a
missing column, a non-numeric, missing (empty or NaN), infinite or non-positive price or volume (with the
ticker and date of the first), a ticker missing some dates, too few days.

Example:
    >>> from openenv_lab.market import MarketData, synthetic_prices
    >>> prices = synthetic_prices(tickers=3, days=300, seed=0)
    >>> prices.columns
    ['date', 'tic', 'open', 'high', 'low', 'close', 'volume']
    >>> market = MarketData.from_prices(prices)
    >>> market.closes.shape, market.indicator_names[:2]
    ((240, 3), ('macd', 'boll_ub'))
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from .indicators import DEFAULT_INDICATORS, MarketDataError, parse_indicators

__all__ = [
    "DEFAULT_INDICATORS",
    "MarketData",
    "MarketDataError",
    "add_indicators",
    "add_turbulence",
    "load_prices",
    "synthetic_prices",
]

REQUIRED_COLUMNS = ("date", "tic", "open", "high", "low", "close", "volume")
PRICE_COLUMNS = ("open", "high", "low", "close")
NUMERIC_COLUMNS = (*PRICE_COLUMNS, "volume")
#: Windows of indicators whose name does not end in one (stockstats' defaults).
_DEFAULT_WINDOWS = {"macd": 26, "macds": 35, "macdh": 35, "boll": 20, "boll_ub": 20, "boll_lb": 20, "kdjk": 9}
#: Days of returns behind each day's turbulence index, as in FinRL.
TURBULENCE_LOOKBACK = 252


def load_prices(path: str | Path) -> pl.DataFrame:
    """Read FinRL long-format prices from a CSV or Parquet file and check them (see `check_prices`)."""
    path = Path(path)
    if not path.exists():
        raise MarketDataError(f"No market data file at {path}")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            table = pl.read_parquet(path)
        else:
            table = pl.read_csv(path, try_parse_dates=True, infer_schema_length=10_000)
    except Exception as exc:  # polars raises many kinds of errors for unreadable files
        raise MarketDataError(
            f"Cannot read {path} as {'Parquet' if path.suffix == '.parquet' else 'CSV'}: {exc}"
        ) from None
    return check_prices(table, source=str(path))


def check_prices(table: pl.DataFrame, *, source: str = "the prices") -> pl.DataFrame:
    """Validate and normalise long-format prices: typed columns, sorted by date then ticker."""
    missing = [column for column in REQUIRED_COLUMNS if column not in table.columns]
    if missing:
        raise MarketDataError(
            f"{source} lacks the column(s) {missing}; FinRL's format needs {list(REQUIRED_COLUMNS)}"
        )
    table = table.select(REQUIRED_COLUMNS)
    try:
        table = table.with_columns(pl.col("date").cast(pl.Utf8).str.slice(0, 10).str.to_date("%Y-%m-%d"))
    except Exception:
        raise MarketDataError(f"{source}: the date column must hold dates like 2021-03-31") from None
    table = table.with_columns(pl.col("tic").cast(pl.Utf8))
    for column in ("date", "tic"):
        empty = table.filter(pl.col(column).is_null())
        if empty.height:
            row = empty.row(0, named=True)
            raise MarketDataError(
                f"{source} has {empty.height} row(s) with an empty {column!r} (the first: date "
                f"{row['date']}, tic {row['tic']}); every row needs a date and a ticker"
            )
    table = table.sort("date", "tic")  # so that "the first" bad row below is the earliest
    for column in NUMERIC_COLUMNS:
        table = table.with_columns(_as_float(table, column, source))
    for column in NUMERIC_COLUMNS:
        bad = table.filter(~pl.col(column).is_finite().fill_null(False))
        if bad.height:
            value = bad[column][0]
            what = "empty" if value is None else "NaN" if value != value else str(value)
            raise MarketDataError(
                f"{source}: column {column!r} has {bad.height} missing or non-finite value(s) (NaN, inf or "
                f"empty); the first is {what} for {_describe_row(bad)}. Every price and volume must be a "
                "finite number: fill the gaps (e.g. with the ticker's previous day) or drop those dates for "
                "every ticker, then load the data again"
            )
    bad_prices = table.filter(pl.any_horizontal(pl.col(c) <= 0 for c in PRICE_COLUMNS))
    if bad_prices.height:
        raise MarketDataError(f"{source} has non-positive prices, e.g. {_describe_row(bad_prices)}")
    duplicates = table.group_by("date", "tic").len().filter(pl.col("len") > 1)
    if duplicates.height:
        row = duplicates.row(0, named=True)
        raise MarketDataError(f"{source} has several rows for {row['tic']} on {row['date']}")
    dates = table["date"].n_unique()
    per_ticker = table.group_by("tic").len()
    incomplete = per_ticker.filter(pl.col("len") < dates)
    if incomplete.height:
        names = ", ".join(f"{t} ({n} of {dates})" for t, n in incomplete.iter_rows())
        raise MarketDataError(
            f"{source}: every ticker needs a price on every date, but some have fewer days: {names}"
        )
    return table


def _as_float(table: pl.DataFrame, column: str, source: str) -> pl.Expr:
    """``column`` as Float64, or a `MarketDataError` naming the first value that is not a number.

    Text columns are parsed (a CSV with ``nan`` or ``Infinity`` in a column is read as text); what parses
    to NaN or inf is left for the finiteness check, which says so.
    """
    dtype = table.schema[column]
    if dtype.is_numeric():
        return pl.col(column).cast(pl.Float64)
    if dtype == pl.Utf8:
        parsed = pl.col(column).cast(pl.Float64, strict=False)
        bad = table.filter(pl.col(column).is_not_null() & parsed.is_null())
        if not bad.height:
            return parsed
    else:
        bad = table.filter(pl.col(column).is_not_null())
    example = bad[column][0] if bad.height else None
    raise MarketDataError(
        f"{source}: column {column!r} is not numeric ({dtype}): {bad.height} value(s) are not numbers, the "
        f"first {example!r} for {_describe_row(bad)}; prices and volumes must be plain numbers"
    )


def _describe_row(rows: pl.DataFrame) -> str:
    """The ticker and date of the first of ``rows``, for messages."""
    row = rows.row(0, named=True)
    return f"{row['tic']} on {row['date']}"


def synthetic_prices(
    tickers: int | Sequence[str] = 5,
    *,
    start: str = "2018-01-01",
    days: int = 1008,
    seed: int = 0,
) -> pl.DataFrame:
    """A seeded synthetic market in FinRL's long format (about four years of weekdays by default).

    Daily log returns are correlated across tickers (one market factor plus sector noise); the market
    switches between calm, bull and bear regimes that change drift and volatility. Open, high and low
    come from the close and intraday noise; volumes are log-normal and rise with volatility.
    """
    names = list(tickers) if not isinstance(tickers, int) else _ticker_names(tickers)
    count = len(names)
    if count < 1 or days < 2:
        raise ValueError("synthetic_prices needs at least one ticker and two days")
    rng = np.random.default_rng(seed)
    regimes = {"calm": (0.0003, 0.008), "bull": (0.0012, 0.010), "bear": (-0.0015, 0.020)}
    names_by_index = list(regimes)
    switch = np.array([[0.985, 0.010, 0.005], [0.015, 0.980, 0.005], [0.030, 0.010, 0.960]])
    regime = np.empty(days, dtype=int)
    regime[0] = 0
    for day in range(1, days):
        regime[day] = rng.choice(3, p=switch[regime[day - 1]])
    drift = np.array([regimes[names_by_index[r]][0] for r in regime])
    volatility = np.array([regimes[names_by_index[r]][1] for r in regime])

    beta = rng.uniform(0.6, 1.4, count)
    idiosyncratic = rng.uniform(0.005, 0.015, count)
    market = rng.standard_normal(days)
    noise = rng.standard_normal((days, count))
    returns = (drift[:, None] + volatility[:, None] * market[:, None]) * beta + idiosyncratic * noise
    close = rng.uniform(20, 200, count) * np.exp(np.cumsum(returns, axis=0))
    previous = np.vstack([close[:1] * np.exp(-returns[:1]), close[:-1]])
    open_ = previous * np.exp(rng.normal(0, 0.003, (days, count)))
    spread = np.abs(rng.normal(0, 0.006, (days, count))) * (1 + volatility[:, None] * 50)
    high = np.maximum(open_, close) * (1 + spread)
    low = np.minimum(open_, close) * (1 - spread)
    volume = np.round(rng.lognormal(13, 0.4, (days, count)) * (1 + volatility[:, None] * 40))

    dates = _weekdays(dt.date.fromisoformat(start), days)
    return pl.DataFrame(
        {
            "date": np.repeat(np.array(dates, dtype="datetime64[D]"), count),
            "tic": np.tile(names, days),
            "open": open_.reshape(-1).round(4),
            "high": high.reshape(-1).round(4),
            "low": low.reshape(-1).round(4),
            "close": close.reshape(-1).round(4),
            "volume": volume.reshape(-1),
        }
    ).with_columns(pl.col("date").cast(pl.Date))


def indicator_window(name: str) -> int:
    """Days of history an indicator needs, from its name (``rsi_30`` -> 30) or stockstats' default."""
    match = re.search(r"_(\d+)(?:_[a-z]+)?$", name)
    if match:
        return int(match.group(1))
    return _DEFAULT_WINDOWS.get(name, 1)


def add_indicators(
    prices: pl.DataFrame, indicators: str | Sequence[str] = DEFAULT_INDICATORS
) -> pl.DataFrame:
    """Add one column per indicator (stockstats, per ticker) and drop the warm-up days.

    ``indicators`` is a sequence of stockstats names or one comma-separated string (see `parse_indicators`).
    Values stockstats cannot define (NaN or infinite, e.g. from a flat stretch of prices) become 0.
    """
    try:
        import pandas as pd  # stockstats works on pandas DataFrames
        import stockstats
    except ImportError as exc:  # an optional extra: say how to get it
        raise ImportError(
            f"Market indicators need stockstats: pip install 'openenv-lab[finrl]' (or stockstats) ({exc})"
        ) from exc

    indicators = parse_indicators(indicators)
    if not indicators:
        return prices
    warmup = max(indicator_window(name) for name in indicators)
    dates = prices["date"].unique().sort()
    if dates.len() <= warmup + 1:
        raise MarketDataError(
            f"Too few days for the indicators: {list(indicators)} need {warmup} days of history, plus two "
            f"to trade, but the data has {dates.len()} days"
        )
    parts = []
    for _, group in prices.group_by("tic", maintain_order=True):
        group = group.sort("date")
        # Built column by column from numpy: polars' to_pandas() would need pyarrow.
        table = pd.DataFrame({c: group[c].to_numpy() for c in ("open", "high", "low", "close", "volume")})
        table.index = pd.DatetimeIndex(group["date"].to_numpy(), name="date")
        wrapped = stockstats.wrap(table)
        columns = {}
        for name in indicators:
            try:
                columns[name] = np.asarray(wrapped[name], dtype=np.float64)
            except Exception as exc:
                raise MarketDataError(
                    f"stockstats cannot compute indicator {name!r} ({exc}); use stockstats names, such as "
                    f"FinRL's defaults {', '.join(DEFAULT_INDICATORS)}"
                ) from None
        parts.append(group.with_columns(pl.Series(name, values) for name, values in columns.items()))
    result = pl.concat(parts).sort("date", "tic")
    first_full_day = dates[warmup]
    result = result.filter(pl.col("date") >= first_full_day)
    return result.with_columns(
        pl.when(pl.col(name).is_finite()).then(pl.col(name)).otherwise(0.0).alias(name) for name in indicators
    )


def add_turbulence(table: pl.DataFrame, lookback: int = TURBULENCE_LOOKBACK) -> pl.DataFrame:
    """FinRL's turbulence index: how unusual each day's returns are, as a Mahalanobis distance from the
    mean and covariance of the previous ``lookback`` days (0 until that much history exists)."""
    wide = table.pivot(on="tic", index="date", values="close").sort("date")
    closes = wide.drop("date").to_numpy()
    returns = np.vstack([np.zeros((1, closes.shape[1])), closes[1:] / closes[:-1] - 1.0])
    turbulence = np.zeros(len(closes))
    for day in range(lookback, len(closes)):
        history = returns[day - lookback : day]
        deviation = returns[day] - history.mean(axis=0)
        covariance = np.cov(history, rowvar=False)
        turbulence[day] = float(deviation @ np.linalg.pinv(np.atleast_2d(covariance)) @ deviation)
    index = pl.DataFrame({"date": wide["date"], "turbulence": turbulence})
    return table.join(index, on="date", how="left")


@dataclass(frozen=True)
class MarketData:
    """Prices and indicators as aligned arrays: ``closes[day, ticker]``, ``indicators[day, k, ticker]``.

    Attributes:
        dates: the trading days, in order.
        tickers: the tickers, in column order.
        indicator_names: the indicators, in the order of ``indicators``' second axis.
        closes: closing prices, shape (days, tickers).
        indicators: indicator values, shape (days, indicators, tickers).
        turbulence: FinRL's turbulence index per day (zeros when not computed).
        table: the long-format table the arrays came from.
    """

    dates: tuple[dt.date, ...]
    tickers: tuple[str, ...]
    indicator_names: tuple[str, ...]
    closes: np.ndarray
    indicators: np.ndarray
    turbulence: np.ndarray
    table: pl.DataFrame

    @classmethod
    def from_prices(
        cls,
        prices: pl.DataFrame,
        indicators: str | Sequence[str] = DEFAULT_INDICATORS,
        *,
        turbulence: bool = False,
    ) -> MarketData:
        """Check the prices, add indicators (names, or one comma-separated string) and turbulence, and lay
        them out as arrays."""
        indicators = parse_indicators(indicators)
        table = add_indicators(check_prices(prices), indicators)
        if turbulence:
            table = add_turbulence(table)
        tickers = tuple(table["tic"].unique(maintain_order=True).sort())
        dates = tuple(table["date"].unique().sort())
        table = table.sort("date", "tic")
        days, count = len(dates), len(tickers)
        closes = table["close"].to_numpy().reshape(days, count)
        values = (
            np.stack([table[name].to_numpy().reshape(days, count) for name in indicators], axis=1)
            if indicators
            else np.zeros((days, 0, count))
        )
        turbulence_values = (
            table["turbulence"].to_numpy().reshape(days, count)[:, 0] if turbulence else np.zeros(days)
        )
        return cls(dates, tickers, tuple(indicators), closes, values, turbulence_values, table)

    def between(self, start: dt.date | str | None = None, end: dt.date | str | None = None) -> MarketData:
        """The days from ``start`` to ``end``, both included (dates or ISO strings; None: open-ended)."""
        first = _as_date(start) if start is not None else self.dates[0]
        last = _as_date(end) if end is not None else self.dates[-1]
        keep = [i for i, day in enumerate(self.dates) if first <= day <= last]
        if len(keep) < 2:
            raise MarketDataError(
                f"Only {len(keep)} trading day(s) between {first} and {last}; the data runs from "
                f"{self.dates[0]} to {self.dates[-1]}"
            )
        lo, hi = keep[0], keep[-1] + 1
        return MarketData(
            self.dates[lo:hi],
            self.tickers,
            self.indicator_names,
            self.closes[lo:hi],
            self.indicators[lo:hi],
            self.turbulence[lo:hi],
            self.table.filter(pl.col("date").is_between(first, last)),
        )


def _as_date(value: dt.date | str) -> dt.date:
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)


def _weekdays(start: dt.date, count: int) -> list[dt.date]:
    days, day = [], start
    while len(days) < count:
        if day.weekday() < 5:
            days.append(day)
        day += dt.timedelta(days=1)
    return days


def _ticker_names(count: int) -> list[str]:
    base = ["ALFA", "BRVO", "CHRL", "DLTA", "ECHO", "FXTR", "GOLF", "HTEL", "INDI", "JULT"]
    return [base[i] if i < len(base) else f"SYN{i}" for i in range(count)]
