"""scripts/gpu_run.py, the GPU path's one command: without a GPU it refuses in one line, before loading
anything (its full run needs a CUDA GPU with bfloat16, which CI does not have)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the script would run")
def test_without_a_gpu_it_says_so_and_exits_2(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_run.py"), "--json", str(tmp_path / "gpu.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "gpu_run: no CUDA GPU with bfloat16 here; the GRPO notebooks' full path needs one"
    )
    assert not (tmp_path / "gpu.json").exists()
