"""The FinRL adapter: the state vector as a ``Box``, one action per ticker, over any OpenEnv FinRL server.

Spaces (sized from the server's ``GET /config``): observation ``Box(-inf, inf, (1 + 2N + K*N,), float32)``,
action ``Box(-1, 1, (N,), float32)`` with N tickers and K indicators. ``env.unwrapped.layout`` names the
slices of the observation::

    >>> import gymnasium as gym, openenv_lab
    >>> env = gym.make("openenv/finrl")
    >>> obs, info = env.reset(seed=0)
    >>> layout = env.unwrapped.layout
    >>> float(obs[layout["cash"]][0]), obs[layout["close"]].shape, obs[layout["rsi_30"]].shape
    (1000000.0, (5,), (5,))
    >>> env.close()

and ``env.unwrapped.tickers`` the tickers, in column order.

Episode endings: the end of the data is a truncation (the market goes on); a ruined account (our server's
``end_reason="ruined"``, or a portfolio worth nothing on servers that do not say) is a termination.

Info (`FinRLAdapter.info_keys`, on every step): ``date``, ``portfolio_value``, ``cash``, ``holdings``
(shares per ticker, ``int64`` of the tickers' number), ``cost`` and ``trades`` so far (our server's; 0
from servers that do not say), ``reward_components`` (``market`` and ``costs``: the parts of the reward,
0.0 on a reset), and ``end_reason`` (``""`` until the end).

Options that describe the market (``data``, ``trade_start``, ``indicators`` and the trading parameters)
configure the embedded server this adapter starts when no ``base_url`` is given; a remote server has its
own market. Options that describe the episode (``split``, ``random_start``) are sent with every reset.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces

from ..client import Client, ProtocolError, StepResult
from ..market import parse_indicators
from ..options import curriculum_names
from .base import REWARD_COMPONENTS, Adapter, Transition, base_info
from .info_schema import InfoKey

__all__ = ["FinRLAdapter"]

#: Options of the embedded server (the market); the rest go with each reset (the episode).
SERVER_OPTIONS = (
    "data",
    "trade_start",
    "indicators",
    "initial_amount",
    "hmax",
    "buy_cost_pct",
    "sell_cost_pct",
    "reward_scaling",
    "turbulence_threshold",
)


def finrl_info_keys(tickers: int) -> tuple[InfoKey, ...]:
    """The FinRL family's info keys for a market of ``tickers`` stocks."""
    return (
        InfoKey("date", "str", "the trading day, ISO 8601"),
        InfoKey("portfolio_value", "float", "cash plus the holdings at the day's closing prices"),
        InfoKey("cash", "float", "cash"),
        InfoKey(
            "holdings",
            "array",
            "shares held per ticker, in `env.unwrapped.tickers`' order",
            shape=(tickers,),
            dtype="int64",
        ),
        InfoKey("cost", "float", "transaction costs paid so far this episode (our server's)"),
        InfoKey("trades", "int", "trades made so far this episode (our server's)"),
        InfoKey(
            REWARD_COMPONENTS,
            "dict",
            "the parts of the step's reward (our server's)",
            keys=(
                InfoKey("market", "float", "what the prices' moves made of the holdings"),
                InfoKey("costs", "float", "the step's transaction costs (negative)"),
            ),
        ),
        InfoKey(
            "end_reason", "str", "why the episode ended: `end_of_data` (truncated), `ruined` (terminated)"
        ),
    )


