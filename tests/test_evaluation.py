"""openenv_lab.evaluate and compare: one row per seed whatever the parallelism, failures kept apart, a server
that goes away, the statistics, the verdicts and the report's picture."""

from __future__ import annotations

import copy
import io
import os
import re
import signal
import time

import chess
import gymnasium as gym
import numpy as np
import polars as pl
import pytest
from PIL import Image

import openenv_lab
from openenv_lab.adapters.chess_encoding import uci_to_index
from openenv_lab.evaluation import Evaluation, EvaluationComparison, bootstrap_interval
from openenv_lab.launch import EmbeddedServer


def reference_returns(seeds, **options) -> list[tuple[float, int]]:
    """masked-random as documented, played on a single env: each episode's sampler seeded with its seed."""
    env = gym.make("openenv/chess", **options)
    results = []
    for seed in seeds:
        space = copy.deepcopy(env.action_space)
        space.seed(seed)
        obs, _ = env.reset(seed=seed)
        total, length, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(
                space.sample(mask=obs["action_mask"].astype(np.int8))
            )
            total, length, done = total + reward, length + 1, terminated or truncated
        results.append((total, length))
    env.close()
    return results


@pytest.mark.slow
def test_the_same_seeds_give_the_same_table_whatever_the_number_of_sessions():
    options = {"max_moves": 30, "opponent": "greedy", "agent_color": "white"}
    seeds = list(range(10))
    expected = reference_returns(seeds, **options)
    for n_envs in (1, 3, 8):
        result = openenv_lab.evaluate(
            "masked-random", "chess", seeds=seeds, n_envs=n_envs, progress=False, **options
        )
        assert result.episodes["seed"].to_list() == seeds
        assert list(zip(result.episodes["return"], result.episodes["length"], strict=True)) == expected, (
            n_envs
        )
        assert result.episodes["failed"].sum() == 0 and result.complete


def test_rows_carry_the_identity_and_how_each_episode_ended():
    result = openenv_lab.evaluate(
        lambda obs: "hello", "openenv/echo", episodes=5, n_envs=2, max_steps=3, progress=False
    )
    table = result.episodes
    assert table.height == 5 and table["length"].to_list() == [3] * 5
    assert table["truncated"].all() and not table["terminated"].any()
    assert table["return"].to_list() == [1.5] * 5  # 0.1 per character, 3 messages of 5
    assert set(table["env_id"]) == {"openenv/echo"} and set(table["server_name"]) == {"echo"}
    server = openenv_lab.Client(result.identity["base_url"]).identity()
    assert table["schema_sha256"][0] == server["schema_sha256"]
    assert table["server_version"][0] == server["version"] and server["version"]
    assert table["policy"][0] == "<lambda>" and (table["wall_s"] > 0).all()
    assert table.null_count().select("seed", "return", "length", "wall_s").sum_horizontal().item() == 0
    # Typed columns even where every value is None (no errors, no tasks): tables of runs concatenate.
    assert dict(
        table.select("seed", "return", "length", "terminated", "error", "wall_s", "task_id").schema
    ) == {
        "seed": pl.Int64,
        "return": pl.Float64,
        "length": pl.Int64,
        "terminated": pl.Boolean,
        "error": pl.Utf8,
        "wall_s": pl.Float64,
        "task_id": pl.Utf8,
    }
    summary = result.summary()
    assert summary["mean"] == 1.5 and summary["std"] == 0 and summary["failed"] == 0
    assert (summary["ci_low"], summary["ci_high"]) == (1.5, 1.5)


def test_a_policy_that_raises_or_returns_a_bad_action_fails_that_episode_only():
    calls = {"n": 0}

    def flaky(obs):
        calls["n"] += 1
        if calls["n"] % 7 == 0:
            raise RuntimeError("out of ideas")
        if calls["n"] % 11 == 0:
            return 12345  # not a message
        return "hi"

    result = openenv_lab.evaluate(flaky, "openenv/echo", episodes=12, n_envs=4, max_steps=4, progress=False)
    table = result.episodes
    assert table.height == 12 and table["seed"].to_list() == list(range(12))
    failed = table.filter(pl.col("failed"))
    assert failed.height > 0 and table.filter(~pl.col("failed"))["length"].to_list() == [4] * (
        12 - failed.height
    )
    errors = set(failed["error"])
    assert any("RuntimeError: out of ideas" in e for e in errors)
    assert any("returned 12345" in e and "not in the action space" in e for e in errors)
    assert result.summary()["failed"] == failed.height
    assert f"{failed.height} failed" in str(result)


