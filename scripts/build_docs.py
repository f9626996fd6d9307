"""Build the documentation site into ``build/site`` and check it: the one command for the docs.

    pip install -e ".[docs]"
    python scripts/build_docs.py              # the site, notebooks run in smoke mode (cached)
    python scripts/build_docs.py --doctest    # and every docstring example run

Any warning fails the build (Sphinx's ``-W``), and Sphinx names the page and line: a link to a page that
moved, a docstring whose reST is broken, a notebook cell that raises (its traceback is printed). With
``--doctest`` a docstring example that no longer runs fails it too, named by its module and line: the
examples run as the test suite runs them (``pytest --doctest-modules``), in their module's namespace.

After the build, every public name (``openenv_lab.__all__`` and the ``__all__`` of each module the API
reference covers) must have its entry in the API reference; the script names those that do not.

Notebooks are executed through jupyter-cache in ``build/jupyter_cache``: a notebook whose code did not
change since its last run is not run again. ``--seed DIR`` first adds to that cache the notebooks executed
elsewhere, under ``DIR`` at their paths in the repository (``.ci/run`` passes those the Colab tier ran in
smoke mode): each is used where its code is the code of the notebook here, and the notebook is run
otherwise. ``--no-execute`` shows the notebooks as they are stored (no outputs).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def sphinx(
    builder: str, out: Path, execute: bool, source: Path = ROOT, **settings: str
) -> subprocess.CompletedProcess[str]:
    """Runs Sphinx with the site's settings (``settings`` override them, as ``-D NAME=VALUE``); its
    warnings are printed as they come, and kept in the result's ``stderr``."""
    env = {**os.environ, "OPENENV_LAB_DOCS_EXECUTE": "cache" if execute else "off"}
    command = [sys.executable, "-m", "sphinx", "-b", builder, "-W", "--keep-going", "-q", "-c", str(DOCS)]
    command += [f"-D{name}={value}" for name, value in settings.items()]
    command += [str(source), str(out)]
    done = subprocess.run(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(done.stderr)
    return done


def doctests(paths: list[Path]) -> subprocess.CompletedProcess[str]:
    """Runs the docstring examples of ``paths`` (modules or packages) as the test suite does."""
    command = [sys.executable, "-m", "pytest", "--doctest-modules", "-q", "-p", "no:cacheprovider"]
    done = subprocess.run(command + [str(p) for p in paths], cwd=ROOT, capture_output=True, text=True)
    sys.stdout.write(done.stdout[-20_000:])
    return done


def seed(folder: Path) -> list[str]:
    """Adds the executed notebooks under ``folder`` to the build's jupyter-cache; returns those added."""
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str(ROOT / "build" / "jupyter_cache"))
    added = []
    for executed_path in sorted(folder.glob("*/*.ipynb")):
        rel = executed_path.relative_to(folder).as_posix()
        source_path = ROOT / rel
        if not source_path.is_file():
            continue
        source = nbformat.read(source_path, as_version=4)
        executed = nbformat.read(executed_path, as_version=4)
        if [c.source for c in source.cells] != [c.source for c in executed.cells]:
            continue  # another version of the notebook: the build runs this one
        # The cache's key hashes the code and the metadata: the source's, not what the run added (timings).
        for mine, theirs in zip(source.cells, executed.cells, strict=True):
            theirs.metadata = mine.metadata
        executed.metadata = source.metadata
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(scratch) / executed_path.name
            nbformat.write(executed, copy)
            cache.cache_notebook_file(str(copy), uri=str(source_path), check_validity=False, overwrite=True)
        added.append(rel)
    return added


def documented_ids(site: Path) -> set[str]:
    """The ids of the API reference's entries (``openenv_lab.envs.OpenEnvVectorEnv``...)."""
    found: set[str] = set()
    for page in (site / "docs" / "api").glob("*.html"):
        found |= set(re.findall(r'<dt class="sig[^"]*" id="([\w.]+)"', page.read_text()))
    return found


def undocumented(site: Path) -> list[str]:
    """The public names without an entry of their own in the API reference."""
    sys.path.insert(0, str(DOCS))
    import conf

    ids = documented_ids(site)
    missing = []
    for module_name in conf.API_MODULES:
        # Each page's own names, where the page puts them: a class or function under the page's module, a
        # constant under the module that sets it. A name an earlier page documents is checked there.
        with conf.mock(conf.autodoc_mock_imports):
            module = importlib.import_module(module_name)
            for name in conf.public_names(module_name):
                value = getattr(module, name)
                home = module_name if conf.documented_once(value) else conf.data_home(module, name)
                if f"{home}.{name}" not in ids:
                    missing.append(f"{module_name}.{name}")
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site", help="where the site goes")
    parser.add_argument("--doctest", action="store_true", help="also run every docstring example")
    parser.add_argument("--no-execute", action="store_true", help="do not run the notebooks")
    parser.add_argument("--seed", type=Path, help="executed notebooks to take outputs from (see above)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.seed is not None and args.seed.is_dir():
        added = seed(args.seed)
        print(f"Took the outputs of {len(added)} notebooks executed elsewhere ({args.seed})")
    if sphinx("html", args.out, execute=not args.no_execute).returncode != 0:
        print("The docs build failed: the warnings above name each page and line.", file=sys.stderr)
        return 1
    missing = undocumented(args.out)
    if missing:
        print(f"Public names without an API entry: {', '.join(missing)}", file=sys.stderr)
        return 1
    if args.doctest and doctests([ROOT / "openenv_lab"]).returncode != 0:
        print("A docstring example failed (above: its module and line).", file=sys.stderr)
        return 1
    print(f"Built {args.out / 'index.html'} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
