"""Our Atari OpenEnv server: the Arcade Learning Environment (ale-py, ROMs included), one game per session.

Wire-compatible with the official ``atari_env``: action ``{"action_id": int, ...}`` (an index into the
game's action set; the official client's extra ``game_name``/``obs_type``/``full_action_space`` fields are
accepted and ignored), observation ``screen`` (the screen as a flat list of ints), ``screen_shape``,
``legal_actions``, ``lives``, ``episode_frame_number``, ``frame_number`` plus ``done``/``reward``.
Additions, invisible to clients that do not ask for them:

- the game and its settings are chosen per session, at ``reset``: ``game``, ``obs_type`` (``rgb``,
  ``grayscale``, ``ram``), ``frameskip``, ``repeat_action_probability`` (sticky actions),
  ``full_action_space``, ``mode``, ``difficulty``, ``max_num_frames_per_episode``;
- ``reset(seed=s)`` seeds the ALE exactly as gymnasium's ``ALE/...-v5`` environments do, so the same
  seed and actions give the same screens as ``gym.make("ALE/Pong-v5")``; the seed is echoed in metadata;
- compact screens: ``reset(screen_encoding="zlib")`` (or ``"raw"``) makes every observation of the
  session carry the screen as base64 in ``screen_b64`` (zlib-compressed or raw bytes) with ``screen``
  left empty: a small fraction of the JSON list's bytes, and none of its encoding work per step.
  ``screen_encoding="delta"`` sends only the pixels that changed since the screen sent before (a screen
  delta: ``screen_encoding="delta"``, with ``screen_base`` the ``frame_number`` of that screen; layout in
  ``openenv_lab.screen_delta``), and a whole zlib screen after a reset or when much of it changed:
  about as small as zlib, and cheaper to make and to read. The reset metadata lists the encodings offered
  (``screen_encodings``), so clients can pick the best one the server has;
- ``reset(preprocessing={...})`` computes gymnasium's ``AtariPreprocessing`` on the server (no-op starts,
  frame skipping with max-pooling, grayscale, the resize, optionally a lost life as an episode's end) and
  sends only its small screens (`openenv_lab.servers.atari_preprocessing`); it needs ``frameskip=1``;
- metadata says why an episode ended: ``end_reason`` is ``game_over`` (a real end), ``life_lost`` (with
  preprocessing's ``terminal_on_life_loss``) or ``frame_limit`` (``max_num_frames_per_episode`` reached: a
  truncation). Action meanings (``NOOP``, ``FIRE``...) are in
  the reset metadata.

Rewards are the sum of the ALE's rewards over the ``frameskip`` frames of a step, as in gymnasium.
"""

from __future__ import annotations

import base64
import difflib
import functools
import uuid
import zlib
from typing import Any

import ale_py
import numpy as np
from ale_py import ALEInterface, roms
from pydantic import Field

from ..screen_delta import changed_pixels, pack_delta
from ._app import build_app
from ._base import Action, Observation, ServerEnvironment, State
from .atari_preprocessing import Preprocessing, Preprocessor
from .catalogue import BUNDLED_SERVERS

__all__ = ["AtariAction", "AtariEnvironment", "AtariObservation", "AtariState", "available_games", "make_app"]

#: The options and their ranges (the catalogue declares them once).
SPEC = BUNDLED_SERVERS["atari"]
SCREEN_ENCODINGS: tuple[str, ...] = SPEC.option("screen_encoding").choices or ()
#: gymnasium's ALE/...-v5 limit: 108,000 frames (30 minutes of play at 60 frames per second).


@functools.lru_cache(maxsize=1)
def available_games() -> tuple[str, ...]:
    """The games whose ROMs ship with ale-py (108 in ale-py 0.12)."""
    return tuple(sorted(roms.get_all_rom_ids()))


class AtariAction(Action):
    """An index into the game's action set (``legal_actions``)."""

    action_id: int = Field(..., ge=0, description="Index into the action set of the session's game")
    game_name: str = Field(default="pong", description="Ignored: the game is chosen at reset")
    obs_type: str = Field(default="rgb", description="Ignored: the observation type is chosen at reset")
    full_action_space: bool = Field(default=False, description="Ignored: chosen at reset")


class AtariObservation(Observation):
    """The screen (or RAM) after the step, and the game's counters."""

    screen: list[int] = Field(default_factory=list, description="The screen, flattened row-major")
    screen_shape: list[int] = Field(default_factory=list, description="[210, 160, 3], [210, 160] or [128]")
    legal_actions: list[int] = Field(default_factory=list, description="Valid action_id values")
    lives: int = 0
    episode_frame_number: int = 0
    frame_number: int = 0
    screen_b64: str | None = Field(
        default=None, description="With screen_encoding raw, zlib or delta: the screen's bytes in base64"
    )
    screen_encoding: str | None = Field(
        default=None, description="'raw', 'zlib' or 'delta' when screen_b64 is set"
    )
    screen_base: int | None = Field(
        default=None, description="For a delta: the frame_number of the screen it applies to"
    )