def test_a_server_that_goes_away_keeps_what_was_played_and_says_so():
    server = EmbeddedServer("echo", max_steps=3)
    url = server.start()
    steps = {"n": 0}

    def killer(obs):
        steps["n"] += 1
        if steps["n"] == 20:
            os.kill(server._process.pid, signal.SIGKILL)
        return "hi"

    try:
        with pytest.warns(RuntimeWarning, match=r"went away after \d+ of 30 episodes") as said:
            result = openenv_lab.evaluate(
                killer, "openenv/echo", episodes=30, n_envs=2, base_url=url, progress=False
            )
    finally:
        server.stop()
    (went,) = [warning for warning in said if "went away" in str(warning.message)]  # others may come too
    assert result.complete is False and went.filename == __file__  # the warning points at the call
    finished = result.episodes.filter(~pl.col("failed"))
    assert 0 < finished.height < 30 and finished["length"].to_list() == [3] * finished.height
    assert result.episodes.filter(pl.col("failed"))["error"].str.contains("went away").all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"episodes": 0}, "^episodes must be at least 1, got 0$"),
        ({"episodes": 3, "seeds": [1, 2]}, "^episodes=3 but 2 seeds were given: one episode per seed$"),
        ({"seeds": [1, 1]}, "^seeds has duplicates: each seed is one episode, and comparisons pair by seed$"),
        ({"seeds": []}, "^seeds is empty: give at least one$"),
        ({"n_envs": 0}, "^n_envs must be at least 1, got 0$"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(kwargs, message):
    with pytest.raises(ValueError, match=message):
        openenv_lab.evaluate("random", "openenv/echo", progress=False, **kwargs)


def test_an_unknown_environment_or_policy_is_named():
    with pytest.raises(ValueError, match=r"Unknown environment id 'chesss'.*openenv/chess"):
        openenv_lab.evaluate("random", "chesss")
    with pytest.raises(ValueError, match="not one of"):
        openenv_lab.evaluate("greedy", "openenv/echo", episodes=1, progress=False)
    with pytest.raises(
        TypeError,
        match=r"^policy must be a callable obs -> action, a model with predict\(\), or one of "
        r"\('random', 'masked-random'\); got int$",
    ):
        openenv_lab.evaluate(42, "openenv/echo", episodes=1, progress=False)
    with pytest.raises(TypeError, match=r"^env must be an environment id or an environment, got int$"):
        openenv_lab.evaluate("random", 42, episodes=1, progress=False)


def test_environments_made_by_the_caller_are_used_and_left_open():
    envs = gym.make_vec("openenv/echo", num_envs=3, max_steps=2)
    result = openenv_lab.evaluate(lambda obs: "ab", envs, episodes=4, progress=False)
    assert result.episodes["return"].to_list() == [0.4] * 4 and result.identity["env_id"] == "openenv/echo"
    envs.reset(seed=0)  # still open
    envs.close()
    unnamed = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")])  # no spec: named by its class
    result = openenv_lab.evaluate(lambda obs: 0, unnamed, episodes=2, progress=False)
    assert result.identity["env_id"] == "SyncVectorEnv" and result.episodes["terminated"].all()
    unnamed.close()
    from gymnasium.envs.classic_control import CartPoleEnv

    result = openenv_lab.evaluate(lambda obs: 0, CartPoleEnv(), episodes=1, progress=False)
    assert result.identity["env_id"] == "CartPoleEnv"
    single = gym.make("CartPole-v1")
    result = openenv_lab.evaluate(lambda obs: 0, single, episodes=3, progress=False)
    assert result.episodes["terminated"].all() and result.identity["env_id"] == "CartPole-v1"
    identity = result.episodes.select("server_name", "server_version", "schema_sha256")
    assert set(identity.schema.values()) == {pl.Utf8} and identity.null_count().row(0) == (3, 3, 3)
    single.reset(seed=0)
    single.close()
    ours = gym.make("openenv/echo", max_steps=2)  # a single env of ours: its server named all the same
    result = openenv_lab.evaluate(lambda obs: "ab", ours, episodes=2, progress=False)
    assert result.episodes["return"].to_list() == [0.4] * 2
    assert (result.identity["server_name"], result.identity["base_url"]) == ("echo", ours.unwrapped.base_url)
    ours.close()


def test_an_id_with_an_adapter_instance_plays_one_env_one_episode_at_a_time():
    """An adapter instance serves one session, so `evaluate` makes one env with it, not a vector env (which
    refuses it), and plays the seeds in turn on it."""
    from openenv_lab.adapters.generic import GenericAdapter
    from openenv_lab.launch import shared_embedded_server

    url = shared_embedded_server("echo").base_url
    adapter = GenericAdapter()  # the echo server's own episodes never end: gymnasium's TimeLimit ends them
    result = openenv_lab.evaluate(
        lambda obs: "abc",
        "openenv/remote",
        episodes=3,
        n_envs=4,
        progress=False,
        base_url=url,
        adapter=adapter,
        max_episode_steps=2,
    )
    assert result.episodes["seed"].to_list() == [0, 1, 2] and result.complete
    assert result.episodes["return"].to_list() == pytest.approx([0.6] * 3)
    assert result.episodes["length"].to_list() == [2] * 3 and result.episodes["truncated"].all()
    assert (result.identity["env_id"], result.identity["server_name"]) == ("openenv/remote", "echo")
    assert result.identity["base_url"] == url and adapter.server_names  # the instance given was the one used


def test_a_stable_baselines3_model_is_a_policy():
    from stable_baselines3 import PPO

    env = gym.make("CartPole-v1")
    model = PPO("MlpPolicy", env, seed=0, device="cpu")
    result = openenv_lab.evaluate(model, "CartPole-v1", episodes=4, n_envs=2, progress=False)
    again = openenv_lab.evaluate(model, "CartPole-v1", episodes=4, n_envs=4, progress=False)
    assert (
        result.policy == "PPO" and result.episodes["length"].to_list() == again.episodes["length"].to_list()
    )
    # The model's own deterministic play, episode by episode, is what evaluate measures.
    reference = []
    for seed in range(4):
        obs, _ = env.reset(seed=seed)
        done, total = False, 0.0
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(model.predict(obs, deterministic=True)[0]))
            total, done = total + float(reward), terminated or truncated
        reference.append(total)
    assert not result.episodes["failed"].any() and result.episodes["return"].to_list() == reference
    env.close()


