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
