"""The Atari adapter: ALE screens as ``uint8`` boxes, ``Discrete(n)`` actions, over any OpenEnv Atari server.

Spaces: ``Box(0, 255, (210, 160, 3), uint8)`` for ``obs_type="rgb"`` (the default), ``(210, 160)`` for
``"grayscale"``, ``(128,)`` for ``"ram"``; ``Discrete(n)`` with ``n`` the game's action set (minimal, or 18
with ``full_action_space=True``), read from the server's ``legal_actions``.

Screens travel compactly when the server can: the adapter asks for ``screen_encoding="zlib"`` at its first
reset, and for ``"delta"`` (only the pixels that changed since the last screen) from then on if the
server's reset metadata offers it, and decodes ``screen_b64`` straight into a ``uint8`` array. A server
that does not know the option (the official ``atari_env``) ignores it and sends the JSON list, which is
decoded as well; nothing to configure.

Built to drop into code written for ``gym.make("ALE/Pong-v5")``: ``env.unwrapped.ale`` answers
``lives()``, ``getScreenRGB()``, ``getScreenGrayscale()`` (ALE's own luminance rounding) and ``getRAM()``
from the last observation, ``env.unwrapped.get_action_meanings()`` and ``env.unwrapped._frameskip``
exist, and a seeded reset seeds the emulator and the env's ``np_random`` as ALE's environments do. So
``AtariPreprocessing(gym.make("openenv/atari", game="pong", frameskip=1))`` works and, with the same
seed and actions, gives the same observations as it does on ``ALE/Pong-v5``.

Seeding: like ALE, only an explicit ``reset(seed=...)`` reseeds (it reloads the ROM); later
resets continue the emulator's random stream, so a run is reproducible from its first seed.

Info (`AtariAdapter.info_keys`, on every step), as ALE's: ``lives``, ``episode_frame_number``,
``frame_number``, and ``end_reason`` (``""`` until the end; ``game_over`` is a termination,
``frame_limit`` a truncation); with ``clip_reward``, ``unclipped_reward`` too.
"""

from __future__ import annotations

import base64
import collections
import io
import re
import weakref
import zlib
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from ..client import Client, EnvironmentMismatch, ProtocolError, StepResult
from ..options import curriculum_names
from ..preprocessing import split_preprocessing
from ..screen_delta import apply_delta
from .base import Adapter, Transition, base_info
from .info_schema import InfoKey

__all__ = ["AtariAdapter", "ScreenProxy", "encode_png"]

_SHAPES = {"rgb": (210, 160, 3), "grayscale": (210, 160), "ram": (128,)}
_ENCODINGS = ("auto", "delta", "zlib", "raw", "json")


def game_id(name: str) -> str:
    """The ALE's id of a game named as gymnasium does: ``"ALE/SpaceInvaders-v5"``, ``"SpaceInvaders"``,
    ``"SpaceInvadersNoFrameskip-v4"`` and ``"space_invaders"`` are all ``"space_invaders"``.

    Example:
        >>> game_id("ALE/Pong-v5"), game_id("MontezumaRevenge"), game_id("pong")
        ('pong', 'montezuma_revenge', 'pong')
    """
    if not isinstance(name, str):
        raise ValueError(f"game must be a game's name such as 'pong', got {name!r}")
    base = re.sub(r"(NoFrameskip|Deterministic)?-v\d+$", "", name.strip().removeprefix("ALE/"))
    if base.islower() or not base.isalnum():
        return base
    return re.sub(r"(?<!^)(?=[A-Z])", "_", base).lower()


