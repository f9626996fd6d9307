"""Infos made to be stacked (`openenv_lab.adapters.info_schema`): every family's documented keys, each of
its type, on every step of whole episodes against the real servers; gymnasium's own vector envs stacking
them; the server's JSON only when asked; and a server that breaks its own schema warned about once."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import openenv_lab
from openenv_lab.adapters.info_schema import InfoKey, InfoSchema
from openenv_lab.record import RecordTrajectory
from tests.helpers import info_signature

#: Each family as research code makes it, with episodes short enough to cross several ends.
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "chess": ("openenv/chess", {"max_moves": 6}),
    "atari-ram": (
        "openenv/atari",
        {"game": "pong", "obs_type": "ram", "clip_reward": True, "max_num_frames_per_episode": 120},
    ),
    "finrl": ("openenv/finrl", {"split": "trade"}),
    "echo": ("openenv/echo", {"max_steps": 4}),
}

_KINDS = {"bool": bool, "int": int, "float": float, "str": str, "dict": dict}


def fits(key: InfoKey, value: Any) -> bool:
    """Whether ``value`` is exactly of ``key``'s declared type (a numpy array of its dtype and shape)."""
    if key.kind == "array":
        return (
            isinstance(value, np.ndarray) and value.dtype == np.dtype(key.dtype) and value.shape == key.shape
        )
    if key.kind == "dict":
        return (
            isinstance(value, dict)
            and list(value) == [k.name for k in key.keys]
            and all(fits(inner, value[inner.name]) for inner in key.keys)
        )
    return type(value) is _KINDS[key.kind]


def act(env: gym.Env, obs: Any) -> Any:
    if isinstance(obs, dict) and "action_mask" in obs:
        return env.action_space.sample(mask=np.asarray(obs["action_mask"], dtype=np.int8))
    return env.action_space.sample()


def schema_of(env: gym.Env) -> tuple[InfoKey, ...]:
    return env.unwrapped.adapter.info_schema()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_key_of_the_schema_on_every_step_of_whole_episodes(family):
    env_id, options = FAMILIES[family]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # our servers break nothing: not one warning on the way
        env = gym.make(env_id, **options)
        keys = schema_of(env)
        names = [key.name for key in keys]
        env.action_space.seed(0)
        obs, info = env.reset(seed=0)
        seen, ends, reasons = 0, 0, set()
        while ends < 2:
            assert list(info) == names, (seen, info)
            for key in keys:
                assert fits(key, info[key.name]), (key, info[key.name])
            obs, _, terminated, truncated, info = env.step(act(env, obs))
            seen += 1
            if terminated or truncated:
                ends += 1
                if "end_reason" in names:  # said at the end, and only there
                    assert info["end_reason"], info
                    reasons.add(info["end_reason"])
                assert list(info) == names and all(fits(key, info[key.name]) for key in keys)
                obs, info = env.reset()
            elif "end_reason" in names:
                assert info["end_reason"] == "", info
    env.close()
    assert seen > ends and names[:2] == ["seed", "reward_missing"]
    assert "raw_observation" not in names and "legal_moves" not in names


def test_the_families_keys_and_neutral_values():
    """What the docs list, as a user reads it off a reset."""
    with gym.make("openenv/chess", agent_color="white") as env:
        _, info = env.reset(seed=3)
    assert {k: info[k] for k in ("move", "opponent_move", "illegal_move", "end_reason", "result")} == {
        "move": "",
        "opponent_move": "",
        "illegal_move": False,
        "end_reason": "",
        "result": "*",
    }
    with gym.make("openenv/finrl", split="trade") as env:
        _, info = env.reset(seed=0)
        assert info["reward_components"] == {"market": 0.0, "costs": 0.0}
        assert info["holdings"].tolist() == [0] * len(env.unwrapped.tickers)
        _, _, _, _, info = env.step(np.ones(len(env.unwrapped.tickers), dtype=np.float32))
        assert info["trades"] > 0 and info["reward_components"]["costs"] < 0.0  # buying costs
    with gym.make("openenv/atari", game="pong", obs_type="ram") as env:
        _, info = env.reset()  # no seed: the emulator's stream goes on, and no episode seed is claimed
        assert info["seed"] == -1 and "unclipped_reward" not in info


