"""Adapters: one per environment family, mapping the server's JSON to gymnasium spaces and back.

``ADAPTERS`` maps the family names used by the ``openenv/<family>`` ids to adapter classes; write a
subclass of `Adapter` and pass it to `openenv_lab.OpenEnvEnv` for a family we do not ship.
"""

from .atari import AtariAdapter
from .base import Adapter, Transition, base_info, reward_components
from .chess import ChessAdapter
from .finrl import FinRLAdapter
from .generic import EchoAdapter, GenericAdapter, UnicodeText
from .gymnasium import GymnasiumAdapter
from .schema import WideInteger
from .spec import SPECS, Spec
from .tools import Tools

#: The adapter of each family, by the name ``gym.make(..., adapter=NAME)`` takes.
ADAPTERS: dict[str, type[Adapter]] = {
    "atari": AtariAdapter,
    "chess": ChessAdapter,
    "echo": EchoAdapter,
    "finrl": FinRLAdapter,
    "gymnasium": GymnasiumAdapter,
    "remote": GenericAdapter,
}

__all__ = [
    "ADAPTERS",
    "SPECS",
    "Adapter",
    "AtariAdapter",
    "ChessAdapter",
    "EchoAdapter",
    "FinRLAdapter",
    "GenericAdapter",
    "GymnasiumAdapter",
    "Spec",
    "Tools",
    "Transition",
    "UnicodeText",
    "WideInteger",
    "base_info",
    "reward_components",
]
