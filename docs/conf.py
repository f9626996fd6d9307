"""Sphinx settings of the documentation site: the guide in ``docs/``, the notebooks and tutorials with their
outputs, and the API reference from the docstrings.

Build it from the repository's root (``scripts/build_docs.py`` runs this and checks the result):

    sphinx-build -W --keep-going -c docs . build/site

The source folder is the repository itself, so that ``notebooks/`` and ``tutorials/`` are pages without
copies; ``include_patterns`` keeps everything else out. Notebooks run in smoke mode at build time through
jupyter-cache (``build/jupyter_cache``): a notebook whose code has not changed is not run again.
"""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.ext.autodoc.mock import mock
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# The notebooks' kernels inherit these, as in the test suite (conftest.py): small budgets, and the lessons'
# exercises answered by their reference solutions (tutorials/solutions/), so that each check's verdict shows.
os.environ.setdefault("OPENENV_LAB_SMOKE", "1")
os.environ.setdefault("OPENENV_LAB_SOLUTIONS", "1")
os.environ.setdefault("OPENENV_LAB_CHECK_SECONDS", "600")  # the checks' limit, on a machine doing more
os.environ.setdefault("OPENENV_LAB_PROGRESS", "0")

from openenv_lab.version import __version__  # noqa: E402

project = "openenv_lab"
author = "openenv_lab contributors"
copyright = "openenv_lab contributors, BSD-3-Clause"
release = version = __version__

root_doc = "docs/index"
extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]
include_patterns = [
    "docs/**",
    "notebooks/*.ipynb",
    "tutorials/*.ipynb",
    "tutorials/README.md",
    "CHANGELOG.md",
    "ARCHITECTURE.md",
]
exclude_patterns = ["docs/conf.py", "**/.ipynb_checkpoints"]

# MyST: headings get anchors for links such as guide/servers.md#tokens; $...$ and $$...$$ are maths.
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3

# Notebooks: run (smoke mode) unless jupyter-cache holds a run of the same code; a cell that raises fails
# the build, naming the notebook. The widgets show their static picture: their live view needs a kernel.
nb_execution_mode = os.environ.get("OPENENV_LAB_DOCS_EXECUTE", "cache")
nb_execution_cache_path = str(ROOT / "build" / "jupyter_cache")
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
nb_ipywidgets_js: dict[str, dict[str, str]] = {}  # no live widgets here: no require.js, no widget manager
nb_mime_priority_overrides = [
    ("html", "application/vnd.jupyter.widget-view+json", None),
    ("html", "application/vnd.jupyter.widget-state+json", None),
]

# API reference: Google-style docstrings ("Args:", "Example:"); `Name` in a docstring links to Name.
default_role = "py:obj"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # "Attributes:" as fields: dataclass fields are documented once
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # gymnasium's own docstrings belong to its site
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"show-inheritance": True}
# Optional extras the docs' venv does not install: their modules still document (RLlib pins another
# gymnasium; see docs/ray.md).
autodoc_mock_imports = ["ray.rllib", "tree"]

html_theme = "furo"
html_title = f"openenv_lab {version}"
html_static_path: list[str] = []
html_copy_source = False
html_show_sourcelink = False


#: The order in which the API pages claim the objects they document: an object exported by several
#: modules (``openenv_lab.Session`` is ``openenv_lab.client.Session``) is documented once, on the first.
API_MODULES = (
    "openenv_lab",
    "openenv_lab.envs",
    "openenv_lab.client",
    "openenv_lab.adapters",
    "openenv_lab.launch",
    "openenv_lab.servers",
    "openenv_lab.options",
    "openenv_lab.record",
    "openenv_lab.widgets",
    "openenv_lab.evaluation",
    "openenv_lab.report_card",
    "openenv_lab.render",
    "openenv_lab.market",
    "openenv_lab.course",
    "openenv_lab.sb3",
    "openenv_lab.trl",
    "openenv_lab.rllib",
    "openenv_lab.preprocessing",
    "openenv_lab.machine",
    "openenv_lab.files",
    "openenv_lab.progress",
    "openenv_lab.ranges",
    "openenv_lab.screen_delta",
    "openenv_lab.space_json",
    "openenv_lab.optional_imports",
)


def public_names(module_name: str) -> list[str]:
    """The names a module's page documents: its ``__all__``, less what an earlier page documents."""
    claimed: set[int] = set()
    with mock(autodoc_mock_imports):
        for earlier in API_MODULES[: API_MODULES.index(module_name)]:
            module = importlib.import_module(earlier)
            values = [getattr(module, name) for name in exported(module)]
            claimed |= {id(value) for value in values if documented_once(value)}
        module = importlib.import_module(module_name)
    return [name for name in exported(module) if id(getattr(module, name)) not in claimed]


def data_home(module: Any, name: str) -> str:
    """The module that sets a constant a package exports (where its ``#:`` comment is), else the package."""
    value = getattr(module, name)
    for info in pkgutil.iter_modules(getattr(module, "__path__", []), f"{module.__name__}."):
        try:
            if getattr(importlib.import_module(info.name), name, None) is not value:
                continue
            if ("", name) in ModuleAnalyzer.for_module(info.name).find_attr_docs():
                return info.name
        except Exception:
            continue
    return str(module.__name__)


def exported(module: Any) -> list[str]:
    """A module's ``__all__``, without ``__version__``."""
    return [name for name in getattr(module, "__all__", ()) if name != "__version__"]


def documented_once(value: Any) -> bool:
    """Whether a value is documented where it is first exported: classes and functions (a constant's
    identity says nothing: small numbers and strings are shared by everyone)."""
    return inspect.isclass(value) or inspect.isroutine(value)


class ApiDirective(SphinxDirective):
    """``.. api:: openenv_lab.envs`` (in an ``eval-rst`` block): the module's docstring, then each public
    name it is the first to export."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module_name = self.arguments[0]
        names = public_names(module_name)
        with mock(autodoc_mock_imports):
            module = importlib.import_module(module_name)
        data = [name for name in names if not documented_once(getattr(module, name))]
        lines = [f".. automodule:: {module_name}"]
        if len(data) < len(names):
            members = ", ".join(name for name in names if name not in data)
            lines += [f"   :members: {members}", "   :undoc-members:"]
        for name in data:  # autodoc leaves out constants a package imports: each is named where it is set
            value = getattr(module, name)
            lines += ["", f".. autodata:: {data_home(module, name)}.{name}"]
            if not isinstance(value, (bool, int, float)) and not (isinstance(value, str) and len(value) < 60):
                lines.append("   :no-value:")
        container = nodes.section()
        container.document = self.state.document
        self.state.nested_parse(StringList(lines, source=f"api of {module_name}"), 0, container)
        return container.children


def _redirect_to_the_front_page(app: Any, exception: Exception | None) -> None:
    """``index.html`` at the site's root, so that the host's address opens the front page."""
    if exception is None and app.builder.format == "html":
        page = '<!doctype html><meta http-equiv="refresh" content="0; url=docs/index.html">'
        Path(app.outdir, "index.html").write_text(page + '<a href="docs/index.html">openenv_lab</a>\n')


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("api", ApiDirective)
    app.connect("build-finished", _redirect_to_the_front_page)
    return {"parallel_read_safe": True}