class MaskReader:
    """A model whose ``predict`` takes the action masks, as sb3-contrib's ``MaskablePPO``'s does: it plays
    the first legal move, and keeps what it was given (mutations of the masks' path left tests passing)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail, self.given = fail, []

    def predict(self, observation, state=None, episode_start=None, deterministic=False, action_masks=None):
        self.given.append((observation, deterministic, action_masks))
        if self.fail:
            raise ValueError("no moves today")
        return np.argmax(action_masks, axis=1), None


def test_a_model_that_takes_masks_gets_the_batchs_masks_and_plays_legal_moves():
    model = MaskReader()
    result = openenv_lab.evaluate(model, "openenv/chess", episodes=3, n_envs=2, max_moves=3, progress=False)
    assert result.policy == "MaskReader" and not result.episodes["failed"].any()
    assert (result.episodes["length"] > 0).all()
    for observation, deterministic, masks in model.given:
        assert deterministic is True and masks.dtype == bool
        assert np.array_equal(masks, observation["action_mask"].astype(bool)) and masks.any(axis=1).all()

    class NoMasks:  # a model whose predict() takes no masks gets none: it reads them from the batch
        def predict(self, observation, state=None, episode_start=None, deterministic=False):
            return np.argmax(observation["action_mask"], axis=1), None

    plain = openenv_lab.evaluate(NoMasks(), "chess", episodes=2, n_envs=2, max_moves=2, progress=False)
    assert not plain.episodes["failed"].any()
    broken = openenv_lab.evaluate(
        MaskReader(fail=True), "openenv/chess", episodes=2, n_envs=2, progress=False
    )
    assert (
        broken.episodes["error"].to_list() == ["the model's predict() raised ValueError: no moves today"] * 2
    )


def test_the_progress_bar_counts_episodes(capsys):
    openenv_lab.evaluate(lambda obs: "x", "openenv/echo", episodes=3, n_envs=3, max_steps=1, progress=True)
    err = capsys.readouterr().err
    assert "3/3" in err and "<lambda> on openenv/echo: " in err and re.search(r"episode/s|s/episode", err)
    openenv_lab.evaluate(lambda obs: "x", "openenv/echo", episodes=2, n_envs=2, max_steps=1)
    assert "2/2" in capsys.readouterr().err  # shown by default


def test_the_bootstrap_interval_holds_the_mean_and_is_repeatable():
    rng = np.random.default_rng(1)
    values = rng.normal(5.0, 2.0, size=200)
    low, high = bootstrap_interval(values)
    assert low < values.mean() < high
    sem = values.std(ddof=1) / np.sqrt(values.size)
    assert (high - low) / 2 == pytest.approx(1.96 * sem, rel=0.1)  # the normal interval, near enough
    assert bootstrap_interval(values) == (low, high)
    assert np.isnan(bootstrap_interval([1.0])).all()
    # The mutation pass: the default seed is 0 (an interval a report prints is the one a rerun prints,
    # and the one seed=0 names), and two values are enough for an interval.
    assert bootstrap_interval(values, seed=0) == (low, high) != bootstrap_interval(values, seed=1)
    pair = bootstrap_interval([1.0, 3.0])
    assert 1.0 <= pair[0] < 2.0 < pair[1] <= 3.0
    # A long list is resampled in blocks (bounded memory): every block filled, the same interval shape.
    long = rng.normal(5.0, 2.0, size=1000)
    low, high = bootstrap_interval(long)
    assert low < long.mean() < high
    assert (high - low) / 2 == pytest.approx(1.96 * long.std(ddof=1) / np.sqrt(long.size), rel=0.1)


def evaluation(
    returns: dict[int, float], *, env_id: str = "openenv/echo", version: str = "0.1.0", policy: str = "p"
) -> Evaluation:
    table = pl.DataFrame({"seed": list(returns), "return": list(returns.values())}).with_columns(
        pl.lit(False).alias("failed")
    )
    identity = {"env_id": env_id, "server_name": "echo", "server_version": version, "schema_sha256": "abc"}
    return Evaluation(table, identity, policy=policy)


def test_a_clear_winner_is_named_with_its_interval_and_p_value():
    a = evaluation({s: 1.0 + 0.1 * (s % 3) for s in range(12)}, policy="capture")
    b = evaluation({s: 0.1 * (s % 3) for s in range(12)}, policy="random")
    result = openenv_lab.compare(a, b)
    assert isinstance(result, EvaluationComparison)
    assert result.mean == pytest.approx(1.0) and result.ci == pytest.approx((1.0, 1.0))
    assert result.p_value == pytest.approx(2 / 2**12)  # exact: only all-plus and all-minus are as extreme
    assert result.verdict.startswith("capture beats random by 1")
    assert "p = 0.00049" in result.verdict and "12 paired seeds" in result.verdict
    flipped = openenv_lab.compare(b, a)
    assert flipped.verdict.startswith("capture beats random by 1")


def _exact_sign_flip_p_value(differences) -> float:
    """The sign-flip p-value by exact enumeration, for whole-number differences: the distribution of the
    sum of +-d over every sign pattern, counted by dynamic programming instead of listing 2**n patterns."""
    counts = {0: 1}
    nonzero = [int(d) for d in differences if d != 0]
    for d in nonzero:
        following: dict[int, int] = {}
        for total, ways in counts.items():
            for signed in (total + d, total - d):
                following[signed] = following.get(signed, 0) + ways
        counts = following
    observed = abs(sum(nonzero))
    return sum(ways for total, ways in counts.items() if abs(total) >= observed) / 2 ** len(nonzero)


@pytest.mark.parametrize(
    ("differences", "winner"),
    [
        # 24 pairs differ (two more are ties): past the 16 enumerated exactly, so p is sampled; exact 0.0136.
        ([3, 1, 2, -1, 2, 1, 2, 3, 1, 1, -1, 2, 1, -3, 2, 1, 1, 1, 2, 1, -1, 1, 0, 0, 1, -2], True),
        # 22 pairs differ, no winner: exact 0.694.
        ([1, -1, 2, -2, 1, 1, -1, 3, -2, 1, -1, 2, -3, 1, 1, -1, 2, -1, 1, -2, 1, 1], False),
    ],
)
def test_past_sixteen_differing_pairs_the_sampled_p_value_matches_the_exact_one(differences, winner):
    """Guards the sampled branch of the sign-flip test (mutation: always p = 1.0, or a sampler that
    ignores the signs): with 20,000 draws its p-value is within four standard errors of the exact one,
    and the verdict names a winner exactly when the exact test does."""
    exact = _exact_sign_flip_p_value(differences)
    a = evaluation({seed: 10.0 + d for seed, d in enumerate(differences)}, policy="capture")
    b = evaluation(dict.fromkeys(range(len(differences)), 10.0), policy="random")
    result = openenv_lab.compare(a, b)
    error = np.sqrt(exact * (1 - exact) / 20_000)
    assert abs(result.p_value - exact) < 4 * error + 1e-12, (result.p_value, exact)
    assert (exact < 0.05) == winner
    assert result.verdict.startswith("capture beats random by") == winner, result.verdict
    if not winner:
        assert result.verdict.startswith("No difference detectable")


def test_no_detectable_difference_says_how_many_episodes_would_be_needed():
    rng = np.random.default_rng(3)
    noise = rng.normal(0.0, 1.0, size=30)
    a = evaluation({s: float(noise[s]) + 0.1 for s in range(30)}, policy="a")
    b = evaluation({s: float(rng.normal(0.0, 1.0)) for s in range(30)}, policy="b")
    result = openenv_lab.compare(a, b)
    low, high = result.ci
    assert low < 0 < high
    d = result.pairs["difference"].to_numpy()
    expected = int(np.ceil(((1.96 + 0.8416) * d.std(ddof=1) / abs(d.mean())) ** 2))
    assert result.needed == expected
    assert result.verdict.startswith("No difference detectable with 30 episodes")
    assert f"about {expected:,} paired episodes would be needed" in result.verdict


def test_identical_returns_are_said_to_be_identical():
    a = evaluation(dict.fromkeys(range(5), 1.0), policy="a")
    same = openenv_lab.compare(a, evaluation(dict.fromkeys(range(5), 1.0), policy="b"))
    assert same.verdict == "a and b got the same return on each of the 5 seeds."
    assert same.p_value == 1.0  # no pair differs: nothing is evidence (mutation: p = 2.0)


# What the verdicts say, word for word where a reader takes numbers from them. Mutations these guard
# (survivors of a mutmut pass over evaluation.py): the confidence level left out, the ± half-width of the
# interval computed wrongly, the "would need far more episodes" branch taken for every verdict, the
# sampled p-value drawn from an unseeded generator (a comparison that changes from run to run).


def test_a_winners_verdict_gives_the_level_and_the_half_width_of_its_interval():
    rng = np.random.default_rng(0)
    a = evaluation({s: 1.0 + float(rng.normal(0, 0.2)) for s in range(20)}, policy="a")
    b = evaluation({s: float(rng.normal(0, 0.2)) for s in range(20)}, policy="b")
    result = EvaluationComparison(a, b, confidence=0.9)
    low, high = result.ci
    assert result.verdict.startswith(f"a beats b by {abs(result.mean):.3g} ± {(high - low) / 2:.2g} (90% CI")
    assert f"{low:+.3g} to {high:+.3g}), p = {result.p_value:.2g}, over 20 paired seeds." in result.verdict


def test_no_difference_says_the_level_and_when_no_count_of_episodes_would_do():
    # A mean difference of exactly zero with some spread: no number of episodes detects it.
    a = evaluation({s: float(s % 2) for s in range(10)}, policy="a")
    b = evaluation({s: float((s + 1) % 2) for s in range(10)}, policy="b")
    result = openenv_lab.compare(a, b)
    assert result.mean == 0.0 and result.needed is None
    assert "(95% CI" in result.verdict
    assert result.verdict.endswith("a difference this small would need far more episodes.")
    some = openenv_lab.compare(
        evaluation({s: float(s % 3) + 0.1 for s in range(12)}, policy="a"),
        evaluation({s: float((s + 1) % 3) for s in range(12)}, policy="b"),
    )
    assert some.needed is not None
    assert some.verdict.endswith("would be needed to detect a difference of this size (80% power).")
    # Three pairs all one way: the normal approximation asks for 1 or 2, the sign-flip test for 6 at least.
    few = openenv_lab.compare(evaluation({0: 1.0, 1: 1.1, 2: 1.2}), evaluation({0: 0.0, 1: 0.0, 2: 0.0}))
    assert few.p_value == 2 / 8 and few.needed == 6
    assert "about 6 paired episodes would be needed" in few.verdict


def test_a_sampled_p_value_is_the_same_every_time():
    differences = [3, 1, 2, -1, 2, 1, 2, 3, 1, 1, -1, 2, 1, -3, 2, 1, 1, 1, 2, 1, -1, 1, 1, -2]
    a = evaluation({seed: 10.0 + d for seed, d in enumerate(differences)}, policy="a")
    b = evaluation(dict.fromkeys(range(len(differences)), 10.0), policy="b")
    p_values = {openenv_lab.compare(a, b).p_value for _ in range(3)}
    assert len(p_values) == 1, p_values


def test_pairs_are_the_seeds_both_played_without_failing():
    a = evaluation({0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0})
    b = evaluation({1: 0.0, 2: 0.0, 3: 1.0, 9: 5.0})
    b.episodes = b.episodes.with_columns(
        pl.when(pl.col("seed") == 3).then(True).otherwise(False).alias("failed")
    )
    result = openenv_lab.compare(a, b)
    assert result.pairs.select("seed", "a", "b").rows() == [(1, 2.0, 0.0), (2, 3.0, 0.0)]
    with pytest.raises(ValueError, match="at least two paired episodes"):
        openenv_lab.compare(a, evaluation({7: 1.0, 8: 1.0}))


def test_different_environments_are_refused_unless_allowed():
    a, b = evaluation(dict.fromkeys(range(4), 1.0)), evaluation(dict.fromkeys(range(4), 0.0), version="0.2.0")
    said = (
        "These evaluations are of different environments (server_version: '0.1.0' vs '0.2.0'): their "
        "returns are not comparable. Pass allow_different_envs=True to compare them anyway."
    )
    with pytest.raises(ValueError, match=re.escape(said)):
        openenv_lab.compare(a, b)
    c = evaluation(dict.fromkeys(range(4), 0.0), version="0.3.0", env_id="openenv/chess")
    with pytest.raises(ValueError, match=re.escape("(env_id: 'openenv/echo' vs 'openenv/chess'; server_ver")):
        openenv_lab.compare(a, c)
    allowed = openenv_lab.compare(a, b, allow_different_envs=True, labels=("old", "new"))
    assert allowed.mean == 1.0 and allowed.labels == ("old", "new")
    said = "compare() takes two Evaluations, or two recordings; not one of each"
    with pytest.raises(TypeError, match=re.escape(said)):
        openenv_lab.compare(a, "trajectory.parquet")


def test_the_report_draws_the_returns_the_differences_and_the_curves(tmp_path):
    a = evaluation({s: float(s) for s in range(6)}, policy="a")
    b = evaluation({s: float(s % 2) for s in range(6)}, policy="b")
    result = openenv_lab.compare(a, b, curves={"a": [0.0, 1.0, 2.0], "b": [0.0, 0.5, 0.5]})
    figure = result.figure()
    distributions, paired, learning = figure.axes
    dots = {
        line.get_label(): sorted(line.get_ydata()) for line in distributions.lines if line.get_label() in "ab"
    }
    assert dots == {"a": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0], "b": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]}
    (bars,) = paired.containers
    heights = [bar.get_height() for bar in bars]
    assert heights == sorted(result.pairs["difference"].to_list())
    assert [list(line.get_ydata()) for line in learning.lines] == [[0.0, 1.0, 2.0], [0.0, 0.5, 0.5]]
    picture = Image.open(io.BytesIO(result.png()))
    assert picture.size[0] > picture.size[1]
    page = result.to_html(tmp_path / "report.html")
    assert result.verdict.replace("'", "&#x27;") in page and 'src="data:image/png;base64,' in page
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
    for cells in (("a", "+2.5"), ("b", "+0.5"), ("a − b (paired)", "+2")):  # mean returns, and the difference
        assert "".join(f"<td>{cell}</td>" for cell in cells) in page.replace("\n", ""), cells
    bundle = result._repr_mimebundle_()
    assert (
        "application/vnd.jupyter.widget-view+json" in bundle and bundle["text/html"] == result._repr_html_()
    )


def test_compare_still_puts_two_recordings_side_by_side(chess_url):
    recorders = []
    for seed in (0, 1):
        recorder = openenv_lab.RecordTrajectory(gym.make("openenv/chess", max_moves=4))
        obs, _ = recorder.reset(seed=seed)
        recorder.step(int(np.flatnonzero(obs["action_mask"])[0]))
        recorders.append(recorder)
    comparison = openenv_lab.compare(recorders[0].trajectory, recorders[1].trajectory)
    assert type(comparison).__name__ == "Comparison"
    assert (comparison.left.title, comparison.right.title) == ("A", "B")
    named = openenv_lab.compare(recorders[0].trajectory, recorders[1].trajectory, labels=("x", "y"))
    assert (named.left.title, named.right.title) == ("x", "y")
    for recorder in recorders:
        recorder.close()


def test_a_policy_of_obs_and_info_gets_each_sub_environments_own_info():
    seen = []

    def capture_first(obs, info):
        board = chess.Board(info["fen"])
        seen.append(info["fen"] == board.fen() and info["agent_color"] in ("white", "black"))
        seen.append(int(obs["action_mask"].sum()) == board.legal_moves.count())  # its own observation too
        captures = [m for m in board.legal_moves if board.is_capture(m)]
        move = (captures or list(board.legal_moves))[0]
        return uci_to_index(move.uci(), board.turn == chess.WHITE)

    result = openenv_lab.evaluate(capture_first, "chess", episodes=6, n_envs=3, max_moves=20, progress=False)
    assert result.summary()["failed"] == 0 and all(seen) and len(seen) == 2 * result.episodes["length"].sum()


class OnlyTheLast(gym.Env):
    """Three actions, of which only the last is ever legal, by a mask of floats (not gymnasium's int8)."""

    action_space = gym.spaces.Discrete(3)
    observation_space = gym.spaces.Dict({"action_mask": gym.spaces.Box(0.0, 1.0, (3,), np.float64)})

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return {"action_mask": np.array([0.0, 0.0, 1.0])}, {}

    def step(self, action):
        self.steps += 1
        return {"action_mask": np.array([0.0, 0.0, 1.0])}, float(action == 2), self.steps == 3, False, {}


def test_masked_random_reads_a_mask_of_any_numbers():
    """A mask in an env's own dtype (floats here) still picks among the legal actions (a mutant passing it
    to gymnasium as it is failed every episode, and only a test on such an env notices)."""
    result = openenv_lab.evaluate("masked-random", OnlyTheLast(), episodes=4, progress=False)
    assert result.episodes["failed"].sum() == 0 and result.episodes["return"].to_list() == [3.0] * 4


def test_an_evaluation_where_every_episode_failed_says_so():
    result = openenv_lab.evaluate(lambda obs: 7, "openenv/echo", episodes=2, n_envs=2, progress=False)
    assert str(result) == "<lambda> on openenv/echo: all 2 episodes failed"


def test_a_few_wins_among_many_draws_are_not_called_a_difference():
    """Four wins in a hundred draws: the bootstrap interval excludes zero, the exact test does not."""
    a = evaluation({s: 1.0 if s < 4 else 0.0 for s in range(100)}, policy="a")
    b = evaluation(dict.fromkeys(range(100), 0.0), policy="b")
    result = openenv_lab.compare(a, b)
    assert result.ci[0] > 0 and result.p_value == pytest.approx(2 / 2**4)
    assert result.verdict.startswith("No difference detectable with 100 episodes")


def test_the_policy_is_asked_once_per_observation_even_when_others_fail():
    calls = {"n": 0}

    def every_fifth_fails(obs):
        calls["n"] += 1
        if calls["n"] % 5 == 0:
            raise RuntimeError("no")
        return "hi"

    result = openenv_lab.evaluate(
        every_fifth_fails, "openenv/echo", episodes=10, n_envs=3, max_steps=3, progress=False
    )
    table = result.episodes
    failed = table.filter(pl.col("failed"))
    # each step asked once (failed episodes' steps too), and each failure once: nothing asked twice
    assert calls["n"] == table["length"].sum() + failed.height and failed.height > 0
    assert table.height == 10


class PaysItsAction(gym.Env):
    """Two steps, each paying the action taken (of 1,000): a random action shows in the return."""

    action_space = gym.spaces.Discrete(1000)
    observation_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return 0, {}

    def step(self, action):
        self.steps += 1
        return self.steps, float(action), self.steps == 2, False, {}


def test_a_failure_leaves_the_other_sub_environments_playing_the_policys_actions():
    """On a gymnasium vector env (stepped whole), the observations after a failed one in the same batch
    still get the policy's action: a mutant that stopped asking at the first failure had the others
    step with random actions, counted in their returns."""
    calls = {"n": 0}

    def first_call_fails(obs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("no")
        return 0

    envs = gym.vector.SyncVectorEnv([PaysItsAction] * 3)
    result = openenv_lab.evaluate(first_call_fails, envs, episodes=6, progress=False)
    envs.close()
    table = result.episodes
    assert table["failed"].to_list() == [True] + [False] * 5
    assert table.filter(~pl.col("failed"))["return"].to_list() == [0.0] * 5


def test_an_evaluation_reads_as_one_line_however_its_episodes_went():
    """Mutations of `Evaluation.__str__` (each wording and number of it) left every test passing."""
    table = pl.DataFrame(
        {"seed": [0, 1, 2, 3], "return": [1.0, 2.0, 3.0, 0.0], "failed": [False, False, False, True]}
    )
    identity = {"env_id": "openenv/echo"}
    three = Evaluation(table, identity, policy="p")
    low, high = bootstrap_interval(np.array([1.0, 2.0, 3.0]))
    assert str(three) == (
        f"p on openenv/echo: mean return +2 (95% CI {low:+.4g} to {high:+.4g}, sem 0.577) over 3 episodes, "
        "1 failed"
    )
    assert repr(three) == f"<Evaluation {three}>"
    two = Evaluation(table.head(2), identity, policy="p")
    assert str(two).startswith("p on openenv/echo: mean return +1.5 (95% CI")
    assert str(two).endswith("over 2 episodes")
    one = Evaluation(table.head(1), identity, policy="p", complete=False)
    assert str(one) == "p on openenv/echo: mean return +1 over 1 episode (incomplete: the server went away)"
    none = Evaluation(table.tail(1), identity, policy="p")
    assert str(none) == "p on openenv/echo: all 1 episodes failed"


def test_two_evaluations_of_one_policy_are_labelled_apart_and_the_level_reaches_the_interval():
    a = evaluation({s: 1.0 + s % 5 for s in range(30)}, policy="random")
    b = evaluation({s: float(s % 7) for s in range(30)}, policy="random")
    assert openenv_lab.compare(a, b).labels == ("random", "random (B)")
    d = (a.returns - b.returns).astype(np.float64)
    narrow = EvaluationComparison(a, b, confidence=0.5)
    assert narrow.ci == bootstrap_interval(d, confidence=0.5) != bootstrap_interval(d)
    assert "(50% CI" in narrow.verdict


@pytest.mark.parametrize("scale", [1e-9, 1.0, 1e9, 1e12])
def test_the_p_value_does_not_depend_on_the_units_of_the_returns(scale):
    """Ties with the observed sum are counted as extreme at any scale: sums that are equal on paper differ
    in their last bits in floating point (mutations of the relative tolerance left every test passing)."""
    from openenv_lab.evaluation import _sign_flip_p_value

    # Exactly (in fractions) 27 of the 32 sign patterns are as extreme as the observed one; in floating
    # point, without a tolerance, only 25 of them are.
    tenths = np.array([-0.9, -0.6, 0.6, 0.3, 0.8, 0.2])
    whole = np.array([-9, -6, 6, 3, 8, 2.0])
    assert _sign_flip_p_value(tenths * scale) == _sign_flip_p_value(whole) == 27 / 32
    assert _sign_flip_p_value(np.full(16, scale)) == 2 / 2**16  # sixteen differing pairs: still exact


def test_the_summary_gives_each_figure_and_nan_where_too_few_episodes_give_one():
    """`Evaluation.summary`, figure by figure (its mutants survived where only the mean was read)."""
    table = pl.DataFrame(
        {"seed": [0, 1, 2, 3], "return": [1.0, 2.0, 4.0, 9.0], "failed": [False, False, False, True]}
    )
    three = Evaluation(table, {"env_id": "openenv/echo"}, policy="p").summary(confidence=0.8)
    low, high = bootstrap_interval(np.array([1.0, 2.0, 4.0]), confidence=0.8)
    std = float(np.std([1.0, 2.0, 4.0], ddof=1))
    assert three == {
        "episodes": 4,
        "failed": 1,
        "mean": pytest.approx(7 / 3),
        "std": pytest.approx(std),
        "sem": pytest.approx(std / np.sqrt(3)),
        "ci_low": low,
        "ci_high": high,
        "confidence": 0.8,
        "min": 1.0,
        "max": 4.0,
    }
    two = Evaluation(table.head(2), {}, policy="p").summary()
    assert two["std"] == pytest.approx(np.sqrt(0.5)) and two["sem"] == pytest.approx(0.5)
    one = Evaluation(table.head(1), {}, policy="p").summary()
    assert (one["mean"], one["min"], one["max"]) == (1.0, 1.0, 1.0)
    assert np.isnan(one["std"]) and np.isnan(one["sem"])
    none = Evaluation(table.tail(1), {}, policy="p").summary()
    assert none["episodes"] == 1 and none["failed"] == 1
    assert all(np.isnan(none[key]) for key in ("mean", "std", "sem", "min", "max"))


class Countdown(gym.Env):
    """A toy game played in this process, whose every episode is known in advance: ``seed % 4 + 1`` steps,
    each rewarded with the action taken; even seeds end terminated, odd ones truncated. Its mask allows
    actions 1 and 3 only (none at all with ``no_legal_move=True``), and with ``integer_box=True`` the
    action is an unbounded integer whose legal values ``info["legal_actions"]`` lists (2 and 4 after a
    reset, 2 and 3 after a step). With ``tasks=True`` each reset names a task in ``info["task"]``."""

    def __init__(
        self,
        no_legal_move: bool = False,
        integer_box: bool = False,
        dict_action: bool = False,
        tasks: bool = False,
    ) -> None:
        self.tasks = tasks  # each reset's info names a task, as our servers' do
        self.observation_space = gym.spaces.Dict(
            {"left": gym.spaces.Discrete(5), "action_mask": gym.spaces.MultiBinary(5)}
        )
        self.action_space = (
            gym.spaces.Box(-(2**62), 2**62, (), np.int64) if integer_box else gym.spaces.Discrete(5)
        )
        if dict_action:  # the action is {"a": ..., "b": ...}; each step is rewarded with a + b
            self.action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(5), "b": gym.spaces.Discrete(3)})
        self.mask = np.array([0, 0, 0, 0, 0] if no_legal_move else [0, 1, 0, 1, 0], dtype=np.int8)
        self.left = 0
        self.seed_ = 0

    def _obs(self):
        return {"left": self.left, "action_mask": self.mask.copy()}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.seed_ = 0 if seed is None else int(seed)  # None: an idle sub-env autoreset by the vector env
        self.left = self.seed_ % 4 + 1
        info = {"legal_actions": [2, 4]}
        if self.tasks:
            info["task"] = {"id": f"task-{self.seed_}", "level": 1}
        return self._obs(), info

    def step(self, action):
        self.left -= 1
        done = self.left == 0
        terminated, truncated = done and self.seed_ % 2 == 0, done and self.seed_ % 2 == 1
        reward = float(action["a"] + action["b"]) if isinstance(action, dict) else float(action)
        return self._obs(), reward, terminated, truncated, {"legal_actions": [2, 3]}  # after a step


