"""Colab's stack, reproduced: the notebooks installed and run the way Colab runs them, and what that changes.

Colab's runtime comes with its own packages: numpy, torch, pyarrow, ipywidgets 7 and the kernel that its
front end talks to. A notebook's first cell must install openenv_lab on top without replacing those. This
tier checks that it does:

1. reads Google's list of Colab's packages (``../shared/colab/pip-freeze.txt``, or ``--freeze``);
2. builds a venv with Colab's versions of every package our notebooks import and of their dependencies,
   and of Colab's kernel stack (Python 3.11, this machine's: PyPI's torch for Colab's Python 3.13 is a
   CUDA build of several GB, and torch is the one package not at Colab's version here: this machine's CPU
   build, 2.13.0, stands in for Colab's 2.11.0);
3. runs each notebook's own install cell as Colab would (``google.colab`` imported), installing the wheel
   built from this checkout, and prints what the install changed among Colab's packages;
4. fails when a compiled package changes (numpy, torch, pyarrow, pandas, pillow, opencv, scipy), when
   Colab's kernel stack changes, or when ipywidgets leaves 7.x. The GRPO notebooks may replace pyarrow
   (TRL 1.x needs datasets>=4.7, and datasets needs pyarrow>=21): their cell restarts the runtime once when
   Colab had pyarrow loaded, which the tier checks too, and that a second run does not restart again;
5. executes every notebook and tutorial in smoke mode in that venv (the GRPO ones after their install).

    python scripts/colab_tier.py                     # the whole tier (about ten minutes with pip's cache)
    python scripts/colab_tier.py --no-notebooks      # the installs and their checks only
    python scripts/colab_tier.py --json report.json  # also write what changed, as JSON
    python scripts/colab_tier.py --wheel dist/openenv_lab-0.1.0-py3-none-any.whl  # a wheel built already
    python scripts/colab_tier.py --jobs 2            # two notebooks at once, each in a kernel of its own

When Google publishes a new list, replacing ``pip-freeze.txt`` is the whole update.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from install_cells import EXTRAS, RESTARTS, cell_source, first_code_cell, notebooks  # noqa: E402

#: Compiled packages: replacing one under a running kernel is what makes Colab ask for a restart.
COMPILED = (
    "numpy",
    "torch",
    "pyarrow",
    "pandas",
    "pillow",
    "opencv-python",
    "opencv-python-headless",
    "opencv-contrib-python",
    "scipy",
)
#: Colab runs its own kernel and front end; none of these may change.
KERNEL = (
    "ipykernel",
    "ipython",
    "jupyter-client",
    "jupyter-server",
    "notebook",
    "tornado",
    "traitlets",
    "pyzmq",
)
#: What the notebooks and our package import (by distribution), with the kernel stack and the compiled
#: packages: the venv starts with Colab's version of each, and of their dependencies.
BASE = (
    *COMPILED,
    *KERNEL,
    "ipywidgets",
    "widgetsnbextension",
    "nbclient",
    "nbformat",
    "matplotlib",
    "polars",
    "gymnasium",
    "httpx",
    "websockets",
    "uvicorn",
    "uvloop",
    "fastapi",
    "pydantic",
    "gradio",
    "openai",
    "jsonschema",
    "typer",
    "rich",
    "huggingface-hub",
    "tqdm",
    "ale-py",
    "transformers",
    "peft",
    "accelerate",
    "datasets",
    "tokenizers",
    "safetensors",
    "psutil",
    "requests",
    "pyyaml",
)
#: This machine's CPU build of torch, in place of Colab's (its lines are URLs to the PyTorch index).
TORCH = "torch==2.13.0"
#: Left at what the venv brings: the installer's own tools (and torch 2.13, standing in for Colab's 2.11,
#: needs setuptools>=77, newer than Colab's).
TOOLING = ("pip", "setuptools", "wheel")
#: What each notebook's install may change among the compiled packages, and why.
ALLOWED = {"pyarrow": "TRL 1.x needs datasets>=4.7, and datasets needs pyarrow>=21"}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_freeze(path: Path) -> dict[str, str]:
    """Colab's versions by normalized name: its ``name==version`` lines, and its ``name @ URL`` lines
    (torch, torchvision, torchaudio: the version their wheel's file name gives), so that an install cell
    replacing one of those is seen too."""
    versions = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line.strip())
        if match:
            versions[normalize(match.group(1))] = match.group(2)
        elif (name := url_name(line)) is not None:
            versions[normalize(name)] = url_version(path, name) or "a URL"
    return versions


def url_name(line: str) -> str | None:
    """The distribution of a ``name @ URL`` line of Colab's list, or None for any other line."""
    match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*) @ \S+", line.strip())
    return match.group(1) if match else None


