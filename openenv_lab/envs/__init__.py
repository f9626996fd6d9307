"""Gymnasium environments over OpenEnv servers, and the registration of the ``openenv/*`` ids."""

from .env import OpenEnvEnv
from .registration import ENV_IDS, register_envs

__all__ = ["ENV_IDS", "OpenEnvEnv", "register_envs"]