def expected_rows(seeds, draw) -> list[tuple]:
    """(seed, return, length, terminated, truncated) of each Countdown episode, ``draw(space)`` giving
    each action from a copy of the action space seeded with the episode's seed."""
    rows = []
    for seed in seeds:
        space = gym.spaces.Discrete(5)
        space.seed(seed)
        length = seed % 4 + 1
        total = sum(float(draw(space)) for _ in range(length))
        rows.append((seed, total, length, seed % 2 == 0, seed % 2 == 1))
    return rows


def runner_table(result) -> list[tuple]:
    table = result.episodes
    assert not table["failed"].any() and table["error"].is_null().all() and table["task_id"].is_null().all()
    assert (table["wall_s"] > 0).all() and result.complete
    return list(table.select("seed", "return", "length", "terminated", "truncated").iter_rows())


@pytest.mark.parametrize("n_envs", [1, 3, 7])
def test_every_episode_of_a_known_game_is_played_whole_whatever_the_number_of_sub_envs(n_envs):
    """Guards the runner's bookkeeping (mutations of `_Runner`: rewards summed, lengths counted, endings
    kept apart, each sub-environment taking the next seed when it is free, random draws from each
    episode's own seed) on episodes of 1 to 4 steps, so sub-environments finish at different times."""
    envs = gym.vector.SyncVectorEnv([Countdown for _ in range(n_envs)])
    seeds = [3, 0, 5, 6, 1, 10, 7]
    result = openenv_lab.evaluate("random", envs, seeds=seeds, progress=False)
    assert runner_table(result) == expected_rows(sorted(seeds), lambda space: space.sample())
    assert result.episodes["policy"].to_list() == ["random"] * 7
    masked = openenv_lab.evaluate("masked-random", envs, seeds=seeds, progress=False)
    legal = np.array([0, 1, 0, 1, 0], dtype=np.int8)
    assert runner_table(masked) == expected_rows(sorted(seeds), lambda space: space.sample(mask=legal))
    returns, lengths = masked.episodes["return"], masked.episodes["length"]
    assert (((returns - lengths) % 2 == 0) & (returns <= 3 * lengths)).all()  # 1s and 3s only
    envs.close()


