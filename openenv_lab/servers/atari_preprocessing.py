"""DeepMind-style Atari preprocessing computed by the server, as gymnasium's ``AtariPreprocessing`` does it.

A client that trains on 84x84 grayscale screens has no use for the 100 KB RGB screen of every emulator
frame; with ``reset(preprocessing={...})`` our Atari server does the work of gymnasium's
``AtariPreprocessing`` wrapper itself and sends only its result (a few KB per step): no-op starts,
frame skipping with the maximum over the last two frames, grayscale, the resize to ``screen_size``
(OpenCV's area interpolation, as the wrapper uses), and optionally the end of an episode at each lost
life. Step for step it follows the wrapper over ``ALE/...-v5`` with ``frameskip=1``, so the same seed
and actions give the same observations, rewards and endings (tested against gymnasium).

The settings are the wrapper's own keyword arguments (``noop_max``, ``frame_skip``, ``screen_size``,
``terminal_on_life_loss``, ``grayscale_obs``); what needs no emulator (``scale_obs``, a channel axis, frame
stacking, reward clipping) the client does (`openenv_lab.adapters.AtariAdapter`). Needs OpenCV on the
server (``opencv-python-headless``), as the wrapper does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..preprocessing import Preprocessing

__all__ = ["Preprocessing", "Preprocessor"]


class Preprocessor:
    """One session's preprocessing state: the two screen buffers pooled over, and the lives seen last.

    ``ale`` is the session's ``ALEInterface``, ``noop`` the game's NOOP action, ``rng`` the generator that
    draws the number of no-ops (the one gymnasium's ``ALE/...-v5`` keeps as ``np_random``).
    """

    def __init__(self, settings: Preprocessing, ale: Any, noop: Any) -> None:
        self.settings = settings
        self._ale = ale
        self._noop = noop
        self._resize = _resizer()
        shape = _screen_shape(ale, settings.grayscale_obs)
        self._buffers = [np.zeros(shape, dtype=np.uint8), np.zeros(shape, dtype=np.uint8)]
        self._lives = 0

    def reset(self, rng: np.random.Generator, restart: Callable[[], None]) -> np.ndarray:
        """After the emulator's own reset: the no-op start (``restart`` resets the game again should it end
        during the no-ops), then the first observation."""
        noops = int(rng.integers(1, self.settings.noop_max + 1)) if self.settings.noop_max > 0 else 0
        for _ in range(noops):
            self._ale.act(self._noop)
            if self._ale.game_over(with_truncation=False) or self._ale.game_truncated():
                restart()
        self._lives = self._ale.lives()
        self._grab(self._buffers[0])
        self._buffers[1].fill(0)
        return self._observation()

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        """One agent step: ``frame_skip`` emulator frames. Returns the observation, the summed reward,
        terminated (the game ended, or a life was lost with ``terminal_on_life_loss``) and truncated."""
        settings, ale = self.settings, self._ale
        reward, terminated, truncated = 0.0, False, False
        for t in range(settings.frame_skip):
            reward += ale.act(action)
            terminated, truncated = ale.game_over(with_truncation=False), ale.game_truncated()
            if settings.terminal_on_life_loss:
                lives = ale.lives()
                terminated = terminated or lives < self._lives
                self._lives = lives
            if terminated or truncated:
                break  # the buffers keep what they had, as the wrapper's do
            if t == settings.frame_skip - 2:
                self._grab(self._buffers[1])
            elif t == settings.frame_skip - 1:
                self._grab(self._buffers[0])
        return self._observation(), reward, terminated, truncated

    def _grab(self, buffer: np.ndarray) -> None:
        if self.settings.grayscale_obs:
            self._ale.getScreenGrayscale(buffer)
        else:
            self._ale.getScreenRGB(buffer)

    def _observation(self) -> np.ndarray:
        if self.settings.frame_skip > 1:  # pooled in place, into the first buffer (as the wrapper does)
            np.maximum(self._buffers[0], self._buffers[1], out=self._buffers[0])
        return np.ascontiguousarray(self._resize(self._buffers[0], self.settings.screen_size), dtype=np.uint8)


def _resizer() -> Callable[[np.ndarray, tuple[int, int]], np.ndarray]:
    try:
        import cv2
    except ImportError:
        raise ValueError(
            "Server-side preprocessing needs OpenCV on the server: pip install opencv-python-headless "
            "(openenv-lab[atari] has it)"
        ) from None
    return lambda screen, size: cv2.resize(screen, size, interpolation=cv2.INTER_AREA)


def _screen_shape(ale: Any, grayscale: bool) -> tuple[int, ...]:
    height, width = ale.getScreenDims()
    return (height, width) if grayscale else (height, width, 3)