class AtariState(State):
    game_name: str = "pong"
    obs_type: str = "rgb"
    full_action_space: bool = False
    mode: int | None = None
    difficulty: int | None = None
    repeat_action_probability: float = 0.0
    frameskip: int = 4
    seed: int | None = None


class AtariEnvironment(ServerEnvironment):
    """One ALE per session; the settings given to the constructor are defaults each reset can change."""

    NAME = "atari"

    def __init__(self, **defaults: Any) -> None:
        """``defaults``: any of the server's options (its ``serve atari`` flags, declared in
        `openenv_lab.servers.BUNDLED_SERVERS`), which each reset can change."""
        super().__init__()
        self._defaults: dict[str, Any] = {**SPEC.defaults(**defaults), "mode": None, "difficulty": None}
        _check_settings(self._defaults)
        self._ale: ALEInterface | None = None
        self._loaded: tuple[Any, ...] | None = None
        self._settings = dict(self._defaults)
        self._actions: list[Any] = []
        self._encoding = "json"
        # For screen deltas: the last screen sent (palette indices, or RAM) and its frame_number, and the
        # colours of the palette indices seen so far (learnt from whole screens).
        self._sent: tuple[np.ndarray, int] | None = None
        self._palette: np.ndarray | None = None
        self._known = np.zeros(256, dtype=bool)
        self._palette_ok = True
        self._preprocessor: Preprocessor | None = None
        self._rng: np.random.Generator | None = None  # draws the no-ops of preprocessing, as ALE's np_random
        self._state = AtariState()

    # ------------------------------------------------------------------ OpenEnv interface

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        screen_encoding: str = "json",
        preprocessing: Any = None,
        **settings: Any,
    ) -> AtariObservation:
        unknown = set(settings) - set(self._defaults)
        SPEC.refuse_unknown(unknown)
        SPEC.check(seed=seed, screen_encoding=screen_encoding)
        chosen = {**self._defaults, **{k: v for k, v in settings.items() if v is not None}}
        _check_settings(chosen)
        prepared = None if preprocessing is None else Preprocessing.from_request(preprocessing)
        if prepared is not None and chosen["frameskip"] != 1:
            raise ValueError(
                "preprocessing skips frames itself (its frame_skip): reset with frameskip=1, as gymnasium's "
                "AtariPreprocessing needs"
            )
        self.check_reply_size(_reply_bytes(chosen["obs_type"], prepared, screen_encoding), "This reset")
        self._load(chosen, seed)
        ale = self._ale
        assert ale is not None
        if seed is not None or self._rng is None:
            self._rng = _generator(seed)
        ale.reset_game()
        self._preprocessor = None
        screen = None
        if prepared is not None:
            if prepared.noop_max > 0 and self._actions[0].name != "NOOP":
                raise ValueError(f"{chosen['game']}'s first action is not NOOP: preprocess with noop_max=0")
            self._preprocessor = Preprocessor(prepared, ale, self._actions[0])

            def restart() -> None:  # the game ended during the no-ops: start it again, as the wrapper does
                if seed is not None:
                    self._load(chosen, seed, again=True)
                    self._rng = _generator(seed)
                ale.reset_game()

            screen = self._preprocessor.reset(self._rng, restart)
        self._encoding = screen_encoding
        self._sent = None  # a new episode starts with a whole screen
        self._palette, self._palette_ok = None, True  # the ROM or obs_type may have changed
        self._state = AtariState(
            episode_id=episode_id or str(uuid.uuid4()),
            step_count=0,
            game_name=chosen["game"],
            obs_type=chosen["obs_type"],
            full_action_space=chosen["full_action_space"],
            mode=chosen["mode"],
            difficulty=chosen["difficulty"],
            repeat_action_probability=chosen["repeat_action_probability"],
            frameskip=chosen["frameskip"],
            seed=seed,
        )
        metadata: dict[str, Any] = {
            "game_name": chosen["game"],
            "action_meanings": [action.name for action in self._actions],
            "frameskip": chosen["frameskip"],
            "screen_encoding": screen_encoding,
            "screen_encodings": list(SCREEN_ENCODINGS),
        }
        if prepared is not None:
            metadata["preprocessing"] = prepared.to_json()
        if seed is not None:
            metadata["seed"] = seed
        return self._observation(0.0, metadata, screen)

    def step(self, action: AtariAction, timeout_s: float | None = None, **kwargs: Any) -> AtariObservation:
        ale = self._ale
        if ale is None:
            raise ValueError("Send a reset before the first step: no game is loaded yet")
        if ale.game_over():
            raise ValueError("The episode is over; send a reset to start a new one")
        if action.action_id >= len(self._actions):
            raise ValueError(
                f"Invalid action_id: {action.action_id}. Valid range: [0, {len(self._actions) - 1}] "
                f"for {self._state.game_name}"
            )
        ale_action = self._actions[action.action_id]
        self._update_state(step_count=self._state.step_count + 1)
        if self._preprocessor is not None:
            screen, reward, terminated, truncated = self._preprocessor.step(ale_action)
            if terminated or truncated:
                return self._observation(reward, {}, screen, ended=_end_reason(ale, terminated, truncated))
            return self._observation(reward, {}, screen, ended=None)
        reward = 0.0
        for _ in range(self._state.frameskip):
            reward += ale.act(ale_action)
        return self._observation(reward, {})

    def describe(self) -> str:
        return (
            f"The Arcade Learning Environment ({len(available_games())} games), wire-compatible with "
            "OpenEnv's atari_env, with the game chosen per session, seeded resets and compact screens."
        )

    def close(self) -> None:
        self._ale = None
        self._loaded = None

    # ------------------------------------------------------------------ helpers

    def _load(self, settings: dict[str, Any], seed: int | None, *, again: bool = False) -> None:
        """Load the ROM (and seed the ALE) when the game, its settings, the seed or ``again`` ask for it."""
        key = (
            settings["game"],
            settings["repeat_action_probability"],
            settings["full_action_space"],
            settings["mode"],
            settings["difficulty"],
            settings["max_num_frames_per_episode"],
        )
        if self._ale is not None and key == self._loaded and seed is None and not again:
            self._settings = settings
            return
        if self._ale is None:
            self._ale = ALEInterface()
            self._ale.setLoggerMode(ale_py.LoggerMode.Error)
        ale = self._ale
        ale.setFloat("repeat_action_probability", float(settings["repeat_action_probability"]))
        ale.setInt("max_num_frames_per_episode", int(settings["max_num_frames_per_episode"]))
        # The seeding of gymnasium's ALE/...-v5 environments, so equal seeds give equal episodes.
        ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)[1]
        ale.setInt("random_seed", np.int32(ale_seed))
        ale.loadROM(roms.get_rom_path(settings["game"]))
        for name, available, choose in (
            ("mode", ale.getAvailableModes, ale.setMode),
            ("difficulty", ale.getAvailableDifficulties, ale.setDifficulty),
        ):
            if settings[name] is not None:
                valid = [int(v) for v in available()]
                if settings[name] not in valid:
                    self._loaded = None  # the ROM is loaded, but not with these settings
                    raise ValueError(
                        f"{settings['game']} has no {name} {settings[name]!r}; its {name}s are "
                        f"{', '.join(map(str, valid))}"
                    )
                choose(settings[name])
        self._actions = list(
            ale.getLegalActionSet() if settings["full_action_space"] else ale.getMinimalActionSet()
        )
        self._loaded = key
        self._settings = settings

    def _screen(self) -> np.ndarray:
        ale = self._ale
        assert ale is not None
        obs_type = self._state.obs_type
        if obs_type == "rgb":
            return ale.getScreenRGB()
        if obs_type == "grayscale":
            return ale.getScreenGrayscale()
        return ale.getRAM()

    def _observation(
        self,
        reward: float,
        metadata: dict[str, Any],
        screen: np.ndarray | None = None,
        *,
        ended: str | bool | None = False,
    ) -> AtariObservation:
        """The observation of the emulator as it is now, or of ``screen`` (a preprocessed one); ``ended``
        is the episode's end reason (None: it goes on) when the caller knows it, else the ALE says."""
        ale = self._ale
        assert ale is not None
        if ended is False:
            ended = _end_reason(ale, ale.game_over(with_truncation=False), ale.game_truncated())
        done = ended is not None
        if done:
            metadata["end_reason"] = ended
        frame_number = ale.getFrameNumber()
        fields: dict[str, Any] = {}
        delta = self._delta(frame_number) if self._encoding == "delta" and screen is None else None
        if delta is not None:
            data, shape, fields["screen_base"] = delta
            fields["screen_b64"] = base64.b64encode(data).decode("ascii")
            fields["screen_encoding"] = "delta"
        else:
            if screen is None:
                screen = self._screen()
            shape = screen.shape
            if self._encoding == "json":
                fields["screen"] = screen.reshape(-1).tolist()
            else:
                data = screen.tobytes()
                encoding = "zlib" if self._encoding == "delta" else self._encoding  # a whole screen
                if encoding == "zlib":
                    data = zlib.compress(data, 1)
                fields["screen_b64"] = base64.b64encode(data).decode("ascii")
                fields["screen_encoding"] = encoding
        return AtariObservation(
            screen_shape=list(shape),
            legal_actions=list(range(len(self._actions))),
            lives=ale.lives(),
            episode_frame_number=ale.getEpisodeFrameNumber(),
            frame_number=frame_number,
            done=done,
            reward=reward,
            metadata=metadata,
            **fields,
        )

    def _delta(self, frame_number: int) -> tuple[bytes, tuple[int, ...], int] | None:
        """The changes since the last screen sent: the delta, the screen's shape and the frame_number the
        delta applies to. None when a whole screen should go (a new episode, too many changes).

        Screens are compared as the ALE's palette indices (``getScreen``), a third of the bytes of RGB and
        no RGB screen to render (``getScreenRGB`` costs more than the comparison).
        """
        ale = self._ale
        assert ale is not None
        ram = self._state.obs_type == "ram"
        screen = ale.getRAM() if ram else ale.getScreen()
        sent, self._sent = self._sent, (screen, frame_number)
        if sent is None or sent[0].shape != screen.shape:
            return None
        touched = changed_pixels(screen, sent[0])
        if touched is None:
            return None
        if ram:
            return pack_delta(screen.shape, touched, screen[touched]), screen.shape, sent[1]
        shape = screen.shape if self._state.obs_type == "grayscale" else (*screen.shape, 3)
        return pack_delta(shape, touched, self._colours(screen, touched)), shape, sent[1]

    def _colours(self, screen: np.ndarray, touched: np.ndarray) -> np.ndarray:
        """The colours (RGB or grey, as the obs_type asks) of pixels ``touched`` of a palette-index screen."""
        codes = screen.reshape(-1)[touched]
        if self._palette is not None and self._known[codes].all():
            return self._palette[codes]
        # A colour not seen yet: render the whole screen and learn the colour of every index on it.
        pixels = self._screen().reshape(screen.size, -1)
        if self._palette_ok:
            flat = screen.reshape(-1)
            if self._palette is None:
                self._palette = np.zeros((256, pixels.shape[1]), dtype=np.uint8)
                self._known[:] = False
            self._palette[flat] = pixels
            # One colour per index is what the ALE does (without colour averaging); if not, stop learning.
            self._palette_ok = bool((self._palette[flat] == pixels).all())
            self._known[flat] = self._palette_ok
            if not self._palette_ok:
                self._palette = None
        return pixels[touched]


