"""What the lessons that train a network share (10 on): PyTorch, imported with an error that says how to get
it, and training on one thread."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

try:
    import torch
    from torch import nn
except ImportError as exc:  # pragma: no cover - every install the lessons name has torch
    raise ImportError(
        "The lessons from 10 on need PyTorch: pip install torch (Colab and Binder have it already)"
    ) from exc

__all__ = ["nn", "one_thread", "torch"]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Train on one thread inside the block: networks this small train fastest so, since several threads
    fight over a laptop's few cores. The thread count is restored afterwards."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