class ScreenProxy:
    """The part of ``ale_py.ALEInterface`` that wrappers read, answered from the last observation."""

    def __init__(self, adapter: AtariAdapter) -> None:
        self._adapter_ref = weakref.ref(adapter)  # no cycle: an unused env is freed (and closed) at once

    @property
    def _adapter(self) -> AtariAdapter:
        adapter = self._adapter_ref()
        if adapter is None:
            raise ReferenceError("The environment behind this ALE proxy is gone")
        return adapter

    def lives(self) -> int:
        return self._adapter.lives

    def _full_screen(self) -> np.ndarray:
        adapter = self._adapter
        if adapter.preprocessing is not None:
            raise ValueError(
                "The server preprocesses this env's screens (preprocessing=...): there is no full screen to "
                "read. Make the env without preprocessing to wrap it in gymnasium's AtariPreprocessing."
            )
        return adapter.screen

    def getScreenRGB(self, out: np.ndarray | None = None) -> np.ndarray:
        screen = self._full_screen()
        if screen.ndim != 3:
            raise ValueError("getScreenRGB needs obs_type='rgb'")
        return _copy_into(screen, out)

    def getScreenGrayscale(self, out: np.ndarray | None = None) -> np.ndarray:
        screen = self._full_screen()
        if screen.ndim == 3:
            # ALE's grayscale: luminance of the RGB palette colour, rounded to the nearest integer.
            screen = np.rint(screen @ np.array([0.2989, 0.5870, 0.1140])).astype(np.uint8)
        elif screen.ndim != 2:
            raise ValueError("getScreenGrayscale needs obs_type='rgb' or 'grayscale'")
        return _copy_into(screen, out)

    def getRAM(self, out: np.ndarray | None = None) -> np.ndarray:
        screen = self._full_screen()
        if screen.ndim != 1:
            raise ValueError("getRAM needs obs_type='ram'")
        return _copy_into(screen, out)

    def game_over(self) -> bool:
        return self._adapter.game_over