#: The ALE's screen (every game's), and the bytes of an observation's other fields, at most.
_ALE_SCREEN = (210, 160)
_OTHER_FIELDS_BYTES = 4096


def _reply_bytes(obs_type: str, prepared: Preprocessing | None, encoding: str) -> int:
    """The most bytes an observation of these settings takes as JSON: a JSON list's value is at most 4
    bytes (``255,``); base64 makes 4 bytes of 3, and zlib may add a little to incompressible screens."""
    if prepared is not None:
        width, height = prepared.screen_size
        values = width * height * (1 if prepared.grayscale_obs else 3)
    else:
        values = {"rgb": 3, "grayscale": 1}.get(obs_type, 0) * _ALE_SCREEN[0] * _ALE_SCREEN[1] or 128
    screen = 4 * values if encoding == "json" else 4 * (values + values // 1000 + 64) // 3 + 4
    return screen + _OTHER_FIELDS_BYTES


def _end_reason(ale: Any, terminated: bool, truncated: bool) -> str | None:
    """Why an episode ended (None: it did not): the game, a life (preprocessing), or the frame limit."""
    if terminated:
        return "game_over" if ale.game_over(with_truncation=False) else "life_lost"
    return "frame_limit" if truncated else None


def _generator(seed: int | None) -> np.random.Generator:
    """The generator gymnasium's ``ALE/...-v5`` keeps as ``np_random`` after ``reset(seed=seed)``."""
    np_seed = np.random.SeedSequence(seed).generate_state(n_words=2)[0]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(np_seed))))


def _check_settings(settings: dict[str, Any]) -> None:
    game = settings["game"]
    if game not in available_games():
        close = difflib.get_close_matches(str(game).lower(), available_games(), n=3)
        hint = f"Did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise ValueError(f"Unknown game {game!r}. {hint}Available games: {', '.join(available_games())}")
    SPEC.check(**{name: value for name, value in settings.items() if name != "game"})


def make_app(max_sessions: int = 16, **options: Any) -> Any:
    """The FastAPI app of the Atari server; ``options`` (its ``serve atari`` flags) are the defaults each
    reset can change."""
    factory = functools.partial(AtariEnvironment, **options)
    factory()  # fail now, at server start, on bad defaults (an unknown game, say)
    return build_app(
        factory, AtariAction, AtariObservation, AtariState, env_name="atari", max_sessions=max_sessions
    )