def from_urls(path: Path) -> set[str]:
    """The normalized names Colab installs from URLs: builds of its own, which this machine's index does
    not have (this machine's CPU build stands in for torch)."""
    return {normalize(name) for line in path.read_text().splitlines() if (name := url_name(line))}


@dataclass
class Change:
    name: str
    colab: str | None  # Colab's version (None: Colab does not have it)
    before: str | None  # in the venv before this install
    after: str | None
    binary: bool = False  # ships compiled extension modules (found in its files, beyond `COMPILED`)

    @property
    def verdict(self) -> str | None:
        """Why this change fails the tier, or None."""
        if self.before is None or self.after == self.before:
            return None
        if self.name == "ipywidgets" and not (self.after or "").startswith("7."):
            return "ipywidgets left 7.x, the widgets Colab's front end speaks"
        if self.name in KERNEL:
            return "Colab's kernel stack changed"
        if self.name in COMPILED or self.binary:
            return "a compiled package changed"
        return None


@dataclass
class Step:
    """One install cell run, as Colab would run it."""

    notebooks: list[str]
    requirement: str
    seconds: float
    restarted: bool
    changes: list[Change] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def run(command: list[str], *, timeout: float = 1800, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-3000:] + result.stderr[-3000:])
        raise SystemExit(f"colab tier: {' '.join(command[:6])}... failed ({result.returncode})")
    return result


def installed(python: str) -> dict[str, str]:
    """The venv's distributions and versions, by normalized name."""
    script = (
        "import json, importlib.metadata as m;"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    out = run([python, "-c", script]).stdout
    return {normalize(name): version for name, version in json.loads(out).items()}


def build_venv(where: Path, colab: dict[str, str], wheel: Path, urls: Collection[str] = ()) -> str:
    """A venv with Colab's versions of `BASE`, of everything our notebooks' installs would bring that Colab
    has (as pip resolves them, without installing), and of their dependencies; its python."""
    if where.exists():
        shutil.rmtree(where)
    run([sys.executable, "-m", "venv", str(where)])
    python = str(where / "bin" / "python")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        everything = f"openenv-lab[{','.join(sorted(set(','.join(EXTRAS.values()).split(','))))}]"
        wanted_by_us = pip_would_install(python, everything, wheel, "--ignore-installed")
        brought = {normalize(item["metadata"]["name"]) for item in wanted_by_us}
        constraints = Path(scratch) / "colab.txt"
        pins = [f"{name}=={version}" for name, version in colab.items() if name not in {*TOOLING, *urls}]
        constraints.write_text("\n".join(pins) + "\n")
        wanted = sorted(
            {name for name in (*BASE, *brought) if name in colab and name not in {*TOOLING, *urls}}
        )
        # --no-compile: what the notebooks import compiles on first import; the rest of torch and its
        # neighbours never needs to (compiling it all is minutes of CPU, and changes nothing checked here).
        run([python, "-m", "pip", "install", "-q", "--no-compile", TORCH, *wanted, "-c", str(constraints)])
    print(f"Colab's base: {len(installed(python))} distributions in {time.monotonic() - started:.0f} s")
    return python


def build_wheel(out: Path) -> Path:
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)])
    (wheel,) = out.glob("openenv_lab-*.whl")
    return wheel


#: Runs an install cell as Colab's kernel would: google.colab imported, and (for the restart check)
#: pyarrow already loaded, as it is once pandas or datasets has been imported.
CELL_RUNNER = """
import sys, types
sys.modules["google.colab"] = types.ModuleType("google.colab")
if sys.argv[2] == "preload":
    import pyarrow
exec(compile(open(sys.argv[1]).read(), "install cell", "exec"))
"""


