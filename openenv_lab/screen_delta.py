"""Screen deltas: an Atari screen sent as the pixels that changed since the screen sent before it.

The Atari server finds the changed pixels (`changed_pixels`, on the ALE's palette-index screen) and packs
their colours (`pack_delta`); the Atari adapter rebuilds the screen (`apply_delta`); this module is the
byte layout both sides agree on. Consecutive Atari screens differ in a few hundred pixels (Pong: about
100 of 33,600), so a delta is about as small as a zlib-compressed screen and much cheaper to make and to
read (``benchmarks/env_throughput.py`` runs Pong through ``openenv/atari`` with each encoding).

Layout of a delta for a screen of ``pixels`` pixels with ``channels`` bytes each (3 for RGB, 1 for
grayscale and RAM): ``n`` pixel indices (row-major, little-endian ``uint16``, or ``uint32`` when
``pixels`` exceeds 65,536), then the ``n * channels`` new bytes of those pixels. ``n`` follows from the
length. An index may appear twice (with the same value); applying it twice is harmless.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["apply_delta", "changed_pixels", "pack_delta"]

#: Above this share of changed pixels a delta stops paying (a scrolling game, a flash): send a whole screen.
MAX_CHANGED_FRACTION = 1 / 8


@functools.lru_cache(maxsize=16)
def _layout(shape: tuple[int, ...]) -> tuple[int, int, np.dtype]:
    """Pixels, bytes per pixel and index type of a screen of ``shape``."""
    channels = shape[-1] if len(shape) == 3 else 1
    pixels = math.prod(shape) // channels
    index = np.dtype("<u2") if pixels <= 1 << 16 else np.dtype("<u4")
    return pixels, channels, index


def changed_pixels(screen: np.ndarray, previous: np.ndarray) -> np.ndarray | None:
    """Indices of the pixels of ``screen`` that may differ from ``previous`` (both C-contiguous ``uint8``).

    Every changed pixel is in the result; a few unchanged neighbours may be too, and some twice. Returns
    None when more than `MAX_CHANGED_FRACTION` of the pixels changed: send the whole screen then.
    """
    pixels, channels, _ = _layout(screen.shape)
    now, before = screen.reshape(-1), previous.reshape(-1)
    if now.size % 4 == 0:
        # Comparing 32-bit words is twice as fast as bytes; a changed word touches bytes 4w..4w+3.
        first = np.flatnonzero(now.view(np.uint32) != before.view(np.uint32)) * 4
        touched = np.concatenate([(first + k) // channels for k in range(0, 4, min(channels, 3))])
    else:
        touched = np.flatnonzero(now != before) // channels
    return None if touched.size > pixels * MAX_CHANGED_FRACTION else touched


def pack_delta(shape: tuple[int, ...], pixels: np.ndarray, values: np.ndarray) -> bytes:
    """The delta setting ``pixels`` (indices) of a screen of ``shape`` to ``values`` (one row each)."""
    index = _layout(shape)[2]
    return pixels.astype(index).tobytes() + np.ascontiguousarray(values, dtype=np.uint8).tobytes()


def apply_delta(previous: np.ndarray, delta: bytes) -> np.ndarray:
    """A new screen: ``previous`` with the pixels of ``delta`` replaced (``previous`` is left as it was).

    Raises:
        ValueError: when ``delta`` cannot be a delta for a screen of this shape.
    """
    if previous.dtype != np.uint8:
        raise TypeError(f"screens are uint8 arrays, got {previous.dtype}")
    pixels, channels, index = _layout(previous.shape)
    per_pixel = index.itemsize + channels
    count, extra = divmod(len(delta), per_pixel)
    if extra:
        raise ValueError(
            f"a screen delta for shape {previous.shape} is a multiple of {per_pixel} bytes long, "
            f"got {len(delta)} bytes"
        )
    where = np.frombuffer(delta, dtype=index, count=count)
    values = np.frombuffer(delta, dtype=f"V{channels}", offset=count * index.itemsize)
    screen = previous.copy()
    try:  # a pixel as one opaque item of `channels` bytes: half the time of indexing rows of a 2-D view
        screen.reshape(-1).view(values.dtype)[where] = values
    except IndexError:
        raise ValueError(
            f"a screen delta names pixel {int(where.max())} of a {pixels}-pixel screen"
        ) from None
    return screen
