"""The environment's share of a multi-turn rollout: a generated tool call against a model's generation.

For the chess environment of `openenv_lab.trl.environment_factory`: the time of one tool call (the
model's move in, the position after the opponent's reply out, as text) and of a reset, against the time
the smoke model (the tests' tiny random Qwen2, on CPU) takes to generate one turn of
``--tokens`` tokens. With ``--model NAME`` (a model already in the Hugging Face cache, or a path; no
download is attempted unless ``--allow-download``), the same for that model on the best device here.
Prints the environment's share of a turn (tool call / (tool call + generation)).

    python benchmarks/trl_tools.py                     # the smoke model on CPU, seconds
    python benchmarks/trl_tools.py --model Qwen/Qwen2.5-0.5B-Instruct --allow-download
    python benchmarks/trl_tools.py --json results/trl_tools.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import openenv_lab  # noqa: E402
from openenv_lab.files import write_text_atomically  # noqa: E402
from openenv_lab.trl import environment_factory  # noqa: E402
from tests.helpers import tiny_chat_model  # noqa: E402  # the tests' smoke model, from the checkout


def tool_call_times(calls: int) -> dict[str, float]:
    """Median seconds of a reset and of a move, over ``calls`` games' first moves."""
    Chess = environment_factory("openenv/chess", opponent="random", agent_color="white")
    game = Chess()
    resets, moves = [], []
    try:
        for seed in range(calls):
            started = time.perf_counter()
            text = game.reset(seed=seed)
            resets.append(time.perf_counter() - started)
            legal = text.rsplit("Legal moves: ", 1)[1].split()
            started = time.perf_counter()
            game.move(move=legal[seed % len(legal)])
            moves.append(time.perf_counter() - started)
    finally:
        game.close()
    return {"reset_s": statistics.median(resets), "tool_call_s": statistics.median(moves)}


def smoke_model() -> tuple[Any, Any]:
    """The tests' tiny random model (a byte-level BPE and a two-layer Qwen2), built here: no download."""
    return tiny_chat_model(["You play white. Legal moves: e2e4 d2d4"])


def generation_time(tokenizer: Any, model: Any, tokens: int, turns: int, device: str) -> float:
    """Median seconds to generate one turn of ``tokens`` tokens after a chess position's prompt."""
    Chess = environment_factory("openenv/chess", opponent="random", agent_color="white")
    game = Chess()
    try:
        position = game.reset(seed=0)
    finally:
        game.close()
    messages = [{"role": "user", "content": f"Play the best move with the move tool.\n{position}"}]
    inputs = tokenizer.apply_chat_template(
        messages,
        tools=[Chess.move],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    ).to(device)
    model = model.to(device).eval()
    times = []
    for _ in range(turns + 1):
        started = time.perf_counter()
        with torch.no_grad():
            model.generate(**inputs, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:])  # the first one warms up


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=32, help="tokens generated per turn")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--model", default=None, help="a causal LM to time too (cache or path)")
    parser.add_argument("--allow-download", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if not args.allow_download:
        os.environ["HF_HUB_OFFLINE"] = "1"
    env = tool_call_times(args.calls)
    tokenizer, model = smoke_model()
    rows = {"smoke model (CPU)": generation_time(tokenizer, model, args.tokens, args.turns, "cpu")}
    if args.model:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        rows[f"{args.model} ({device})"] = generation_time(
            AutoTokenizer.from_pretrained(args.model),
            AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype),
            args.tokens,
            args.turns,
            device,
        )
    print(
        f"chess via openenv_lab.trl: reset {env['reset_s'] * 1e3:.1f} ms, tool call "
        f"{env['tool_call_s'] * 1e3:.1f} ms (medians of {args.calls})"
    )
    print(f"{'model':<40} {'turn of ' + str(args.tokens) + ' tokens':>18} {'environment share':>18}")
    shares = {}
    for name, seconds in rows.items():
        shares[name] = env["tool_call_s"] / (env["tool_call_s"] + seconds)
        print(f"{name:<40} {seconds * 1e3:>15.1f} ms {shares[name]:>17.1%}")
    if args.json:
        report = {
            "benchmark": "trl_tools",
            "openenv_lab": openenv_lab.__version__,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "tokens_per_turn": args.tokens,
            "environment": env,
            "generation_s": rows,
            "environment_share": shares,
        }
        write_text_atomically(args.json, json.dumps(report, indent=2), "the results")  # never half a file
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