def run_cell(python: str, cell: str, wheel: Path, *, preload: bool) -> tuple[bool, float, str]:
    """Runs ``cell``; returns (whether it restarted the runtime, seconds, what it printed)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as source:
        source.write(cell)
    env = {**os.environ, "OPENENV_LAB_SOURCE": wheel.as_uri()}
    started = time.monotonic()
    result = subprocess.run(
        [python, "-c", CELL_RUNNER, source.name, "preload" if preload else "-"],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    os.unlink(source.name)
    seconds = time.monotonic() - started
    said = (result.stdout + result.stderr).strip()
    if result.returncode == -signal.SIGKILL:
        return True, seconds, said
    if result.returncode != 0:
        raise SystemExit(f"colab tier: the install cell failed:\n{said[-3000:]}")
    return False, seconds, said


#: Prints the names, among those given, of distributions that ship compiled extension modules.
BINARY = """
import re, sys, importlib.metadata as m
for d in m.distributions():
    name = re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower()
    if name in sys.argv[1:] and any(str(f).endswith((".so", ".pyd")) for f in d.files or ()):
        print(name)
"""


def changes(
    python: str, colab: dict[str, str], before: dict[str, str], after: dict[str, str]
) -> list[Change]:
    """Every package of Colab's that this install changed (versions differ, or removed)."""
    found = [
        Change(name, colab.get(name), before.get(name), after.get(name))
        for name in sorted(set(before) | set(after))
        if name in colab and before.get(name) != after.get(name)
    ]
    binary = set(run([python, "-c", BINARY, *(c.name for c in found)]).stdout.split())
    for change in found:
        change.binary = change.name in binary
    return found


def install_step(python: str, colab: dict[str, str], group: list[str], wheel: Path) -> Step:
    """Runs the install cell shared by ``group``, checks what changed, and (for a notebook that may
    restart) that the cell restarts when pyarrow was loaded and changed, and that a second run does not."""
    cell = cell_source(first_code_cell(json.loads((ROOT / group[0]).read_text())))
    before = installed(python)
    restarts = group[0] in RESTARTS
    restarted, seconds, said = run_cell(python, cell, wheel, preload=restarts)
    after = installed(python)
    requirement = "openenv-lab" + (f"[{EXTRAS[group[0]]}]" if group[0] in EXTRAS else "")
    step = Step(group, requirement, seconds, restarted, changes(python, colab, before, after))
    for change in step.changes:
        reason = change.verdict
        if reason and change.name in ALLOWED and restarts:
            continue
        if reason:
            step.failures.append(f"{change.name} {change.before} -> {change.after}: {reason}")
    if restarts:
        replaced = any(c.name in ALLOWED for c in step.changes)
        if replaced != restarted:
            step.failures.append(
                f"the cell {'restarted' if restarted else 'did not restart'} the runtime, but pyarrow was "
                f"{'replaced' if replaced else 'kept'}"
            )
        again, _, said_again = run_cell(python, cell, wheel, preload=True)
        if again:
            step.failures.append(f"a second run restarted the runtime again: {said_again[-500:]}")
    elif restarted:
        step.failures.append(f"the cell killed its kernel: {said[-500:]}")
    return step


def pip_would_install(python: str, requirement: str, wheel: Path, *options: str) -> list[dict[str, Any]]:
    """What ``pip install`` of ``requirement`` (from ``wheel``) would install, without installing (pip's
    ``--report``'s ``install`` list)."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        dry_run = ["install", "-q", "--dry-run", *options, "--report", str(report)]
        run([python, "-m", "pip", *dry_run, f"{requirement} @ {wheel.as_uri()}"])
        return list(json.loads(report.read_text())["install"])


def would_change(python: str, colab: dict[str, str], requirement: str, wheel: Path) -> dict[str, str]:
    """What installing ``requirement`` (from ``wheel``) into a venv of Colab's versions would change of
    them, as pip resolves it without installing: name -> the version it would bring."""
    brought = pip_would_install(python, requirement, wheel)
    found = {normalize(item["metadata"]["name"]): item["metadata"]["version"] for item in brought}
    return {name: version for name, version in found.items() if name in colab and version != colab[name]}


def unnamed_changes(cell: str, changed: dict[str, str]) -> list[str]:
    """The packages of ``changed`` that the cell's comments do not name (``huggingface_hub`` names
    huggingface-hub): Colab's users read the comment to know what the cell touches."""
    comments = " ".join(line.strip() for line in cell.splitlines() if line.strip().startswith("#"))
    named = {normalize(word) for word in re.findall(r"[A-Za-z0-9][A-Za-z0-9._-]*", comments)}
    return sorted(name for name in changed if name not in named)


