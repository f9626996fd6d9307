"""Gymnasium environments over OpenEnv servers, and the registration of the ``openenv/*`` ids."""

from .env import OpenEnvEnv
from .registration import ENV_IDS, register_envs
from .vector import OpenEnvVectorEnv

__all__ = ["ENV_IDS", "OpenEnvEnv", "OpenEnvVectorEnv", "register_envs"]
