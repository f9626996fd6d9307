"""The layering of ARCHITECTURE.md, checked on the imports every module of the package makes.

The layers are read from the picture in ARCHITECTURE.md, so the picture and the code cannot drift apart:
a unit imports only units of lower layers (module-level imports, ``TYPE_CHECKING`` ones included), never
another package's private (``_``) module, and no two modules import each other, directly or round a
circle. Imports inside functions follow the same rule, except the few conveniences listed here with
their reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "openenv_lab"

#: Function-level imports that run upward on purpose, and why.
LAZY_UPWARD = {
    (
        "record",
        "render",
    ): "Trajectory.to_html() and _repr_html_: a recording shows itself (python-chess style)",
}


def layers() -> dict[str, int]:
    """Unit -> layer number, from the block after ``<!-- layers -->`` in ARCHITECTURE.md."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    block = re.search(r"<!-- layers[^>]*-->\s*```text\n(.*?)```", text, re.S)
    assert block, "ARCHITECTURE.md has no layers picture (<!-- layers --> then a ```text block)"
    ranks: dict[str, int] = {}
    for line in block.group(1).splitlines():
        match = re.match(r"\s*(\d+)\s+(\w+(?:, \w+)*)", line)  # the units; their description follows
        if match:
            for name in match.group(2).split(", "):
                ranks[name] = int(match.group(1))
    return ranks


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit(module: str) -> str:
    """The layer unit of a module: its top-level subpackage or module (``openenv_lab`` for the root)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "openenv_lab"


def is_module(name: str) -> bool:
    path = ROOT / Path(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports(path: Path) -> tuple[set[str], set[str]]:
    """The openenv_lab modules ``path`` imports: at module level (with ``TYPE_CHECKING`` blocks), and
    inside functions."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text())
    top: set[str] = set()
    lazy: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    source = ".".join([*base, child.module] if child.module else base)
                else:
                    source = child.module or ""
                targets = [
                    f"{source}.{alias.name}" if is_module(f"{source}.{alias.name}") else source
                    for alias in child.names
                ]
            for target in targets:
                if target.split(".")[0] == "openenv_lab" and target != name:
                    (lazy if inside else top).add(target)
            visit(child, inside)

    visit(tree, False)
    return top, lazy


def graph() -> dict[str, tuple[set[str], set[str]]]:
    return {module_name(path): imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


GRAPH = graph()
#: The package each module belongs to (a package's ``__init__`` belongs to the package itself).
PACKAGE_OF = {
    module_name(path): module_name(path)
    if path.name == "__init__.py"
    else module_name(path).rsplit(".", 1)[0]
    for path in PACKAGE.rglob("*.py")
}


def test_every_unit_of_the_package_has_a_layer():
    ranks = layers()
    units = {unit(module) for module in GRAPH}
    assert units - set(ranks) == set(), "add them to the layers picture in ARCHITECTURE.md"
    assert set(ranks) - units == set(), "the picture names units the package does not have"


def test_imports_run_down_the_layers_only():
    ranks = layers()
    upward = []
    for module, (top, lazy) in GRAPH.items():
        for target, at_top in [*((t, True) for t in top), *((t, False) for t in lazy)]:
            source_unit, target_unit = unit(module), unit(target)
            if source_unit == target_unit:
                continue
            if ranks[target_unit] < ranks[source_unit]:
                continue
            if not at_top and (source_unit, target_unit) in LAZY_UPWARD:
                continue
            upward.append(f"{module} -> {target} ({'module level' if at_top else 'in a function'})")
    assert upward == []


def test_no_module_imports_another_packages_private_module():
    offences = []
    for module, (top, lazy) in GRAPH.items():
        for target in top | lazy:
            parts = target.split(".")
            private = next((k for k, part in enumerate(parts) if part.startswith("_")), None)
            if private is None:
                continue
            owner = ".".join(parts[:private])
            if owner != PACKAGE_OF[module]:
                offences.append(f"{module} -> {target}")
    assert offences == []


def test_no_import_circles():
    edges = {module: {t for t in top if t in GRAPH} for module, (top, _) in GRAPH.items()}
    circles = []
    for start in edges:
        stack = [(start, [start])]
        seen = set()
        while stack:
            node, path = stack.pop()
            for nxt in edges.get(node, ()):
                if nxt == start:
                    circles.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert circles == []


def test_the_checks_see_relative_and_private_imports():
    top, _ = GRAPH["openenv_lab.envs.vector"]
    assert "openenv_lab.envs._episode" in top and "openenv_lab.client.pool" in top
    assert "openenv_lab.client" in GRAPH["openenv_lab.adapters.base"][0]
    _, lazy = GRAPH["openenv_lab.record.trajectory"]
    assert "openenv_lab.render.pages" in lazy


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("client", {"gymnasium", "numpy", "openenv", "chess"}),  # the wire only
        ("adapters", {"websockets", "httpx", "openenv"}),  # adapters never open sockets
        ("launch", {"gymnasium", "openenv"}),  # launchers know servers, not spaces
        ("render", {"websockets", "httpx", "openenv", "ipywidgets"}),  # rows in, HTML out
        ("widgets", {"websockets", "httpx", "openenv"}),  # widgets never talk to servers
    ],
)
def test_layers_use_only_the_libraries_they_may(package, forbidden):
    used = set()
    for path in (PACKAGE / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                used |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                used.add(node.module.split(".")[0])
    assert used & forbidden == set()
