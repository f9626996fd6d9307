"""Screen deltas (``openenv_lab.screen_delta``), and the Atari server's ``screen_encoding="delta"``."""

from __future__ import annotations

import base64
import zlib

import numpy as np
import pytest

from openenv_lab.screen_delta import MAX_CHANGED_FRACTION, apply_delta, changed_pixels, pack_delta


def encode_delta(screen, previous):
    """The delta from ``previous`` to ``screen``, both compared and sent as they are."""
    touched = changed_pixels(screen, previous)
    if touched is None:
        return None
    channels = screen.shape[-1] if screen.ndim == 3 else 1
    return pack_delta(screen.shape, touched, screen.reshape(-1, channels)[touched])


@pytest.mark.parametrize("shape", [(210, 160, 3), (210, 160), (128,), (7, 5, 3), (3, 3), (300, 300)])
@pytest.mark.parametrize("changed", [0, 1, 37])
def test_a_delta_turns_the_previous_frame_into_the_new_one(shape, changed):
    rng = np.random.default_rng(changed)
    previous = rng.integers(0, 256, shape, dtype=np.uint8)
    screen = previous.copy()
    flat = screen.reshape(-1)
    flat[rng.choice(flat.size, size=min(changed, flat.size // 40), replace=False)] ^= 0xFF
    delta = encode_delta(screen, previous)
    assert delta is not None
    rebuilt = apply_delta(previous, delta)
    np.testing.assert_array_equal(rebuilt, screen)
    assert rebuilt is not previous and not np.shares_memory(rebuilt, previous)
    if changed == 0:
        assert delta == b""


def test_a_delta_of_a_pong_sized_change_is_small():
    previous = np.zeros((210, 160, 3), np.uint8)
    screen = previous.copy()
    screen[100:104, 80:82] = 236  # the ball: 8 pixels
    delta = encode_delta(screen, previous)
    assert delta is not None and len(delta) <= 2 * 8 * 5  # at most two entries per changed 32-bit word


def test_too_many_changed_pixels_ask_for_a_whole_screen():
    previous = np.zeros((210, 160, 3), np.uint8)
    screen = previous.copy()
    rows = int(210 * MAX_CHANGED_FRACTION) + 2
    screen[:rows] = 1
    assert encode_delta(screen, previous) is None


def test_malformed_deltas_are_refused():
    previous = np.zeros((210, 160, 3), np.uint8)
    with pytest.raises(ValueError, match="multiple of 5 bytes"):
        apply_delta(previous, b"\x00" * 7)
    out_of_range = np.array([40_000], "<u2").tobytes() + b"\x01\x02\x03"
    with pytest.raises(ValueError, match="pixel 40000 of a 33600-pixel screen"):
        apply_delta(previous, out_of_range)
    assert not previous.any()  # left as it was
    with pytest.raises(TypeError, match="uint8"):
        apply_delta(previous.astype(np.float32), b"")


@pytest.fixture
def atari():
    from openenv_lab.servers.atari import AtariAction, AtariEnvironment

    env = AtariEnvironment(game="pong")
    yield env, AtariAction
    env.close()


def decode(observation, previous):
    data = base64.b64decode(observation.screen_b64)
    if observation.screen_encoding == "delta":
        return apply_delta(previous, data)
    return np.frombuffer(zlib.decompress(data), np.uint8).reshape(observation.screen_shape)


def test_the_server_sends_a_whole_frame_then_deltas_against_the_frame_before(atari):
    env, action = atari
    first = env.reset(seed=0, screen_encoding="delta")
    assert first.screen_encoding == "zlib" and first.screen_base is None
    assert "delta" in first.metadata["screen_encodings"]
    screen, number = decode(first, None), first.frame_number
    encodings = []
    for step in range(40):
        observation = env.step(action(action_id=step % 6))
        encodings.append(observation.screen_encoding)
        if observation.screen_encoding == "delta":
            assert observation.screen_base == number
        assert observation.screen == []
        screen, number = decode(observation, screen), observation.frame_number
        np.testing.assert_array_equal(screen, env._ale.getScreenRGB())
    # Pong's first step draws the court (a whole screen); then a few hundred pixels change per step.
    assert encodings[1:] == ["delta"] * 39
    again = env.reset(screen_encoding="delta")
    assert again.screen_encoding == "zlib"  # a new episode starts whole


def test_the_server_sends_a_whole_screen_when_a_delta_would_not_pay(atari, monkeypatch):
    env, action = atari
    env.reset(seed=0, screen_encoding="delta")
    monkeypatch.setattr("openenv_lab.servers.atari.changed_pixels", lambda screen, previous: None)
    observation = env.step(action(action_id=0))
    assert observation.screen_encoding == "zlib" and observation.screen_base is None
    np.testing.assert_array_equal(decode(observation, None), env._ale.getScreenRGB())


def test_colours_come_from_the_palette_once_learnt_and_from_the_screen_if_it_is_not_one(atari, monkeypatch):
    env, action = atari
    env.reset(seed=0, screen_encoding="delta")
    screen = None
    for step in range(20):
        observation = env.step(action(action_id=step % 6))
        screen = decode(observation, screen)
    assert env._palette_ok and env._known.sum() >= 3  # Pong's court, paddles and ball
    renders = []
    real_screen = env._screen
    monkeypatch.setattr(env, "_screen", lambda: renders.append(1) or real_screen())
    for step in range(20):
        observation = env.step(action(action_id=step % 6))
        screen = decode(observation, screen)
        np.testing.assert_array_equal(screen, env._ale.getScreenRGB())
    assert renders == []  # deltas from the palette: no RGB screen rendered

    # An index shown in two colours (as colour averaging would do): colours come from the screen from then on.
    assert env._ale.getScreen()[0, 0] == env._ale.getScreen()[0, 1]  # both the court's border

    def two_colours():
        rgb = real_screen().copy()
        rgb[0, 0] = rgb[0, 1] ^ 0xFF
        return rgb

    env._known[:] = False
    monkeypatch.setattr(env, "_screen", two_colours)
    env.step(action(action_id=0))
    assert not env._palette_ok and env._palette is None
