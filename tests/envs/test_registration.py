"""The openenv/* ids: registered on import, unversioned, and reachable without importing the package."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import gymnasium as gym
import pytest

import openenv_lab  # noqa: F401 - registers the openenv/* ids
from openenv_lab.envs import ENV_IDS


def test_ids_are_registered_unversioned():
    for env_id, family in ENV_IDS.items():
        spec = gym.spec(env_id)
        assert spec.version is None
        assert spec.entry_point == f"openenv_lab.envs.registration:{family}"


@pytest.mark.parametrize(
    ("env_id", "modes"),
    [
        ("openenv/chess", ["ansi", "rgb_array", "svg"]),
        ("openenv/atari", ["rgb_array"]),
        ("openenv/finrl", ["ansi"]),
        ("openenv/echo", ["ansi"]),
        ("openenv/remote", ["ansi"]),
    ],
)
def test_each_family_declares_its_own_render_modes(env_id, modes):
    entry_point = gym.envs.registration.load_env_creator(gym.spec(env_id).entry_point)
    assert entry_point.metadata["render_modes"] == modes


def test_a_render_mode_the_family_lacks_is_refused_naming_those_it_has():
    # "human" on a family without pictures: gymnasium passes it on (no HumanRendering over rgb_array).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # gymnasium's own "not in the possible modes"
        with pytest.raises(ValueError, match=r"render_mode='human' is not supported .* renders as 'ansi'"):
            gym.make("openenv/finrl", render_mode="human")
        with pytest.raises(ValueError, match=r"renders as 'rgb_array'"):
            gym.make("openenv/atari", render_mode="ansi")


def test_registering_twice_is_harmless():
    from openenv_lab.envs import register_envs

    register_envs()  # importing the package did it once
    assert gym.spec("openenv/chess").kwargs == {"adapter": "chess"}


@pytest.mark.slow
def test_module_prefixed_id_works_without_importing_the_package():
    code = textwrap.dedent(
        """
        import sys, warnings, gymnasium as gym
        warnings.simplefilter("error")
        assert "openenv_lab" not in sys.modules
        env = gym.make("openenv_lab:openenv/chess")
        obs, info = env.reset(seed=0)
        print(int(obs["action_mask"].sum()))
        env.close()
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "20"


def test_every_id_of_the_table_is_registered_with_what_it_sets():
    from openenv_lab.envs.registration import ATARI_57, CHESS_OPPONENTS, id_table

    rows = id_table()
    assert len({row.env_id for row in rows}) == len(rows) == 6 + 4 * len(ATARI_57) + len(CHESS_OPPONENTS) + 2
    for row in rows:
        assert gym.spec(row.env_id).kwargs == {"adapter": row.family, **row.kwargs}, row.env_id
    assert len(ATARI_57) == len(set(ATARI_57)) == 57


def test_the_atari_ids_name_games_ale_ships_as_ale_and_gymnasium_name_them():
    """Each Atari-57 game's ALE id (``game_id`` of its name) is a ROM ale-py ships; the four ids carry
    the settings of ALE's v5 and gymnasium's NoFrameskip-v4."""
    roms = pytest.importorskip("ale_py.roms")
    from openenv_lab.adapters.atari import game_id
    from openenv_lab.envs.registration import ATARI_57

    shipped = set(roms.get_all_rom_ids())
    assert {game_id(game) for game in ATARI_57} <= shipped
    v5, ram_v4 = gym.spec("openenv/Breakout-v5").kwargs, gym.spec("openenv/Breakout-ramNoFrameskip-v4").kwargs
    assert (v5["game"], v5["obs_type"], v5["frameskip"], v5["repeat_action_probability"]) == (
        "breakout",
        "rgb",
        4,
        0.25,
    )
    assert (ram_v4["obs_type"], ram_v4["frameskip"], ram_v4["repeat_action_probability"]) == ("ram", 1, 0.0)
    assert game_id("MontezumaRevenge") == "montezuma_revenge" and game_id("UpNDown") == "up_n_down"


@pytest.mark.slow
def test_an_id_plays_what_it_says_and_a_users_arguments_override_it():
    with gym.make("openenv/Pong-ram-v5") as env:
        assert env.observation_space.shape == (128,) and env.action_space.n == 6
        adapter = env.unwrapped.adapter
        assert (adapter._frameskip, adapter.settings["repeat_action_probability"]) == (4, 0.25)
        _, info = env.reset(seed=0)
        _, _, _, _, info = env.step(0)
        assert info["episode_frame_number"] == 4  # four frames a step
    with gym.make("openenv/Pong-ram-v5", frameskip=1) as env:
        env.reset(seed=0)
        assert env.step(0)[4]["episode_frame_number"] == 1
    with gym.make("openenv/chess-minimax", raw_info=True) as env:
        _, info = env.reset(seed=0)
        assert info["metadata"]["opponent"] == "minimax"
    with gym.make("openenv/finrl-trade", raw_info=True) as env:
        _, info = env.reset(seed=0)
        assert info["metadata"]["split"] == "trade"
    envs = gym.make_vec("openenv/Pong-ramNoFrameskip-v4", num_envs=2)
    assert envs.single_observation_space.shape == (128,)
    envs.reset(seed=0)
    assert envs.step(envs.action_space.sample())[4]["episode_frame_number"].tolist() == [1, 1]
    envs.close()


def test_the_ids_doc_is_rendered_from_the_table():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "ids.md").read_text()
    assert "`openenv/SpaceInvaders-ramNoFrameskip-v4`" in doc and "`openenv/chess-stockfish`" in doc