def test_masked_random_with_no_legal_move_or_a_listed_one_draws_as_documented():
    """A mask with no legal move is no mask (the whole space is drawn from); an unbounded integer action
    draws from ``info["legal_actions"]``, which only a policy given infos can see."""
    envs = gym.vector.SyncVectorEnv([lambda: Countdown(no_legal_move=True)] * 2)
    result = openenv_lab.evaluate("masked-random", envs, seeds=[0, 1, 2], progress=False)
    assert runner_table(result) == expected_rows([0, 1, 2], lambda space: space.sample())
    envs.close()
    listed = gym.vector.SyncVectorEnv([lambda: Countdown(integer_box=True, no_legal_move=True)] * 2)
    result = openenv_lab.evaluate("masked-random", listed, seeds=[4, 5, 6, 7], progress=False)
    expected = []
    for seed in [4, 5, 6, 7]:
        space = copy.deepcopy(listed.single_action_space)
        space.seed(seed)
        length = seed % 4 + 1
        total = 0.0
        for step in range(length):  # from the reset's list, then each step's
            legal = [2, 4] if step == 0 else [2, 3]
            total += float(legal[int(space.np_random.integers(2))])
        expected.append((seed, total, length, seed % 2 == 0, seed % 2 == 1))
    assert runner_table(result) == expected
    returns, lengths = result.episodes["return"], result.episodes["length"]
    assert ((returns >= 2 * lengths) & (returns <= 4 + 3 * (lengths - 1))).all()  # listed values only
    listed.close()


