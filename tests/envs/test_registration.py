"""The openenv/* ids: registered on import, unversioned, and reachable without importing the package."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import gymnasium as gym

import openenv_lab
from openenv_lab.envs import ENV_IDS


def test_ids_are_registered_unversioned():
    for env_id in ENV_IDS:
        spec = gym.spec(env_id)
        assert spec.version is None
        assert spec.entry_point == "openenv_lab.envs.env:OpenEnvEnv"


def test_registering_twice_is_harmless():
    openenv_lab.register_envs()
    assert gym.spec("openenv/chess").kwargs == {"adapter": "chess"}


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
