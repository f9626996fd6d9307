"""The public API: what ``openenv_lab.__all__`` promises exists, sorted, and is documented."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

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


def test_importing_the_package_stays_light():
    # polars loads with recording or market data, widgets with their first use, and httpx's command-line
    # tool (click, rich, pygments) never: a fresh `import openenv_lab` imports none of them.
    script = (
        "import sys, openenv_lab; "
        "print(sorted(m for m in ('polars', 'click', 'rich', 'ipywidgets', 'matplotlib', 'openenv') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]"
    check = (
        "import openenv_lab, click, openenv_lab.market as market; "
        "print(market.MarketData.__name__, market.data.__name__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == ["MarketData", "openenv_lab.market.data"]  # all there on first use


@pytest.mark.parametrize(
    ("module", "missing", "says"),
    [
        ("openenv_lab.sb3", "stable_baselines3", 'needs Stable-Baselines3: pip install "openenv-lab[sb3]"'),
        ("openenv_lab.rllib", "torch", 'needs RLlib and torch: pip install "openenv-lab[rllib]"'),
        ("openenv_lab.rllib", "ray", 'needs RLlib and torch: pip install "openenv-lab[rllib]"'),
    ],
)
def test_a_module_of_an_extra_that_is_not_installed_says_what_to_install(module, missing, says):
    script = f"import sys; sys.modules[{missing!r}] = None; import {module}"  # as if it were not installed
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].startswith(f"ImportError: {module} {says}"), out.stderr[-2000:]


def test_the_namespace_is_what_the_readme_documents_and_nothing_imported_for_ourselves():
    import importlib.util
    import pathlib
    import re
    import types

    shown = {name for name in dir(openenv_lab) if not name.startswith("_")}
    modules = {name for name in shown if isinstance(getattr(openenv_lab, name), types.ModuleType)}
    assert shown - modules == set(openenv_lab.__all__) - {"__version__"}
    for stray in ("Any", "importlib", "register_envs"):
        assert not hasattr(openenv_lab, stray), f"openenv_lab.{stray} is ours, not the user's"
    root = pathlib.Path(__file__).parents[1]
    # What users read: the README and the site's pages.
    docs = "\n".join(p.read_text() for p in [root / "README.md", *sorted((root / "docs").rglob("*.md"))])
    for name in set(re.findall(r"openenv_lab\.(\w+)", docs)):
        found = name in shown or importlib.util.find_spec(f"openenv_lab.{name}") is not None  # sb3, trl
        assert found, f"the docs use openenv_lab.{name}, which is neither in dir(openenv_lab) nor a module"
    for name in openenv_lab.__all__:
        if name != "__version__" and not isinstance(getattr(openenv_lab, name), types.ModuleType):
            named = re.search(rf"\b{name}\b", docs)
            assert named, f"openenv_lab.{name} is public but neither the README nor docs/ names it"