def test_each_episode_draws_from_a_space_of_its_own_and_policies_see_their_own_obs_and_info():
    """Mutations this guards (`_Policy`): a sub-environment's space copied shallowly (a ``Dict`` action's
    parts, and so their generators, shared between sub-environments playing at once), the observation or
    the info not handed to a callable, ``action_mask`` read from an observation that is not a dict."""
    envs = gym.vector.SyncVectorEnv([lambda: Countdown(dict_action=True)] * 3)
    seeds = [0, 1, 2, 3, 4]
    result = openenv_lab.evaluate("random", envs, seeds=seeds, progress=False)
    expected = []
    for seed in seeds:
        space = copy.deepcopy(envs.single_action_space)
        space.seed(seed)
        length = seed % 4 + 1
        total = 0.0
        for _ in range(length):
            action = space.sample()
            total += float(action["a"] + action["b"])
        expected.append((seed, total, length, seed % 2 == 0, seed % 2 == 1))
    assert runner_table(result) == expected
    envs.close()

    envs = gym.vector.SyncVectorEnv([Countdown] * 2)
    by_obs = openenv_lab.evaluate(lambda obs: int(obs["left"]), envs, seeds=[3, 6], progress=False)
    assert by_obs.episodes["return"].to_list() == [4 + 3 + 2 + 1, 3 + 2 + 1]  # the steps left, each step
    by_info = openenv_lab.evaluate(
        lambda obs, info: info["legal_actions"][-1], envs, seeds=[3, 6], progress=False
    )
    assert by_info.episodes["return"].to_list() == [
        4 + 3 * 3.0,
        4 + 2 * 3.0,
    ]  # the reset's info, then each step's
    assert not by_obs.episodes["failed"].any() and not by_info.episodes["failed"].any()
    envs.close()
    cartpole = gym.make("CartPole-v1")  # a Box observation: masked-random is random there
    played = openenv_lab.evaluate("masked-random", cartpole, seeds=[0, 1], progress=False)
    assert not played.episodes["failed"].any() and (played.episodes["length"] > 1).all()
    cartpole.close()


