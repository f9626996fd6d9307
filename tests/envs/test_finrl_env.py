"""``gym.make("openenv/finrl")``: the state vector, honest episode ends, custom data, SB3 training."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import polars as pl
import pytest

import openenv_lab
from openenv_lab.market import synthetic_prices
from tests.helpers import check_env_warnings


@pytest.fixture(scope="module")
def finrl():
    env = gym.make("openenv/finrl")
    yield env
    env.close()


@pytest.mark.slow
def test_spaces_and_layout(finrl):
    layout = finrl.unwrapped.layout
    assert finrl.observation_space.shape == (1 + 2 * 5 + 8 * 5,)
    assert finrl.action_space == gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
    assert list(layout)[:4] == ["cash", "close", "holdings", "macd"]
    obs, info = finrl.reset(seed=0)
    assert obs in finrl.observation_space
    assert obs[layout["cash"]][0] == info["cash"] == info["portfolio_value"] == 1_000_000
    assert (obs[layout["holdings"]] == 0).all() and info["holdings"].tolist() == [0] * 5
    assert info["date"] == "2018-03-26"
    assert len(finrl.unwrapped.tickers) == 5


def test_an_episode_ends_in_truncation_at_the_end_of_the_data(finrl):
    obs, info = finrl.reset(seed=0, options={"split": "trade"})
    assert info["date"] == "2021-01-01"
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated):
        obs, _, terminated, truncated, info = finrl.step(finrl.action_space.sample())
        steps += 1
    assert truncated and not terminated and info["end_reason"] == "end_of_data"
    first, last, days = finrl.unwrapped.adapter.config["splits"]["trade"]
    assert (first, last) == ("2021-01-01", info["date"])
    assert steps == days - 1  # one step per trading day but the last
    layout = finrl.unwrapped.layout
    value = obs[layout["cash"]][0] + obs[layout["close"]] @ obs[layout["holdings"]]
    assert value == pytest.approx(info["portfolio_value"], rel=1e-6)


def test_random_starts_follow_the_seed(finrl):
    starts = {finrl.reset(seed=s, options={"random_start": True})[1]["date"] for s in range(5)}
    assert len(starts) > 1
    first = finrl.reset(seed=3, options={"random_start": True})[1]["date"]
    assert finrl.reset(seed=3, options={"random_start": True})[1]["date"] == first


def test_check_env_passes(finrl):
    said = check_env_warnings(finrl.unwrapped, skip_render_check=True)
    messages = [message for message in said if "infinity" not in message]
    assert messages == []  # only gymnasium's note that an unbounded Box is unbounded


def test_wrong_action_length_is_refused_before_sending(finrl):
    finrl.reset(seed=0)
    sent = finrl.unwrapped.session.bytes_sent
    with pytest.raises(ValueError, match="not in the action space"):
        finrl.step(np.zeros(3, dtype=np.float32))
    assert finrl.unwrapped.session.bytes_sent == sent


def test_ansi_render(finrl):
    env = gym.make("openenv/finrl", render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert "portfolio 1,000,000.00" in text and "ALFA" in text
    env.close()


@pytest.mark.slow
def test_own_data_file_through_the_embedded_server(tmp_path):
    path = tmp_path / "market.csv"
    synthetic_prices(["AAA", "BBB"], days=200, seed=4).write_csv(path)
    env = gym.make("openenv/finrl", data=str(path), trade_start="2018-08-01", indicators=["rsi_30", "macd"])
    assert env.observation_space.shape == (1 + 2 * 2 + 2 * 2,)
    assert env.unwrapped.tickers == ["AAA", "BBB"]
    assert list(env.unwrapped.layout)[3:] == ["rsi_30", "macd"]
    _, info = env.reset(seed=0, options={"split": "trade"})
    assert info["date"] >= "2018-08-01"
    env.close()


@pytest.mark.slow
def test_a_bad_data_file_fails_at_make_naming_the_problem(tmp_path):
    path = tmp_path / "market.csv"
    synthetic_prices(["AAA", "BBB"], days=200, seed=4).drop("volume").write_csv(path)
    with pytest.raises(openenv_lab.LaunchError, match=r"lacks the column\(s\) \['volume'\]"):
        gym.make("openenv/finrl", data=str(path))
    with pytest.raises(openenv_lab.LaunchError, match="No market data file"):
        gym.make("openenv/finrl", data=str(tmp_path / "missing.csv"))


def test_market_options_and_a_remote_url_do_not_mix(finrl):
    with pytest.raises(ValueError, match="configure the embedded server"):
        gym.make("openenv/finrl", base_url=finrl.unwrapped.base_url, data="x.csv")


def test_unknown_split_is_a_server_error(finrl):
    with pytest.raises(openenv_lab.ServerError, match="split must be one of"):
        finrl.reset(seed=0, options={"split": "validation"})


@pytest.mark.slow
def test_stable_baselines3_ppo_trains_on_it():
    import torch
    from stable_baselines3 import PPO

    env = gym.make("openenv/finrl")
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, n_epochs=1, seed=0, device="cpu")
    before = [parameter.detach().clone() for parameter in model.policy.parameters()]
    model.learn(total_timesteps=256)
    # It learned from rewards that say something (mutations guarded: a constant reward, no update).
    assert np.ptp(model.rollout_buffer.rewards) > 0
    after = list(model.policy.parameters())
    assert any(not torch.equal(old, new) for old, new in zip(before, after, strict=True))
    obs, _ = env.reset(seed=0, options={"split": "trade"})
    action, _ = model.predict(obs, deterministic=True)
    assert action.shape == (5,) and env.action_space.contains(action.astype(np.float32))
    env.close()


def test_the_polars_table_is_available_for_analysis():
    from openenv_lab.market import MarketData

    market = MarketData.from_prices(synthetic_prices(tickers=2, days=120, seed=0))
    assert isinstance(market.table, pl.DataFrame) and "rsi_30" in market.table.columns


@pytest.mark.slow
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_price_fails_at_make_not_at_a_later_step(tmp_path, bad):
    prices = synthetic_prices(["AAA", "BBB"], days=200, seed=4).sort("date", "tic")
    prices = prices.with_columns(
        pl.when(pl.int_range(pl.len()) == 301).then(bad).otherwise(pl.col("close")).alias("close")
    )
    path = tmp_path / "market.parquet"
    prices.write_parquet(path)
    with pytest.raises(
        openenv_lab.LaunchError, match=r"column 'close' has 1 missing or non-finite.* BBB on 2018-"
    ):
        gym.make("openenv/finrl", data=str(path), split="all")


def test_a_non_finite_state_from_a_server_is_a_protocol_error():
    from openenv_lab.adapters.finrl import FinRLAdapter
    from openenv_lab.client import ProtocolError, StepResult

    adapter = FinRLAdapter()
    adapter.observation_space = gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)
    adapter.layout = {"cash": slice(0, 1), "close": slice(1, 3), "holdings": slice(3, 5)}
    sent = {"state": [1000.0, None, 10.0, 0, 0], "portfolio_value": None, "date": "2021-01-04"}
    with pytest.raises(ProtocolError, match="not a finite number"):
        adapter.decode(StepResult(sent, 0.0, False), {"actions": [0.0]})


@pytest.mark.slow
def test_indicators_as_a_comma_separated_string():
    env = gym.make("openenv/finrl", indicators=" macd, ,rsi_30 ")
    assert env.observation_space.shape == (1 + 2 * 5 + 2 * 5,)
    assert list(env.unwrapped.layout)[3:] == ["macd", "rsi_30"]
    env.reset(seed=0)
    env.close()


@pytest.mark.slow
def test_bad_indicators_are_named_at_make():
    with pytest.raises(ValueError, match="lists macd more than once"):
        gym.make("openenv/finrl", indicators="macd,rsi_30,macd")  # refused before a server starts
    with pytest.raises(openenv_lab.LaunchError, match="cannot compute indicator 'nonsense'"):
        gym.make("openenv/finrl", indicators="macd,nonsense")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"split": "test"}, "split must be one of train, trade, all"),
        ({"random_start": "yes"}, "True or False"),
    ],
)
def test_episode_options_are_checked_at_make(options, message):
    with pytest.raises(ValueError, match=message):
        gym.make("openenv/finrl", launcher="docker", **options)  # refused before any server is started


def test_reward_components_add_up_to_the_reward_and_are_recorded():
    env = openenv_lab.RecordTrajectory(gym.make("openenv/finrl"))
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    costs = []
    for _ in range(5):
        _, reward, _, _, info = env.step(rng.uniform(-1, 1, 5).astype(np.float32))
        parts = info["reward_components"]
        assert set(parts) == {"market", "costs"}
        assert parts["market"] + parts["costs"] == pytest.approx(reward, abs=1e-9)
        costs.append(parts["costs"])
    assert min(costs) < 0  # buying and selling costs something, and it shows
    table = env.trajectory.table
    env.close()
    assert table["reward.costs"].to_list()[1:] == pytest.approx(costs)
    assert table["reward.costs"][0] is None  # the reset row has no reward