def groups() -> list[list[str]]:
    """Notebooks by install cell, in the order a venv can take them: the GRPO ones (which may replace
    pyarrow) last, so that the others run on Colab's own pyarrow."""
    by_cell: dict[str, list[str]] = {}
    for notebook in notebooks():
        by_cell.setdefault(EXTRAS.get(notebook, ""), []).append(notebook)
    return sorted(by_cell.values(), key=lambda group: (group[0] in RESTARTS, len(EXTRAS.get(group[0], ""))))


#: Executes notebooks in smoke mode in the venv's own kernel (nbclient: Colab's version). A cell that
#: completes can still have shown an error: a display hook that raised (IPython then prints the traceback
#: and shows a fallback instead of the widget), so those outputs fail the run too.
NOTEBOOK_RUNNER = """
import sys, nbformat
from nbclient import NotebookClient
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": sys.argv[2]}})
client.execute()
if len(sys.argv) > 3:  # where to keep the executed notebook (the docs build shows its outputs)
    nbformat.write(nb, sys.argv[3])
shown = [
    f"cell {index}: {output.ename}: {output.evalue}"
    for index, cell in enumerate(nb.cells)
    for output in cell.get("outputs", [])
    if output.output_type == "error"
]
if shown:
    sys.exit("errors shown by cells that completed: " + "; ".join(shown))
"""


def execute(python: str, notebook: str, keep: Path | None = None) -> tuple[float, str | None]:
    """Runs ``notebook`` top to bottom in the venv's kernel: seconds, and the error if a cell failed.
    With ``keep``, the executed notebook is written under it, at its path in the repository."""
    env = {**os.environ, "OPENENV_LAB_SMOKE": "1", "OPENENV_LAB_SOLUTIONS": "1", "MPLBACKEND": "agg"}
    env.setdefault("OPENENV_LAB_CHECK_SECONDS", "600")  # notebooks run beside the installs: shared cores
    env.pop("PYTHONPATH", None)
    started = time.monotonic()
    # The venv's own kernel spec (never a user's "python3"), and a temporary folder for the install and
    # the kernel: the kernel is stopped without running its finalizers, so what it made there (SB3's log
    # folders, the notebook's TemporaryDirectory), and the empty folder ipykernel's install leaves, go
    # with this one.
    with tempfile.TemporaryDirectory(prefix="colab-tier-") as scratch:
        kernels, env["TMPDIR"] = Path(scratch) / "kernels", str(Path(scratch) / "tmp")
        Path(env["TMPDIR"]).mkdir()
        run([python, "-m", "ipykernel", "install", "--prefix", str(kernels), "--name", "python3"], env=env)
        env["JUPYTER_PATH"] = str(kernels / "share" / "jupyter")
        result = subprocess.run(
            [python, "-c", NOTEBOOK_RUNNER, str(ROOT / notebook), str((ROOT / notebook).parent)]
            + ([] if keep is None else [str(keep / notebook)]),
            capture_output=True,
            text=True,
            timeout=1800,
            env=env,
        )
    error = None if result.returncode == 0 else (result.stdout + result.stderr)[-3000:]
    return time.monotonic() - started, error


def url_version(path: Path, name: str) -> str | None:
    """The version in a ``name @ URL`` line of Colab's list (torch's wheel URL names it), or None."""
    for line in path.read_text().splitlines():
        if line.startswith(f"{name} @ "):
            match = re.search(rf"/{name}-([0-9][^-]*?)(?:%2B|\+|-)", line)
            return match.group(1) if match else None
    return None