class FinRLAdapter(Adapter):
    """Gymnasium spaces for OpenEnv FinRL servers.

    Args:
        split: ``"train"`` (default), ``"trade"`` or ``"all"``: the period each episode trades.
        random_start: start each episode on a random day of the split (seeded by ``reset(seed=...)``).
        data: a FinRL long-format CSV/Parquet file for the embedded server (default: the synthetic market).
        trade_start: first day of the ``trade`` split (ISO date).
        indicators: technical indicators: stockstats names, as a sequence or one comma-separated string
            (``"macd, rsi_30"``, as the server's ``--indicators``); FinRL's eight by default, ``[]`` for none.
            A name stockstats does not know stops the embedded server at start, naming it.
        initial_amount, hmax, buy_cost_pct, sell_cost_pct, reward_scaling, turbulence_threshold: the
            trading rules of `openenv_lab.market.trading`.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = gym.make("openenv/finrl", split="trade")
        >>> env.observation_space.shape, env.action_space
        ((51,), Box(-1.0, 1.0, (5,), float32))
        >>> env.close()
    """

    server_name: ClassVar[str | None] = "finrl"
    family: ClassVar[str] = "finrl"
    render_modes: ClassVar[tuple[str, ...]] = ("ansi",)
    env_attributes: ClassVar[tuple[str, ...]] = ("layout", "tickers")
    reset_option_names: ClassVar[tuple[str, ...]] = curriculum_names("finrl")

    def __init__(
        self,
        *,
        split: str = "train",
        random_start: bool = False,
        data: str | os.PathLike[str] | None = None,
        trade_start: str | None = None,
        indicators: str | Sequence[str] | None = None,
        initial_amount: float | None = None,
        hmax: int | None = None,
        buy_cost_pct: float | None = None,
        sell_cost_pct: float | None = None,
        reward_scaling: float | None = None,
        turbulence_threshold: float | None = None,
    ) -> None:
        self.check_reset_option("split", split)
        self.check_reset_option("random_start", random_start)
        self.reset_options = {"split": split, "random_start": bool(random_start)}
        market = {
            "data": os.path.abspath(data) if data is not None else None,
            "trade_start": trade_start,
            "indicators": ",".join(parse_indicators(indicators)) if indicators is not None else None,
            "initial_amount": initial_amount,
            "hmax": hmax,
            "buy_cost_pct": buy_cost_pct,
            "sell_cost_pct": sell_cost_pct,
            "reward_scaling": reward_scaling,
            "turbulence_threshold": turbulence_threshold,
        }
        self.server_options = {k: v for k, v in market.items() if v is not None}
        self.config: dict[str, Any] = {}
        self.layout: dict[str, slice] = {}
        self.tickers: list[str] = []
        self._last: StepResult | None = None

    def check_reset_option(self, name: str, value: Any) -> None:
        if name == "split" and value not in ("train", "trade", "all"):
            raise ValueError(f"split must be one of train, trade, all, got {value!r}")
        if name == "random_start" and not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"random_start must be True or False, got {value!r}")

    def set_reset_option(self, name: str, value: Any) -> None:
        super().set_reset_option(name, bool(value) if name == "random_start" else value)

    def setup(self, client: Client, first: StepResult | None) -> None:
        config = client.get("/config")
        try:
            stock_dim = int(config["stock_dim"])
            indicators = list(config.get("tech_indicators") or [])
            state_space = int(config.get("state_space", 1 + 2 * stock_dim + len(indicators) * stock_dim))
        except (KeyError, TypeError, ValueError):
            raise ProtocolError(
                f"{client.base_url}/config does not describe a FinRL market (got {config!r})",
                url=client.base_url,
            ) from None
        if state_space != 1 + 2 * stock_dim + len(indicators) * stock_dim:
            raise ProtocolError(
                f"{client.base_url}/config says state_space={state_space}, but {stock_dim} tickers and "
                f"{len(indicators)} indicators make {1 + 2 * stock_dim + len(indicators) * stock_dim}"
            )
        self.config = config
        self.tickers = list(config.get("tickers") or [f"stock_{i}" for i in range(stock_dim)])
        n = stock_dim
        self.info_keys = finrl_info_keys(n)
        self.layout = {"cash": slice(0, 1), "close": slice(1, 1 + n), "holdings": slice(1 + n, 1 + 2 * n)}
        for k, name in enumerate(indicators):
            self.layout[name] = slice(1 + 2 * n + k * n, 1 + 2 * n + (k + 1) * n)
        self.observation_space = spaces.Box(-np.inf, np.inf, (state_space,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, (stock_dim,), dtype=np.float32)

    def encode_action(self, action: Any) -> dict[str, Any]:
        return {"actions": np.asarray(action, dtype=np.float64).tolist()}

    def decode(self, result: StepResult, sent: dict[str, Any] | None) -> Transition:
        raw = result.observation
        metadata = result.metadata
        state = raw.get("state")
        if not isinstance(state, list) or len(state) != self.observation_space.shape[0]:
            raise ProtocolError(
                f"A FinRL observation needs a 'state' of {self.observation_space.shape[0]} numbers; got "
                f"{len(state) if isinstance(state, list) else type(state).__name__}"
            )
        value = raw.get("portfolio_value", 0.0)
        try:
            observation = np.asarray(state, dtype=np.float32)  # null (a NaN in JSON) becomes NaN
            value = float(value)
        except (TypeError, ValueError):
            observation, value = np.array([np.nan]), np.nan
        # One reduction instead of isfinite's array and all(): float32 values summed as float64 cannot
        # overflow, so the sum is finite exactly when every value is.
        if not (math.isfinite(observation.sum(dtype=np.float64)) and math.isfinite(value)):
            raise ProtocolError(
                "The FinRL server sent a state or portfolio value that is not a finite number (NaN, "
                "infinity, or null, as JSON writes them), which comes from NaN, infinite or empty prices in "
                "its market data: check the data it serves"
            )
        self._last = result
        info = base_info(result)
        if "date" in raw:
            info["date"] = raw["date"]
        info["portfolio_value"] = value
        info["cash"] = metadata.get("cash", state[0])
        info["holdings"] = metadata.get("holdings", state[self.layout["holdings"]])
        for key in ("cost", "trades"):
            if key in metadata:
                info[key] = metadata[key]
        terminated = truncated = False
        if result.done:
            reason = metadata.get("end_reason") or ("ruined" if value <= 0 else "end_of_data")
            info["end_reason"] = reason
            terminated = reason == "ruined"
            truncated = not terminated
        reward = 0.0 if result.reward is None else result.reward
        return Transition(observation, reward, terminated, truncated, info)

    def describe_action(self, action: Any) -> str:
        shares = (np.clip(np.asarray(action, dtype=np.float64), -1, 1) * self.config.get("hmax", 100)).astype(
            int
        )
        return ", ".join(f"{t} {s:+d}" for t, s in zip(self.tickers, shares, strict=True) if s) or "hold"

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> dict[str, Any]:
        return {
            "date": str(info["date"]),
            "portfolio_value": float(info["portfolio_value"]),
            "cash": float(info["cash"]),
            "holdings": info["holdings"].tolist(),
            "close": np.asarray(observation[self.layout["close"]], dtype=np.float64).tolist(),
            "end_reason": info["end_reason"] or None,  # the info's neutral value is the recording's null
        }

    def trajectory_metadata(self) -> dict[str, Any]:
        return {
            "tickers": list(self.tickers),
            "indicators": list(self.config.get("tech_indicators", [])),
            "initial_amount": self.config.get("initial_amount"),
        }

    def render(self, mode: str) -> Any:
        if mode != "ansi":
            return super().render(mode)
        if self._last is None:
            return "(no observation yet)\n"
        raw = self._last.observation
        state = raw["state"]
        holdings = state[self.layout["holdings"]]
        closes = state[self.layout["close"]]
        lines = [
            f"{raw.get('date', '')}  portfolio {raw.get('portfolio_value', 0):,.2f}  cash {state[0]:,.2f}"
        ]
        lines += [
            f"  {ticker:<8} {int(shares):>6} shares at {price:>10.2f}"
            for ticker, shares, price in zip(self.tickers, holdings, closes, strict=True)
        ]
        return "\n".join(lines) + "\n"
