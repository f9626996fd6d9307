"""What the notebooks cost on Binder and Colab: peak memory, Binder's image build, time to a first picture.

- **Peak memory** of every notebook and tutorial: its kernel and everything the kernel starts (the
  embedded servers are child processes), RSS summed over the process tree, sampled every 0.1 s, beside
  Binder's 2 GB (mybinder.org's limit). Twice: in smoke mode (what CI runs) and at the notebook's own
  budgets. A long training run only repeats its first iterations, so at the own budgets a cell that runs past
  ``--cell-seconds`` is interrupted there (the row says which cell was cut); the GRPO notebooks' own
  budgets need a GPU, and without one they take the CPU path, which is what Binder runs.
- **Binder's image build**: ``binder/requirements.txt`` then ``postBuild`` in a fresh venv, as
  repo2docker runs them: seconds and the venv's size (with this machine's pip cache).
- **Time to a first picture** on Colab's stack: a venv of Colab's versions (``scripts/colab_tier.py``),
  the chess notebook's install cell run as Colab runs it, then in a new process: ``import openenv_lab``
  with ``gym.make("openenv/chess")`` to its first observation, and a first widget (the viewer of a short
  recorded game, its display bundle built).

    python benchmarks/notebook_memory.py --json benchmarks/results/notebook_memory.json   # ~30 minutes
    python benchmarks/notebook_memory.py --quick        # one tutorial in smoke mode, seconds
    python benchmarks/notebook_memory.py --only tutorials/09_planning_and_q_learning.ipynb \
        --json benchmarks/results/notebook_memory.json  # measure these again; the other rows stay
    python scripts/render_benchmarks.py                 # then the docs' tables from the JSON
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from stamp import commit  # noqa: E402  # benchmarks/, this script's folder

from openenv_lab.files import write_text_atomically  # noqa: E402

#: mybinder.org's memory limit per session.
BINDER_MIB = 2048
MIB = 1024 * 1024


def notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "tutorials").glob("*.ipynb"))


class TreeSampler:
    """Samples the RSS summed over a process and its descendants, in a thread; keeps the peak."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every, self.peak, self.processes = pid, every, 0, 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        root = psutil.Process(self.pid)
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                tree = [root, *root.children(recursive=True)]
                total = 0
                for process in tree:
                    with contextlib.suppress(psutil.Error):
                        total += process.memory_info().rss
                if total > self.peak:
                    self.peak, self.processes = total, len(tree)
            self._stop.wait(self.every)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def peak_memory(path: Path, *, smoke: bool, cell_seconds: float) -> dict[str, Any]:
    """Runs ``path`` in a new kernel of this interpreter and samples its process tree."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    env = {"OPENENV_LAB_SMOKE": "1" if smoke else "0", "OPENENV_LAB_SOLUTIONS": "1", "MPLBACKEND": "agg"}
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=cell_seconds if not smoke else 900,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        interrupt_on_timeout=True,
    )
    cut: list[int] = []
    started = time.monotonic()
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)  # the kernel inherits them
    try:
        with client.setup_kernel(), TreeSampler(client.km.provisioner.process.pid) as sampler:
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                try:
                    client.execute_cell(cell, index)
                except (CellTimeoutError, CellExecutionError) as exc:
                    interrupted = isinstance(exc, CellTimeoutError) or "KeyboardInterrupt" in str(exc)
                    if smoke or not (interrupted or cut):
                        raise
                    # A long run, interrupted: its first iterations are measured. A later cell may then
                    # miss what the cut one would have made; it is skipped the same way.
                    cut.append(index)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {
        "peak_mib": round(sampler.peak / MIB, 1),
        "processes": sampler.processes,
        "seconds": round(time.monotonic() - started, 1),
        "cut_cells": cut,
    }


def directory_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / MIB


def binder_build() -> dict[str, Any]:
    """``binder/requirements.txt`` and ``postBuild`` in a fresh venv: seconds and size."""
    with tempfile.TemporaryDirectory() as scratch:
        venv = Path(scratch) / "binder"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        python = venv / "bin" / "python"
        # PIP_RETRIES=0: the file's extra index (PyTorch's, for Binder's CPU torch) may be unreachable here;
        # pip then fails each look-up at once instead of backing off five times for every package.
        env = {
            **os.environ,
            "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
            "PIP_NO_INPUT": "1",
            "PIP_RETRIES": "0",
        }
        started = time.monotonic()
        requirements = [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "-r",
            str(ROOT / "binder" / "requirements.txt"),
        ]
        subprocess.run(requirements, check=True, timeout=3600, env=env, capture_output=True)
        subprocess.run(
            ["bash", str(ROOT / "binder" / "postBuild")],
            check=True,
            timeout=3600,
            env=env,
            cwd=ROOT,
            capture_output=True,
        )
        return {"install_s": round(time.monotonic() - started, 1), "venv_mib": round(directory_mib(venv))}


#: Run by the Colab venv's python: seconds to the first observation, then to the first widget's bundle.
FIRST_PICTURE = """
import time
started = time.monotonic()
import gymnasium as gym, numpy as np, openenv_lab
env = openenv_lab.RecordTrajectory(gym.make("openenv/chess", agent_color="white", max_moves=20))
obs, info = env.reset(seed=0)
first_obs = time.monotonic() - started
for _ in range(6):
    obs, *_ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