def test_a_failed_episode_ended_neither_way_and_each_episode_keeps_its_task():
    """Mutations this guards (`_Runner`): a failed episode recorded as terminated or truncated, and the
    task named in a reset's info not reaching the episode's row."""
    envs = gym.vector.SyncVectorEnv([lambda: Countdown(tasks=True)] * 2)

    def fails_on_the_last_step(obs):
        if obs["left"] == 1:
            raise RuntimeError("stuck")
        return 1

    result = openenv_lab.evaluate(fails_on_the_last_step, envs, seeds=[0, 1, 2, 3], progress=False)
    table = result.episodes
    assert table["task_id"].to_list() == ["task-0", "task-1", "task-2", "task-3"]
    assert table["failed"].to_list() == [True] * 4 and table["length"].to_list() == [0, 1, 2, 3]
    assert not table["terminated"].any() and not table["truncated"].any()
    assert table["error"].to_list() == ["the policy raised RuntimeError: stuck"] * 4
    envs.close()


class Greedy:
    """A policy object without a ``__name__``: named by its class."""

    def __call__(self, obs):
        return 3


def test_an_id_made_here_plays_its_seeds_and_names_itself_and_the_policy():
    """Mutations this guards (`evaluate`, `_seeds`, `_identity`, `_Policy`): the seeds counted from
    ``seed``, the default of 100 episodes, one sub-environment allowed, a gymnasium id made here, the
    identity of an environment that is no server, the policy's name, each episode's wall time."""
    gym.register("CountdownToy-v0", entry_point=Countdown)
    try:
        started = time.perf_counter()
        result = openenv_lab.evaluate(
            Greedy(), "CountdownToy-v0", seed=5, episodes=3, n_envs=1, progress=False
        )
        elapsed = time.perf_counter() - started
        assert result.episodes["seed"].to_list() == [5, 6, 7]
        assert result.episodes["return"].to_list() == [3.0 * (s % 4 + 1) for s in (5, 6, 7)]
        assert result.identity == {
            "env_id": "CountdownToy-v0",
            "server_name": None,
            "server_version": None,
            "schema_sha256": None,
            "base_url": None,
        }
        assert result.policy == "Greedy" and (result.episodes["wall_s"] <= elapsed).all()
        assert openenv_lab.evaluate("random", "CountdownToy-v0", progress=False).episodes[
            "seed"
        ].to_list() == list(range(100))
    finally:
        gym.registry.pop("CountdownToy-v0")
    made = gym.vector.SyncVectorEnv([Countdown])
    assert (
        openenv_lab.evaluate("random", made, episodes=1, progress=False).identity["env_id"] == "SyncVectorEnv"
    )
    made.close()
    single = Countdown()
    assert (
        openenv_lab.evaluate("random", single, episodes=1, progress=False).identity["env_id"] == "Countdown"
    )


