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


def _gpu_run():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_run", ROOT / "scripts" / "gpu_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_steps_replace_each_notebooks_gpu_budget_and_nothing_else():
    import nbformat

    gpu_run = _gpu_run()
    for name in gpu_run.NOTEBOOKS:
        nb = nbformat.read(ROOT / name, as_version=4)
        before = [cell.source for cell in nb.cells]
        after = [gpu_run.with_steps(source, 7) for source in before]
        changed = [(b, a) for b, a in zip(before, after, strict=True) if b != a]
        assert len(changed) == 1, name  # the training cell alone
        old, new = changed[0]
        assert "max_steps=7 if FULL else 2," in new
        assert new.replace("max_steps=7 if FULL", "") == gpu_run.MAX_STEPS.sub("", old), name


def test_the_tiny_model_loads_back_as_the_notebooks_load_a_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = _gpu_run().tiny_model(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.bfloat16)
    assert model.dtype == torch.bfloat16
    assert {"q_proj", "k_proj", "v_proj", "o_proj"} <= {
        n.rsplit(".", 1)[-1] for n, _ in model.named_modules()
    }
    inputs = tokenizer.apply_chat_template(
        [{"role": "user", "content": "e2e4"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )
    output = model.generate(**inputs, max_new_tokens=3, do_sample=False)
    assert output.shape[1] == inputs["input_ids"].shape[1] + 3 or tokenizer.eos_token_id in output[0]
