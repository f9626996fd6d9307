"""The layering of ARCHITECTURE.md, checked on the imports each package makes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "openenv_lab"


def imported_roots(package: str) -> set[str]:
    """Top-level names of everything the modules of ``openenv_lab/<package>`` import."""
    roots = set()
    for path in (PACKAGE / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("client", {"gymnasium", "numpy", "openenv", "chess"}),  # the wire only
        ("adapters", {"websockets", "httpx", "openenv"}),  # adapters never open sockets
        ("launch", {"gymnasium", "openenv"}),  # launchers know servers, not spaces
    ],
)
def test_layers_import_only_what_they_may(package, forbidden):
    assert imported_roots(package) & forbidden == set()