def test_n_envs_sub_environments_play_at_once_and_no_more_than_there_are_episodes():
    """The batches a model's ``predict`` is given: ``n_envs`` observations at a time, or one per episode
    when there are fewer episodes (a mutant that made one sub-environment left every result the same)."""

    class Counting:
        def __init__(self) -> None:
            self.batches: list[int] = []

        def predict(self, obs, deterministic=True):
            self.batches.append(len(obs))
            return np.zeros(len(obs), dtype=np.int64), None

    for episodes, n_envs, widest in ((5, 3, 3), (2, 16, 2), (20, None, 16)):  # None: the default
        model = Counting()
        options = {} if n_envs is None else {"n_envs": n_envs}
        result = openenv_lab.evaluate(model, "CartPole-v1", episodes=episodes, progress=False, **options)
        assert result.episodes.height == episodes and result.policy == "Counting"
        assert model.batches[0] == max(model.batches) == widest, (episodes, n_envs, model.batches)


def test_a_server_behind_a_token_is_named_with_that_token(monkeypatch):
    """The identity is read with the env's own headers, for a vector env and a single one. Without the
    token a protected server's ``/metadata`` is refused, and the table carried no server name, version or
    schema hash, so `compare` could not tell two servers apart (a mutant dropping the headers survived,
    because they were never found: the envs did not expose them)."""
    monkeypatch.delenv("OPENENV_LAB_TOKEN", raising=False)
    with openenv_lab.serve("echo", token="evaluation-token", max_steps=1) as fleet:
        result = openenv_lab.evaluate(
            lambda obs: "hi",
            "openenv/echo",
            episodes=2,
            n_envs=2,
            progress=False,
            base_url=fleet.urls[0],
            token="evaluation-token",
        )
        single = gym.make("openenv/echo", base_url=fleet.urls[0], token="evaluation-token")
        alone = openenv_lab.evaluate(lambda obs: "hi", single, episodes=1, progress=False)
        single.close()
    assert result.summary()["failed"] == 0 and result.identity["server_name"] == "echo"
    assert result.identity["schema_sha256"] and result.identity["base_url"] == fleet.urls[0]
    assert alone.identity == result.identity | {"env_id": "openenv/echo"}