def test_a_remote_servers_scalar_fields_are_its_infos(framework_kitchen):
    """``openenv/remote``: the observation's scalar fields, as its /schema types them; a null the schema
    allows takes the neutral value, unwarned; lists and objects stay out."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # this server does not confirm seeds
        env = gym.make("openenv/remote", base_url=framework_kitchen)
    keys = {key.name: key for key in schema_of(env)}
    _, info = env.reset(seed=0)
    assert set(info) == set(keys) and "inventory" not in keys  # an object: JSON text in obs, not an info
    assert info["result"] == "" and keys["result"].nullable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        terminated = False
        while not terminated:
            _, _, terminated, _, step_info = env.step({"direction": 1, "strength": np.array(0.5)})
            assert info_signature(step_info) == info_signature(info), step_info
    env.close()


def test_a_null_for_a_declared_number_is_warned_about_once_and_the_info_keeps_its_type(framework_shifty):
    env = gym.make("openenv/remote", base_url=framework_shifty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        env.reset(seed=0)
    levels = []
    with pytest.warns(
        UserWarning, match=r"sent 'level' = None, which is not the int its info key holds"
    ) as said:
        for _ in range(2):  # two episodes: the null comes twice, the warning once
            env.reset()
            terminated = False
            while not terminated:
                _, _, terminated, _, info = env.step(0)
                levels.append(info["level"])
    env.close()
    assert levels == [1, 0, 3, 4] * 2 and all(type(level) is int for level in levels)
    assert len([w for w in said if "'level'" in str(w.message)]) == 1
    assert "raw_info=True" in str(said[0].message)  # where to see what came


def test_raw_info_adds_the_servers_json_as_it_came():
    with gym.make("openenv/chess", raw_info=True) as env:
        _, info = env.reset(seed=0)
        assert info["raw_observation"]["fen"] == info["fen"] and info["raw_observation"]["legal_moves"]
        assert info["metadata"]["seed"] == 0
    with gym.make("openenv/chess") as env:
        _, info = env.reset(seed=0)
        assert "raw_observation" not in info and "metadata" not in info


@pytest.mark.parametrize("family", list(FAMILIES))
def test_text_info_false_leaves_numbers_only_on_every_step(family):
    """What TorchRL's batched GymEnv can stack: no text, each dict's numbers under keys of their own, the
    same keys (`InfoSchema.number_keys`) on every step of episodes, through gymnasium's SyncVectorEnv."""
    env_id, options = FAMILIES[family]
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(env_id, text_info=False, **options) for _ in range(2)])
    try:
        expected = InfoSchema(schema_of(envs.envs[0])).number_keys()
        assert expected and all(isinstance(key, str) for key in expected)
        obs, infos = envs.reset(seed=3)
        ends = 0
        for _ in range(40 if family != "finrl" else 230):
            for key in expected:
                assert key in infos, (family, key, sorted(infos))
                assert infos[key].dtype != object and infos[f"_{key}"].all(), (family, key, infos[key])
            assert set(infos) - {f"_{key}" for key in expected} == set(expected), (family, sorted(infos))
            obs, _, terminated, truncated, infos = envs.step(_actions(envs, obs))
            ends += int(np.sum(terminated | truncated))
        assert ends >= 1, family
    finally:
        envs.close()
    if family == "finrl":
        assert {"reward_components_market", "reward_components_costs"} <= set(expected)
        assert "date" not in expected and "reward_components" not in expected


def test_a_recording_needs_the_text_and_says_so():
    with gym.make("openenv/echo", text_info=False) as env, pytest.raises(ValueError, match="text_info=True"):
        RecordTrajectory(env)