def encode_png(screen: np.ndarray) -> bytes:
    """A screen (RGB or grayscale ``uint8``) as PNG bytes, fast compression."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(screen).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def _copy_into(screen: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        return screen.copy()
    np.copyto(out, screen.reshape(out.shape))
    return out


#: The Atari family's info keys, as ALE's environments name theirs.
ATARI_INFO_KEYS = (
    InfoKey("lives", "int", "lives left"),
    InfoKey("episode_frame_number", "int", "emulator frames since the episode began"),
    InfoKey("frame_number", "int", "emulator frames since the ROM was loaded"),
    InfoKey(
        "end_reason", "str", "why the episode ended: `game_over` (terminated), `frame_limit` (truncated)"
    ),
)
#: With ``clip_reward=True``.
CLIPPED_INFO_KEYS = (InfoKey("unclipped_reward", "float", "the step's reward before clipping to its sign"),)


class AtariAdapter(Adapter):
    """Gymnasium spaces for OpenEnv Atari servers.

    Args:
        game: an ALE game id (``"pong"``, ``"breakout"``...); 108 ship with ale-py.
        obs_type: ``"rgb"``, ``"grayscale"`` or ``"ram"``.
        frameskip: emulator frames per step (4 by default; 1 under ``AtariPreprocessing``, and with
            ``preprocessing``, which skips frames itself).
        repeat_action_probability: sticky actions (``ALE/...-v5`` uses 0.25; the default here is 0.0, as
            in OpenEnv's atari_env).
        full_action_space, mode, difficulty, max_num_frames_per_episode: as in ALE.
        screen_encoding: how screens should travel when the server can choose: ``"auto"`` (the default:
            ``"delta"`` where the server offers it, else ``"zlib"``), ``"delta"``, ``"zlib"``, ``"raw"``
            or ``"json"``.
        preprocessing: DeepMind-style preprocessing, computed by our server: ``True`` for gymnasium's
            ``AtariPreprocessing`` defaults (30 no-ops, 4-frame skip with max-pooling, 84x84 grayscale), or
            a dict of that wrapper's keyword arguments. Observations are what the wrapper would give, and
            each step carries a few KB instead of a full screen. Needs our server (with OpenCV).
        frame_stack: stack the last N observations, as ``FrameStackObservation(env, N)`` does.
        clip_reward: rewards as their sign (-1, 0, 1), as DeepMind's agents train; the reward before
            clipping is ``info["unclipped_reward"]``.

    Example:
        >>> import gymnasium as gym, openenv_lab
        >>> env = gym.make("openenv/atari", game="pong")
        >>> env.observation_space, env.action_space
        (Box(0, 255, (210, 160, 3), uint8), Discrete(6))
        >>> env.close()
    """

    server_name: ClassVar[str | None] = "atari"
    family: ClassVar[str] = "atari"
    render_modes: ClassVar[tuple[str, ...]] = ("rgb_array",)
    render_fps: ClassVar[int] = 15
    needs_probe: ClassVar[bool] = True
    derive_seeds: ClassVar[bool] = False
    env_attributes: ClassVar[tuple[str, ...]] = ("ale", "get_action_meanings", "_frameskip")
    raw_fields_left_out: ClassVar[tuple[str, ...]] = ("screen", "screen_b64")
    #: Settings a curriculum may change between episodes (the spaces stay the same).
    reset_option_names: ClassVar[tuple[str, ...]] = curriculum_names("atari")

    def __init__(
        self,
        *,
        game: str = "pong",
        obs_type: str = "rgb",
        frameskip: int | None = None,
        repeat_action_probability: float | None = None,
        full_action_space: bool | None = None,
        mode: int | None = None,
        difficulty: int | None = None,
        max_num_frames_per_episode: int | None = None,
        screen_encoding: str = "auto",
        preprocessing: bool | dict[str, Any] | None = None,
        frame_stack: int | None = None,
        clip_reward: bool = False,
    ) -> None:
        game = game_id(game)
        self.preprocessing, self._client_preprocessing = split_preprocessing(preprocessing)
        if self.preprocessing is not None:
            if frameskip not in (None, 1):
                raise ValueError(
                    f"frameskip={frameskip!r} with preprocessing: the server's preprocessing skips frames "
                    "itself (its frame_skip); leave frameskip unset"
                )
            frameskip = 1
        frameskip = 4 if frameskip is None else frameskip
        if frame_stack is not None and (
            not isinstance(frame_stack, (int, np.integer)) or isinstance(frame_stack, bool) or frame_stack < 1
        ):
            raise ValueError(f"frame_stack must be a positive integer (or None), got {frame_stack!r}")
        if not isinstance(clip_reward, (bool, np.bool_)):
            raise ValueError(f"clip_reward must be True or False, got {clip_reward!r}")
        self.frame_stack = None if frame_stack is None else int(frame_stack)
        self.clip_reward = bool(clip_reward)
        self.info_keys = ATARI_INFO_KEYS + (CLIPPED_INFO_KEYS if self.clip_reward else ())
        self._stack: collections.deque[np.ndarray] = collections.deque(maxlen=self.frame_stack or 1)
        if obs_type not in _SHAPES:
            raise ValueError(f"obs_type must be one of {', '.join(_SHAPES)}, got {obs_type!r}")
        if screen_encoding not in _ENCODINGS:
            raise ValueError(
                f"screen_encoding must be one of {', '.join(_ENCODINGS)}, got {screen_encoding!r}"
            )
        settings = {
            "game": game,
            "obs_type": obs_type,
            "frameskip": frameskip,
            "repeat_action_probability": repeat_action_probability,
            "full_action_space": full_action_space,
            "mode": mode,
            "difficulty": difficulty,
            "max_num_frames_per_episode": max_num_frames_per_episode,
        }
        #: What every reset sends of the game's settings (those not given: the server's defaults).
        self.settings = {name: value for name, value in settings.items() if value is not None}
        self.screen_encoding = screen_encoding
        # What to ask for at the next reset; "auto" becomes "delta" once the server says it has it.
        self._asked = "zlib" if screen_encoding == "auto" else screen_encoding
        self._frame_number: int | None = None  # of self.screen, the base of the next delta
        self._frameskip = frameskip
        self.ale = ScreenProxy(self)
        self.screen = np.zeros(_SHAPES[obs_type], dtype=np.uint8)
        self.lives = 0
        self.game_over = False
        self._action_meanings: list[str] = []
        self.served_game: str | None = None  # what the server's reset metadata says it runs

    def get_action_meanings(self) -> list[str]:
        """What each action does, e.g. ``['NOOP', 'FIRE', 'RIGHT', 'LEFT', 'RIGHTFIRE', 'LEFTFIRE']``."""
        return list(self._action_meanings)

    def np_random(self, seed: int) -> np.random.Generator:
        """The env's generator after ``reset(seed)``, derived as ALE's environments derive theirs."""
        np_seed = np.random.SeedSequence(seed).generate_state(n_words=2)[0]
        return seeding.np_random(int(np_seed))[0]

    def set_reset_option(self, name: str, value: Any) -> None:
        """Change one of the game's settings from the next reset on (the server checks the value then)."""
        if name not in self.reset_option_names:
            raise AttributeError(f"{name!r} is not a reset option of Atari: {list(self.reset_option_names)}")
        if value is None:
            self.settings.pop(name, None)
        else:
            self.settings[name] = value

    @property  # type: ignore[override]  # the declared dict, computed: the encoding asked for changes
    def reset_options(self) -> dict[str, Any]:
        if self.preprocessing is None:
            return {**self.settings, "screen_encoding": self._asked}
        # Preprocessed screens are small and change everywhere at once: zlib, not deltas.
        asked = "zlib" if self._asked == "delta" else self._asked
        return {**self.settings, "screen_encoding": asked, "preprocessing": self.preprocessing.to_json()}

    def setup(self, client: Client, first: StepResult | None) -> None:
        assert first is not None  # needs_probe
        shape = tuple(first.observation.get("screen_shape") or ())
        if not shape:
            raise ProtocolError(
                f"An Atari observation needs 'screen_shape'; got fields {sorted(first.observation)}"
            )
        legal = first.observation.get("legal_actions") or []
        if not legal:
            raise ProtocolError("The Atari server sent no legal_actions; cannot size the action space")
        if self.preprocessing is not None and "preprocessing" not in first.metadata:
            raise ProtocolError(
                f"{client.base_url} does not preprocess Atari screens (the official atari_env, say): make "
                "the env without preprocessing= and wrap it in gymnasium's AtariPreprocessing instead",
                url=client.base_url,
            )
        self.observation_space = self._space(shape)
        self.action_space = spaces.Discrete(len(legal))
        self.screen = np.zeros(shape, dtype=np.uint8)
        self._frame_number = None
        self._read_action_meanings(first.metadata)
        if self.screen_encoding == "auto" and "delta" in (first.metadata.get("screen_encodings") or ()):
            self._asked = "delta"

    def encode_action(self, action: Any) -> dict[str, Any]:
        return {"action_id": int(action)}

    def decode(self, result: StepResult, sent: dict[str, Any] | None) -> Transition:
        reset = sent is None
        raw = result.observation
        metadata = result.metadata
        shape = tuple(raw.get("screen_shape") or self.screen.shape)
        encoded = raw.get("screen_b64")
        if encoded is not None:
            data = base64.b64decode(encoded)
            encoding = raw.get("screen_encoding")
            if encoding == "delta":
                screen = self._apply_delta(data, shape, raw.get("screen_base"))
            else:
                if encoding == "zlib":
                    data = zlib.decompress(data)
                screen = np.frombuffer(data, dtype=np.uint8).reshape(shape).copy()
        else:
            screen = np.asarray(raw.get("screen", ()), dtype=np.uint8).reshape(shape)
        self._frame_number = raw.get("frame_number")
        if reset:
            self._read_action_meanings(metadata)
        self.screen = screen
        self.lives = int(raw.get("lives") or 0)  # a null: warned about once, by the info schema
        self.game_over = result.done

        info = base_info(result)
        for key in ("lives", "episode_frame_number", "frame_number"):
            if key in raw:
                info[key] = raw[key]
        for name in self.raw_fields_left_out:  # keep info light: the screen is the observation
            raw.pop(name, None)
        terminated = truncated = False
        if result.done:
            reason = metadata.get("end_reason", "game_over")
            info["end_reason"] = reason
            truncated = reason == "frame_limit"
            terminated = not truncated
        reward = 0.0 if result.reward is None else result.reward
        if self.clip_reward:
            info["unclipped_reward"] = reward
            reward = float(np.sign(reward))
        return Transition(self._observe(screen, reset), reward, terminated, truncated, info)

    def _space(self, shape: tuple[int, ...]) -> spaces.Box:
        """The observation space for screens of ``shape``: what the client-side preprocessing (a channel
        axis, scaling) and stacking make of them, as gymnasium's wrappers declare theirs."""
        if self._client_preprocessing["grayscale_newaxis"] and len(shape) == 2:
            shape = (*shape, 1)
        if self.frame_stack is not None:
            shape = (self.frame_stack, *shape)
        if self._client_preprocessing["scale_obs"]:
            return spaces.Box(0.0, 1.0, shape, dtype=np.float32)
        return spaces.Box(0, 255, shape, dtype=np.uint8)

    def _observe(self, screen: np.ndarray, reset: bool) -> np.ndarray:
        """The observation of ``screen``: the screen itself, or (preprocessing on the client's side) with
        a channel axis, scaled to [0, 1], and stacked with the ones before."""
        observation = screen.copy()
        if self._client_preprocessing["grayscale_newaxis"] and observation.ndim == 2:
            observation = observation[..., None]
        if self._client_preprocessing["scale_obs"]:
            observation = np.asarray(observation, dtype=np.float32) / 255.0
        if self.frame_stack is None:
            return observation
        if reset:  # FrameStackObservation's padding_type="reset": the first observation, repeated
            self._stack.extend([observation] * self.frame_stack)
        else:
            self._stack.append(observation)
        return np.stack(self._stack)

    def describe_action(self, action: Any) -> str:
        index = int(action)
        meanings = self._action_meanings
        return meanings[index] if index < len(meanings) else str(index)

    def record(self, action: Any, observation: Any, info: dict[str, Any]) -> dict[str, Any]:
        """The screen as PNG bytes (a few KB; never the raw array; the newest of a stack, the preprocessed
        one when the server preprocesses), lives and frame counters."""
        screen = self.screen
        return {
            "screen_png": encode_png(screen) if screen.ndim >= 2 else None,
            "lives": int(info["lives"]),
            "frame_number": int(info["episode_frame_number"]),
            "end_reason": info["end_reason"] or None,  # the info's neutral value is the recording's null
        }

    def trajectory_metadata(self) -> dict[str, Any]:
        return {
            "game": self.settings.get("game"),
            "obs_type": self.settings.get("obs_type"),
            "action_meanings": self.get_action_meanings(),
            "preprocessing": None if self.preprocessing is None else self.preprocessing.to_json(),
            "served_game": self.served_game,
        }

    def _apply_delta(self, delta: bytes, shape: tuple[int, ...], base: Any) -> np.ndarray:
        """The screen that ``delta`` makes of the last screen, which must be the one it was made against."""
        if base is None or base != self._frame_number or self.screen.shape != shape:
            raise ProtocolError(
                f"The server sent the changes to the screen of frame {base} (shape {shape}), but the last "
                f"screen this env decoded is that of frame {self._frame_number} (shape {self.screen.shape}): "
                "the screens are out of step. Reset the env, or make it with screen_encoding='zlib'."
            )
        try:
            return apply_delta(self.screen, delta)
        except ValueError as exc:
            raise ProtocolError(f"The server sent a malformed screen delta: {exc}") from None

    def _read_action_meanings(self, metadata: dict[str, Any]) -> None:
        """Read a reset's metadata: the game's action meanings, and the game the server says it runs
        (refused when it is not the one asked for, unless the env is made with ``check_identity=False``)."""
        served = metadata.get("game_name")
        if served is not None:
            self.served_game = str(served)
            asked = self.settings.get("game")
            if self.check_identity and asked is not None and game_id(self.served_game) != asked:
                raise EnvironmentMismatch(
                    f"game={asked!r} was asked for, but the server runs {self.served_game!r} (the official "
                    "atari_env plays the game it was started with: ATARI_GAME). Start the server with that "
                    "game, use our server (it plays the game each reset asks for), or pass "
                    "check_identity=False to play what the server runs.",
                    asked=asked,
                    reported=self.served_game,
                )
        if "action_meanings" in metadata:
            # The official server sends "Action.NOOP"; ale-py's names are "NOOP".
            self._action_meanings = [str(m).removeprefix("Action.") for m in metadata["action_meanings"]]

    def render(self, mode: str) -> Any:
        if mode == "rgb_array":
            if self.screen.ndim == 3:
                return self.screen.copy()
            if self.screen.ndim == 2:
                return np.repeat(self.screen[:, :, None], 3, axis=2)
            raise ValueError("A RAM observation has no picture: make the env with obs_type='rgb' to render")
        return super().render(mode)