def report(steps: list[Step], colab_torch: str | None, torch_here: str | None) -> None:
    print(f"torch: Colab has {colab_torch}; this venv has {torch_here} (this machine's CPU build stands in)")
    for step in steps:
        restart = ", restarted the runtime once" if step.restarted else ""
        print(f"\n{step.requirement} for {', '.join(step.notebooks)}: {step.seconds:.0f} s{restart}")
        if not step.changes:
            print("  changed none of Colab's packages")
        may_replace = step.notebooks[0] in RESTARTS
        for change in step.changes:
            failed = change.verdict and not (change.name in ALLOWED and may_replace)
            kind = "compiled" if change.name in COMPILED or change.binary else "pure Python"
            print(
                f"{'  FAIL' if failed else '     '} {change.name:28} Colab {change.colab or '-':14} "
                f"now {change.after or 'removed':16} ({kind})"
            )
        for failure in step.failures:
            print(f"  error: {failure}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--freeze", type=Path, default=ROOT.parent / "shared" / "colab" / "pip-freeze.txt")
    parser.add_argument("--venv", type=Path, default=ROOT / ".venv-colab")
    parser.add_argument("--no-notebooks", action="store_true", help="the installs and their checks only")
    parser.add_argument("--json", type=Path, help="also write the report here")
    parser.add_argument(
        "--executed",
        type=Path,
        help="keep each executed notebook under this folder (scripts/build_docs.py --seed shows them)",
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="notebooks run at once, each in a kernel of its own (default 1)"
    )
    parser.add_argument(
        "--wheel",
        type=Path,
        help="install this wheel of openenv-lab (built from this checkout) instead of building one here: "
        ".ci/run builds one for every venv, so that no two builds in the checkout run at once",
    )
    args = parser.parse_args(argv)
    if not args.freeze.is_file():
        print(f"colab tier: no list of Colab's packages at {args.freeze}; pass --freeze", file=sys.stderr)
        return 2
    colab = read_freeze(args.freeze)
    urls = from_urls(args.freeze)
    if args.jobs < 1:
        print(f"colab tier: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    if args.wheel is not None and not args.wheel.is_file():
        print(f"colab tier: no wheel at {args.wheel}", file=sys.stderr)
        return 2
    if args.executed is not None:
        args.executed = args.executed.resolve()
        for folder in ("notebooks", "tutorials"):
            (args.executed / folder).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as dist:
        wheel = args.wheel.resolve() if args.wheel else build_wheel(Path(dist))
        python = build_venv(args.venv, colab, wheel, urls)
        steps: list[Step] = []
        ran: dict[str, dict[str, Any]] = {}
        # On Colab each notebook's cell runs on Colab's own versions: what it would change is asked of pip
        # before any cell has run here (the cells below run one after another in this one venv).
        unnamed: dict[str, list[str]] = {}
        for group in groups():
            requirement = "openenv-lab" + (f"[{EXTRAS[group[0]]}]" if group[0] in EXTRAS else "")
            cell = cell_source(first_code_cell(json.loads((ROOT / group[0]).read_text())))
            changed = would_change(python, colab, requirement, wheel)
            unnamed[group[0]] = [
                f"{name} ({colab[name]} -> {changed[name]})" for name in unnamed_changes(cell, changed)
            ]
        for group in groups():
            steps.append(install_step(python, colab, group, wheel))
            if unnamed[group[0]]:
                missed = ", ".join(unnamed[group[0]])
                steps[-1].failures.append(
                    f"{group[0]}: the install cell changes Colab's {missed}, which its comment does not "
                    "name: name them in scripts/install_cells.py's template"
                )
            if args.no_notebooks or steps[-1].failures:
                continue
            # Each notebook in a kernel and a temporary folder of its own: --jobs of them at once.
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                results = pool.map(lambda notebook: execute(python, notebook, args.executed), group)
                for notebook, (seconds, error) in zip(group, results, strict=True):
                    ran[notebook] = {"seconds": round(seconds, 1), "error": error}
                    print(f"  ran {notebook} in {seconds:.0f} s" + (": FAILED" if error else ""), flush=True)
    report(steps, url_version(args.freeze, "torch"), installed(python).get("torch"))
    failed = [f"{notebook}:\n{row['error']}" for notebook, row in ran.items() if row["error"]]
    failed += [f for step in steps for f in step.failures]
    if args.json:
        data = {
            "steps": [{**vars(step), "changes": [vars(change) for change in step.changes]} for step in steps],
            "notebooks": ran,
        }
        partial = args.json.with_name(f".{args.json.name}.partial")
        partial.write_text(json.dumps(data, indent=1) + "\n")
        partial.replace(args.json)  # never a half-written report
    if failed:
        print("\nColab tier FAILED:", *failed, sep="\n", file=sys.stderr)
        return 1
    print(f"\nColab tier passed: {len(steps)} install cells, {len(ran)} notebooks run on Colab's stack")
    return 0


if __name__ == "__main__":
    sys.exit(main())
