"""What installing openenv_lab costs: time and disk in a fresh venv, the largest dependencies, cold import
and time to a first observation, for the full install and for a client-only one.

- ``full``: ``pip install openenv-lab`` (this checkout): everything, our servers included, so
  ``gym.make("openenv/chess")`` starts its embedded server;
- ``client only``: ``pip install --no-deps openenv-lab`` plus ``requirements-client.txt`` (gymnasium, numpy,
  httpx, websockets, python-chess, pillow): for machines that only connect to servers elsewhere (a
  training node, a Ray worker). ``openenv`` and its web stack (FastAPI, Gradio, the OpenAI and MCP
  clients, the Hub client) are not installed.

For each: ``pip install`` wall time (with this machine's pip cache: warm after the first run), the venv's
size, its five largest distributions, the median of three cold ``import openenv_lab`` in new processes,
and the time from ``gym.make`` to the first observation of ``openenv/echo`` (the full install starts its
embedded server; the client-only one reaches a server started beside it).

    python benchmarks/install_cost.py                      # two venvs, a few minutes
    python benchmarks/install_cost.py --quick              # this interpreter's environment only, seconds
    python benchmarks/install_cost.py --json results/install.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openenv_lab.files import write_text_atomically  # noqa: E402

#: Printed by the venv's interpreter: its distributions and the bytes each has on disk, largest first.
SIZES = """
import json, os
from importlib import metadata
sizes = {}
for dist in metadata.distributions():
    total = 0
    for file in dist.files or []:
        try:
            total += os.path.getsize(dist.locate_file(file))
        except OSError:
            pass
    name = dist.metadata["Name"]
    sizes[name] = sizes.get(name, 0) + total
print(json.dumps(sorted(sizes.items(), key=lambda item: -item[1])))
"""

FIRST_OBSERVATION = """
import sys, time
started = time.perf_counter()
import gymnasium as gym
import openenv_lab
url = sys.argv[1] if len(sys.argv) > 1 else None
env = gym.make("openenv/echo", base_url=url)
env.reset(seed=0)
print(time.perf_counter() - started)
env.close()
"""


def run(command: list[str], *, timeout: float = 900, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done


def directory_mib(path: Path) -> float:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            candidate = Path(folder) / name
            if not candidate.is_symlink():
                total += candidate.stat().st_size
    return total / 2**20


def measure(python: str, url: str | None) -> dict[str, Any]:
    """Sizes, cold import and first observation, with ``python`` (a venv's interpreter, or this one)."""
    sizes = json.loads(run([python, "-c", SIZES]).stdout)
    imports = []
    for _ in range(3):
        started = time.perf_counter()
        run([python, "-c", "import openenv_lab"])
        imports.append(time.perf_counter() - started)
    first = float(run([python, "-c", FIRST_OBSERVATION, *([url] if url else [])]).stdout.split()[-1])
    return {
        "largest": [{"name": name, "mib": size / 2**20} for name, size in sizes[:5]],
        "distributions": len(sizes),
        "import_s": statistics.median(imports),
        "first_observation_s": first,
    }


def fresh_venv(where: Path, install: list[list[str]]) -> tuple[str, float, float]:
    """A new venv at ``where`` with ``install`` (pip argument lists) run in it: its python, the seconds the
    installs took, and its size in MiB."""
    run([sys.executable, "-m", "venv", str(where)])
    python = str(where / "bin" / "python")
    started = time.perf_counter()
    for arguments in install:
        run([python, "-m", "pip", "install", "-q", *arguments])
    return python, time.perf_counter() - started, directory_mib(where)


def start_server(python: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [python, "-m", "openenv_lab", "serve", "echo", "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:\d+", line)
    if not match:
        process.kill()
        raise RuntimeError(f"the echo server did not start: {line!r}")
    return process, match.group(0)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="measure this interpreter's environment only")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()}}
    installs: dict[str, Any] = {}
    if args.quick:
        installs["this environment"] = measure(sys.executable, None)
    else:
        with tempfile.TemporaryDirectory(prefix="openenv-lab-install-") as scratch:
            full_python, seconds, mib = fresh_venv(Path(scratch) / "full", [[str(ROOT)]])
            installs["full"] = {"install_s": seconds, "venv_mib": mib, **measure(full_python, None)}
            server, url = start_server(full_python)
            try:
                client_python, seconds, mib = fresh_venv(
                    Path(scratch) / "client",
                    [["--no-deps", str(ROOT)], ["-r", str(ROOT / "requirements-client.txt")]],
                )
                installs["client only"] = {
                    "install_s": seconds,
                    "venv_mib": mib,
                    **measure(client_python, url),
                }
            finally:
                server.terminate()
                server.wait(10)
            shutil.rmtree(scratch, ignore_errors=True)
    report["installs"] = installs
    for name, row in installs.items():
        size = f"{row['venv_mib']:,.0f} MiB in {row['install_s']:.0f} s, " if "venv_mib" in row else ""
        timing = f"import {row['import_s']:.2f} s, first observation {row['first_observation_s']:.2f} s"
        print(f"{name}: {size}{timing}")
        largest = ", ".join(f"{d['name']} {d['mib']:.0f} MiB" for d in row["largest"])
        print(f"  {row['distributions']} distributions; largest: {largest}")
    if args.json:
        write_text_atomically(args.json, json.dumps(report, indent=2) + "\n", what="the results")
        print(f"Results written to {args.json}")
    return report


if __name__ == "__main__":
    main(sys.argv[1:])