bundle = openenv_lab.show(env)._repr_mimebundle_()
assert "application/vnd.jupyter.widget-view+json" in bundle, sorted(bundle)
print(first_obs, time.monotonic() - started)
env.close()
"""


def first_picture() -> dict[str, Any]:
    """On a venv of Colab's versions: the chess notebook's install cell, the first observation, the
    first widget."""
    import colab_tier

    freeze = ROOT.parent / "shared" / "colab" / "pip-freeze.txt"
    colab = colab_tier.read_freeze(freeze)
    with tempfile.TemporaryDirectory() as scratch:
        wheel = colab_tier.build_wheel(Path(scratch))
        python = colab_tier.build_venv(Path(scratch) / "colab", colab, wheel)
        cell = colab_tier.cell_source(
            colab_tier.first_code_cell(json.loads((ROOT / "notebooks" / "01_chess.ipynb").read_text()))
        )
        _, install_s, _ = colab_tier.run_cell(python, cell, wheel, preload=False)
        out = subprocess.run(
            [python, "-c", FIRST_PICTURE],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=scratch,
            check=True,
        )
        first_obs, first_widget = (float(x) for x in out.stdout.split())
    return {
        "install_cell_s": round(install_s, 1),
        "first_observation_s": round(first_obs, 2),
        "first_widget_s": round(first_widget, 2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one tutorial in smoke mode, for smoke tests")
    parser.add_argument(
        "--cell-seconds",
        type=float,
        default=60.0,
        help="at the own budgets, interrupt a cell after this long (default 60)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NOTEBOOK",
        help="measure these notebooks only; with --json, their rows replace those in the file (each row "
        "then says its own commit and date), and the rest of the file stays",
    )
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)
    if args.only:
        paths = [ROOT / name for name in args.only]
        missing = [name for name, path in zip(args.only, paths, strict=True) if not path.is_file()]
        if missing:
            parser.error(f"no such notebook: {', '.join(missing)}")
    elif args.quick:
        paths = [ROOT / "tutorials" / "01_rl_loop_over_a_network.ipynb"]
    else:
        paths = notebooks()
    rows = []
    for path in paths:
        row: dict[str, Any] = {"notebook": path.relative_to(ROOT).as_posix()}
        row["smoke"] = peak_memory(path, smoke=True, cell_seconds=args.cell_seconds)
        if not args.quick:
            row["own"] = peak_memory(path, smoke=False, cell_seconds=args.cell_seconds)
        rows.append(row)
        own = row.get("own", {})
        print(
            f"{row['notebook']:50} smoke {row['smoke']['peak_mib']:7.0f} MiB"
            + (f"   own budgets {own['peak_mib']:7.0f} MiB" if own else ""),
            flush=True,
        )
    report: dict[str, Any] = {
        "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "commit": commit(),
        "binder_mib": BINDER_MIB,
        "cell_seconds": args.cell_seconds,
        "notebooks": rows,
    }
    if args.only:
        return _merge(args.json, rows, args.cell_seconds)
    if not args.quick:
        report["binder_build"] = binder_build()
        print(f"Binder's build: {report['binder_build']}", flush=True)
        if (ROOT.parent / "shared" / "colab" / "pip-freeze.txt").is_file():
            report["colab_first_picture"] = first_picture()
            print(f"Colab, first picture: {report['colab_first_picture']}", flush=True)
    if args.json:
        write_text_atomically(args.json, json.dumps(report, indent=1) + "\n", "the benchmark's JSON")
    return report


def _merge(path: str | None, rows: list[dict[str, Any]], cell_seconds: float) -> dict[str, Any]:
    """The report at ``path`` with ``rows`` in place of its rows for the same notebooks (in the notebooks'
    order), each stamped with its commit and date; written back when there is a ``path``."""
    report: dict[str, Any] = json.loads(Path(path).read_text()) if path and Path(path).is_file() else {}
    if report.get("cell_seconds", cell_seconds) != cell_seconds:
        raise SystemExit(f"{path} was measured with --cell-seconds {report['cell_seconds']}: use the same")
    stamp = {"commit": commit(), "when": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    by_name = {row["notebook"]: row for row in report.get("notebooks", [])}
    by_name.update({row["notebook"]: {**row, **stamp} for row in rows})
    order = {path.relative_to(ROOT).as_posix(): index for index, path in enumerate(notebooks())}
    report["notebooks"] = sorted(by_name.values(), key=lambda row: order.get(row["notebook"], len(order)))
    if path:
        write_text_atomically(path, json.dumps(report, indent=1) + "\n", "the benchmark's JSON")
    return report


if __name__ == "__main__":
    main()