@pytest.mark.slow
@pytest.mark.parametrize("vector", ["sync", "async"])
@pytest.mark.parametrize(
    "family",
    [
        *FAMILIES,
        "atari-rgb",
        "atari-preprocessed",
    ],
)
def test_gymnasiums_own_vector_envs_stack_them_across_episode_ends(vector, family):
    """gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` over three of our envs, unmodified: every
    number stacks into an array of its own type (not of objects), every key on every row, across the
    autoresets of episode ends. (Four ``openenv/atari`` RAM envs failed here at the first step when infos
    carried the server's JSON: a field null in one sub-environment and a number in another.)"""
    env_id, options = {
        "atari-rgb": ("openenv/atari", {"game": "pong", "max_num_frames_per_episode": 60}),
        "atari-preprocessed": (
            "openenv/atari",
            {"game": "pong", "preprocessing": True, "max_num_frames_per_episode": 120},
        ),
    }.get(family) or FAMILIES[family]
    make = gym.vector.SyncVectorEnv if vector == "sync" else gym.vector.AsyncVectorEnv
    envs = make([lambda: gym.make(env_id, **options)] * 3)
    try:
        with gym.make(env_id, **options) as one:
            keys = schema_of(one)
        envs.action_space.seed(0)
        obs, infos = envs.reset(seed=[0, 1, 2])
        ended = np.zeros(3, dtype=bool)
        for step in range(300):
            for key in keys:
                assert infos[f"_{key.name}"].all(), (step, key.name)  # on every row
                column = infos[key.name]
                if key.kind in ("int", "float", "bool"):
                    assert column.dtype.kind == {"int": "i", "float": "f", "bool": "b"}[key.kind], key
                elif key.kind == "array":
                    assert column.dtype == np.dtype(key.dtype) and column.shape == (3, *key.shape)
            if ended.all() and step > 5:
                break
            obs, _, terminated, truncated, infos = envs.step(_actions(envs, obs))
            ended |= terminated | truncated
        assert ended.all(), "every sub-environment crossed an episode end"
    finally:
        envs.close()


def _actions(envs: gym.vector.VectorEnv, obs: Any) -> Any:
    """One random action per sub-environment, legal where the observation has a mask."""
    if isinstance(obs, dict) and "action_mask" in obs:
        space = envs.single_action_space
        return np.array([space.sample(mask=np.asarray(mask, dtype=np.int8)) for mask in obs["action_mask"]])
    return envs.action_space.sample()


def test_the_schema_fills_what_is_missing_and_warns_once_about_what_does_not_fit():
    schema = InfoSchema(
        [
            InfoKey("count", "int", "a count"),
            InfoKey("ratio", "float", "a ratio"),
            InfoKey("flag", "bool", "a flag"),
            InfoKey("name", "str", "a name", neutral="?"),
            InfoKey("shares", "array", "shares", shape=(2,), dtype="int64"),
            InfoKey("parts", "dict", "parts", keys=(InfoKey("a", "float", "a"),)),
        ],
        source="The test server",
    )
    full = schema.conform({})
    assert full["count"] == 0 and full["ratio"] == 0.0 and full["flag"] is False and full["name"] == "?"
    assert full["shares"].tolist() == [0, 0] and full["parts"] == {"a": 0.0}
    fitted = schema.conform(
        {"count": 3.0, "ratio": 2, "flag": np.bool_(True), "shares": [1.0, 2.0], "parts": {"a": 1}, "x": 1}
    )
    assert (type(fitted["count"]), type(fitted["ratio"]), fitted["flag"]) == (int, float, True)
    assert fitted["shares"].dtype == np.int64 and "x" not in fitted  # keys of no schema stay out
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        bad = {"count": "3", "ratio": None, "flag": 1, "name": 5, "shares": [1, 2, 3], "parts": {"a": "x"}}
        first = schema.conform(bad)
        again = schema.conform(bad)
    messages = [str(w.message) for w in said]
    for name in ("'count'", "'ratio'", "'flag'", "'name'", "'shares'", "'parts.a'"):
        assert sum(name in m for m in messages) == 1, (name, messages)  # once each, though sent twice
    for conformed in (first, again):  # every misfit takes its key's neutral value
        assert info_signature(conformed) == info_signature(full)
        assert {k: v for k, v in conformed.items() if k != "shares"} == {
            k: v for k, v in full.items() if k != "shares"
        }
        assert conformed["shares"].tolist() == [0, 0]
    assert "The test server sent 'count' = '3', which is not the int its info key holds" in messages[0]
    with pytest.raises(ValueError, match="names a key twice"):
        InfoSchema([InfoKey("a", "int", ""), InfoKey("a", "str", "")])
    with pytest.raises(ValueError, match="kind 'list' is not one of"):
        InfoKey("a", "list", "")


def test_make_vec_infos_have_the_same_keys_as_a_single_envs():
    with gym.make("openenv/finrl", split="trade") as one:
        names = list(one.reset(seed=0)[1])
    envs = gym.make_vec("openenv/finrl", num_envs=2, split="trade")
    _, infos = envs.reset(seed=0)
    assert [key for key in infos if not key.startswith("_")] == names
    assert openenv_lab.OpenEnvVectorEnv is type(envs.unwrapped)
    envs.close()
