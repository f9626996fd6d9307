"""The layering of ARCHITECTURE.md, checked on the imports each package makes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "openenv_lab"
LAYERS_ABOVE_CLIENT = ("adapters", "envs", "launch", "servers", "cli")


def imported_roots(package: str) -> set[str]:
    """What the modules of ``openenv_lab/<package>`` import: top-level packages, and for imports from
    inside openenv_lab (absolute or relative) the subpackage, as ``openenv_lab.<name>``."""
    roots = set()
    for path in (PACKAGE / package).rglob("*.py"):
        module_parts = ["openenv_lab", *path.relative_to(PACKAGE).with_suffix("").parts]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = module_parts[: len(module_parts) - node.level]
                    names = [".".join([*base, node.module] if node.module else base)]
                    if not node.module:
                        names = [f"{names[0]}.{alias.name}" for alias in node.names]
                else:
                    names = [node.module or ""]
            else:
                continue
            for name in names:
                parts = name.split(".")
                roots.add(".".join(parts[:2]) if parts[0] == "openenv_lab" and len(parts) > 1 else parts[0])
    return roots


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        # the wire only
        (
            "client",
            {"gymnasium", "numpy", "openenv", "chess", *(f"openenv_lab.{p}" for p in LAYERS_ABOVE_CLIENT)},
        ),
        # adapters never open sockets, start servers or know gymnasium envs
        (
            "adapters",
            {
                "websockets",
                "httpx",
                "openenv",
                "openenv_lab.launch",
                "openenv_lab.servers",
                "openenv_lab.envs",
            },
        ),
        # launchers know servers, not spaces
        ("launch", {"gymnasium", "openenv", "openenv_lab.adapters", "openenv_lab.envs"}),
        # widgets read recorded frames; they never talk to servers
        (
            "widgets",
            {
                "websockets",
                "httpx",
                "openenv",
                "openenv_lab.client",
                "openenv_lab.envs",
                "openenv_lab.launch",
            },
        ),
    ],
)
def test_layers_import_only_what_they_may(package, forbidden):
    assert imported_roots(package) & forbidden == set()


def test_relative_imports_are_seen():
    assert "openenv_lab.client" in imported_roots("adapters")
    assert "openenv_lab.servers" in imported_roots("launch")
