"""The public API: what ``openenv_lab.__all__`` promises exists, sorted, and is documented."""

from __future__ import annotations

import inspect

import openenv_lab
import openenv_lab.client


def test_all_is_sorted_and_complete():
    for module in (openenv_lab, openenv_lab.client):
        names = [n for n in module.__all__ if n != "__version__"]
        assert names == sorted(names)
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name} is in __all__ but missing"


def test_public_classes_have_docstrings_with_examples():
    for name in openenv_lab.__all__:
        obj = getattr(openenv_lab, name)
        if inspect.isclass(obj) and not issubclass(obj, Exception):
            assert obj.__doc__, f"{name} has no docstring"
    for name in (
        "OpenEnvEnv",
        "Session",
        "Client",
        "ChessAdapter",
        "GenericAdapter",
        "EmbeddedServer",
        "Timeouts",
    ):
        assert ">>>" in getattr(openenv_lab, name).__doc__, f"{name} has no example"
