"""The GPU path in one command: the GRPO notebooks at their GPU budgets and the TRL tool-call benchmark.

For a machine with one CUDA GPU that does bfloat16 (the notebooks' full path trains in it). Runs
``notebooks/04_grpo.ipynb`` and ``notebooks/05_grpo_tools.ipynb`` top to bottom with their own (GPU)
budgets, each within ``--minutes``, then ``benchmarks/trl_tools.py --model``, and writes what they
measured as JSON (``--json``): training minutes, peak GPU memory, the mean rewards logged, the mate rate
before and after (notebook 04), and the environment's share of a multi-turn rollout. The figures reach the
docs through ``scripts/render_benchmarks.py``, never by hand.

The model comes from the Hugging Face cache, a local folder (``--model PATH``: on a machine without
network access, copy the weights there first), or a download where the network allows it. ``--tiny``
builds the tests' tiny random Qwen2 instead (nothing downloaded): it checks that the GPU path runs (bf16,
LoRA, generation on the device, the servers beside it) where no real weights can be had, and its rewards
and mate rates mean nothing. ``--steps`` trains fewer steps than the notebooks' own, for such a check.

    python scripts/gpu_run.py --json benchmarks/results/gpu.json
    python scripts/gpu_run.py --model /models/Qwen2.5-0.5B-Instruct --minutes 4
    python scripts/gpu_run.py --tiny --steps 20 --minutes 5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ("notebooks/04_grpo.ipynb", "notebooks/05_grpo_tools.ipynb")
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"

#: Appended to each notebook: what it measured, as one JSON line (names a notebook may not define are left
#: out).
REPORT_CELL = """
import json as _json, torch as _torch
_names = ("training_minutes", "before", "after", "rewards")
print("GPU_RUN " + _json.dumps({
    **{name: globals()[name] for name in _names if name in globals()},
    "peak_gpu_gib": _torch.cuda.max_memory_allocated() / 2**30,
    "device": _torch.cuda.get_device_name(0),
}, default=float))
"""


def gpu() -> str | None:
    """The GPU's name when there is one with bfloat16, else None."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.cuda.get_device_name(0)
    return None


#: The notebooks' GPU step budgets, as their training cells write them (``--steps`` replaces the number).
MAX_STEPS = re.compile(r"max_steps=(\d+) if FULL")


def tiny_model(folder: Path) -> str:
    """The tests' tiny random Qwen2 and its byte-level BPE, saved in ``folder``: a model to check the GPU
    path with where no weights can be downloaded (what it learns means nothing)."""
    sys.path.insert(0, str(ROOT))
    from tests.helpers import tiny_chat_model

    corpus = [
        "You are a chess engine. Answer with one move in UCI notation, such as e2e4, and nothing else.",
        "Position (FEN): rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1 Legal moves: e2e4 d2d4",
    ]
    tokenizer, model = tiny_chat_model(corpus)
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return str(folder)


def with_steps(source: str, steps: int) -> str:
    """A training cell's source with its GPU step budget set to ``steps``."""
    changed, count = MAX_STEPS.subn(f"max_steps={steps} if FULL", source)
    return changed if count else source


def run_notebook(path: Path, model: str, minutes: float, steps: int | None = None) -> dict[str, Any]:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(path, as_version=4)
    if steps is not None:
        sources = [cell.source for cell in nb.cells]
        for cell in nb.cells:
            cell.source = with_steps(cell.source, steps)
        if sources == [cell.source for cell in nb.cells]:
            raise SystemExit(f"gpu_run: no 'max_steps=N if FULL' in {path.name}; --steps cannot apply")
    nb.cells.append(nbformat.v4.new_code_cell(REPORT_CELL))
    os.environ.update({"OPENENV_LAB_SMOKE": "0", "OPENENV_LAB_MODEL": model})
    client = NotebookClient(
        nb, timeout=minutes * 60, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    started = time.monotonic()
    row: dict[str, Any] = {"notebook": path.relative_to(ROOT).as_posix()}
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError) as exc:
        row["error"] = str(exc).strip().splitlines()[-1][:500]
    row["wall_minutes"] = round((time.monotonic() - started) / 60, 2)
    for output in nb.cells[-1].get("outputs", []):
        for line in output.get("text", "").splitlines():
            if line.startswith("GPU_RUN "):
                row.update(json.loads(line.removeprefix("GPU_RUN ")))
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default=MODEL, help=f"a name in the HF cache, or a folder (default {MODEL})"
    )
    parser.add_argument(
        "--tiny", action="store_true", help="the tests' tiny random model, built here (a check of the path)"
    )
    parser.add_argument("--steps", type=int, default=None, help="train this many steps, not the notebooks'")
    parser.add_argument("--minutes", type=float, default=4.0, help="the most one cell may run")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    device = gpu()
    if device is None:
        print(
            "gpu_run: no CUDA GPU with bfloat16 here; the GRPO notebooks' full path needs one",
            file=sys.stderr,
        )
        return 2
    if args.tiny:
        args.model = tiny_model(Path(tempfile.mkdtemp(prefix="tiny-qwen2-")))
    report: dict[str, Any] = {
        "device": device,
        "model": "tiny random Qwen2 (a check of the path)" if args.tiny else args.model,
        "steps": args.steps,
        "notebooks": [],
    }
    for notebook in NOTEBOOKS:
        row = run_notebook(ROOT / notebook, args.model, args.minutes, args.steps)
        report["notebooks"].append(row)
        print(json.dumps(row), flush=True)
    with_tools = ROOT / "benchmarks" / "results" / ".gpu-trl-tools.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "trl_tools.py"),
            "--model",
            args.model,
            "--json",
            str(with_tools),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report["trl_tools"] = (
        json.loads(with_tools.read_text()) if done.returncode == 0 else {"error": done.stderr[-500:]}
    )
    with_tools.unlink(missing_ok=True)
    if args.json:
        partial = args.json.with_name(f".{args.json.name}.partial")
        partial.write_text(json.dumps(report, indent=1) + "\n")
        partial.replace(args.json)  # never a half-written file
    failed = [row for row in report["notebooks"] if "error" in row] or "error" in report["trl_tools"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
