"""Small helpers shared by tests."""

from __future__ import annotations

import json
import queue
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil


def require_stockfish() -> str:
    """Stockfish's path; without it the calling test is skipped, saying so, or fails where it must be
    there (``OPENENV_LAB_REQUIRE_STOCKFISH=1``: ``.ci/run`` installs Debian's package and sets it)."""
    import os

    import pytest

    from openenv_lab.servers.chess_opponents import find_stockfish

    found = find_stockfish()
    if found is not None:
        return found
    reason = "Stockfish is not installed (apt install stockfish)"
    if os.environ.get("OPENENV_LAB_REQUIRE_STOCKFISH") == "1":
        pytest.fail(f"{reason}; OPENENV_LAB_REQUIRE_STOCKFISH=1 says this machine has it")
    pytest.skip(reason)


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes (for process lifetimes, not speed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (orphans may wait a while to be reaped), on any OS."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stopped(pid: int) -> bool:
    """Whether a process is stopped (SIGSTOP), on any OS psutil knows."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    """The next line of a child's stdout, or "" if none comes within ``timeout`` (never blocks longer)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return ""
    return process.stdout.readline()


def serve_cli(server: str, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``openenv-lab serve SERVER --port 0 ARGS``; the process and its banner's lines (the first,
    with the URL, and those printed at once after it, such as a generated token)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "openenv_lab", "serve", server, "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    banner = [lines.get(timeout=60)]
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        try:
            banner.append(lines.get(timeout=max(0.01, deadline - time.monotonic())))
        except queue.Empty:
            break
    return process, [line.rstrip("\n") for line in banner]


def tiny_chat_model(corpus: list[str], *, width: int = 64, layers: int = 2) -> tuple[object, object]:
    """A randomly initialised Qwen2 and a byte-level BPE trained on ``corpus``, with Qwen2.5's chat
    template (whose tool calls TRL parses): a model for smoke runs, built here, nothing downloaded."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    torch.manual_seed(0)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        [*corpus, '<tool_call>{"name": "move", "arguments": {"move": "e2e4"}}</tool_call>'],
        trainers.BpeTrainer(
            vocab_size=512,
            special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<pad>", padding_side="left"
    )
    tokenizer.chat_template = qwen2_5_chat_template
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=width,
        intermediate_size=2 * width,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
    )
    return tokenizer, Qwen2ForCausalLM(config)


def script_chat_model(
    tokenizer: object,
    model: object,
    prompts: list[list[dict]],
    completion: str,
    *,
    tools: list | None = None,
    steps: int = 200,
) -> None:
    """Teach ``model`` (a `tiny_chat_model`) to answer each of ``prompts`` (chats, rendered with ``tools``
    as the trainer renders them) with ``completion``: a scripted model for smoke runs that must see the
    model act (a tool call, say), fitted here in seconds."""
    import torch

    batches = []
    for messages in prompts:
        prompt = tokenizer.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(prompt + completion + tokenizer.eos_token, return_tensors="pt").input_ids
        labels = ids.clone()
        labels[:, : len(tokenizer(prompt).input_ids)] = -100  # learn the answer, not the question
        batches.append((ids, labels))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        ids, labels = batches[step % len(batches)]
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def info_signature(info: dict) -> dict:
    """What must stay the same from step to step for infos to stack: each key's Python type (a numpy
    array's dtype and shape), a dict's keys recursively. A None anywhere is its own type, so it differs."""
    import numpy as np

    signature: dict = {}
    for key, value in info.items():
        if isinstance(value, dict):
            signature[key] = info_signature(value)
        elif isinstance(value, np.ndarray):
            signature[key] = ("ndarray", str(value.dtype), value.shape)
        else:
            signature[key] = type(value).__name__
    return signature


def run_check_script(python: str, script: Path, *args: str, timeout: float) -> dict:
    """Run a check script (tests/*_check.py) with another venv's ``python``, from the repository root, and
    return the report of its last ``RESULT {json}`` line; a failed run fails the test with its output."""
    command = [python, str(script), *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=script.parent.parent)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-5000:]
    return json.loads(lines[-1].removeprefix("RESULT "))


def check_env_warnings(env: Any, **kwargs: Any) -> list[str]:
    """What gymnasium's ``check_env(env, **kwargs)`` warned, word for word. Not ResourceWarnings: those are
    about objects of earlier tests in the worker (a socket left to the garbage collector), collected while
    check_env ran."""
    import warnings

    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, **kwargs)
    return [str(w.message) for w in caught if not issubclass(w.category, ResourceWarning)]
